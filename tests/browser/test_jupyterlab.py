"""The widgets work in a real JupyterLab: run notebook 02 in headless Chromium and move a head slider.

``make test-browser`` installs Debian's chromium and Playwright, then runs this file with ``--run-browser``
(without that flag it is skipped, so ``pytest tests`` never starts a browser). It starts JupyterLab on
127.0.0.1 with a random token over a copy of the notebooks (running them saves outputs), runs every cell of
02_multi_head_attention, focuses the slider of the head explorer, presses ArrowRight and waits for the
attention picture below it to change. The screenshot is saved in ``build/browser/``.
"""

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
NOTEBOOK = "02_multi_head_attention.ipynb"
SCREENSHOTS = ROOT / "build" / "browser"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]

pytestmark = pytest.mark.browser


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_quiet_lab_settings(settings_dir: Path) -> None:
    """Turn off the news and update pop-up, which would otherwise cover the notebook on first start."""
    path = settings_dir / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the notebooks; yields its base URL and token."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: `make test-browser` installs it with `apt-get install -y chromium`, "
                    "which did not work on this machine (no root or no package mirror)")
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: run `make test-browser`")
    work = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", work / "notebooks")
    write_quiet_lab_settings(work / "settings")
    token, port = secrets.token_hex(16), free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"), "JUPYTER_CONFIG_DIR": str(work / "config")}
    env.pop("MPLBACKEND", None)  # a non-interactive backend would hide the inline figures
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work / 'notebooks'}",
               "--LabApp.expose_app_in_browser=True"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = (work / "lab.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start:\n{(work / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
    yield base, token
    server.terminate()
    server.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def page(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        browser.close()


def test_head_slider_redraws_the_attention_picture(lab, page):
    from playwright.sync_api import expect

    base, token = lab
    page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=60_000)
    # wait for the kernel, then run every cell
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel", timeout=60_000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    head_slider = page.locator(".widget-slider").filter(has=page.get_by_text(re.compile(r"^head$"), exact=True))
    head_slider.first.wait_for(timeout=120_000)
    cell = page.locator(".jp-CodeCell").filter(has=head_slider)
    picture = cell.locator(".jp-OutputArea-output img").first
    picture.wait_for(timeout=30_000)
    cell.scroll_into_view_if_needed()  # JupyterLab renders only what is near the viewport
    before = picture.get_attribute("src")
    handle = head_slider.locator(".noUi-handle").first
    assert handle.get_attribute("aria-valuetext") == "0"

    handle.focus()
    page.keyboard.press("ArrowRight")
    expect(handle).to_have_attribute("aria-valuetext", "1")
    # the kernel redraws and updates the output in place: JupyterLab puts a new <img> there
    expect(picture).not_to_have_attribute("src", before, timeout=30_000)
    expect(picture).to_have_attribute("src", re.compile(r"^data:image/png"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "02_head_slider.png"))
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    tracebacks = [text for text in errors.all_inner_texts() if "Traceback" in text or "Error" in text]
    assert not tracebacks, tracebacks[0]
