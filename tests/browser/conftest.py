"""What the browser tests share: Chromium (Debian's, never a downloaded one), a JupyterLab server on
a copy of the repository, and the summary of the widget controls that ``make test-browser`` prints
at the end.

Without ``--run-browser`` every test here is skipped (see the root ``conftest.py``); with it, a
machine where ``/usr/bin/chromium`` or Playwright is missing skips them with the reason.
"""

import json
import os
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
OUT = ROOT / "build" / "browser"  # screenshots and one JSON record of the controls per notebook
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def require_browser() -> None:
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: `make test-browser` installs it with `apt-get install -y "
            f"chromium`, "
            "which did not work on this machine (no root or no package mirror)"
        )
    pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: run `make test-browser`"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_lab_settings(settings_dir: Path) -> None:
    """No news pop-up (it would cover the notebook on first start); every cell rendered, not only
    those near the viewport, so every markdown image loads and every widget can be found."""
    settings = {
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "notebook-extension/tracker": {"windowingMode": "none"},
    }
    for name, values in settings.items():
        path = settings_dir / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A JupyterLab server, as ``make lab`` starts it, on a copy of the repository's notebooks,
    images, results and notation card (running a notebook saves its outputs); yields
    ``(base_url, token, log_path)``."""
    require_browser()
    work = tmp_path_factory.mktemp("lab")
    root = work / "course"
    # results/: notebooks 06 and 10 read the committed runs
    for folder in ("notebooks", "images", "results"):
        shutil.copytree(ROOT / folder, root / folder)
    shutil.copy(ROOT / "NOTATION.md", root / "NOTATION.md")
    write_lab_settings(work / "settings")
    token, port = secrets.token_hex(16), free_port()
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(work / "settings"),
        "OMP_NUM_THREADS": "1",
        "JUPYTERLAB_WORKSPACES_DIR": str(work / "workspaces"),
        "JUPYTER_CONFIG_DIR": str(work / "config"),
        "CUDA_VISIBLE_DEVICES": "",
    }
    env.pop("MPLBACKEND", None)  # a non-interactive backend would hide the inline figures
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log_path = work / "lab.log"
    log = log_path.open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
    yield base, token, log_path
    server.terminate()
    server.wait(timeout=30)
    log.close()


@pytest.fixture(scope="session")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def pytest_sessionstart(session):
    """Start from an empty build/browser/ (once, in the process that collects the workers' records).
    """
    if not hasattr(session.config, "workerinput") and session.config.getoption("--run-browser"):
        for path in [*OUT.glob("*.json"), *OUT.glob("*.png"), *OUT.glob("site/*.json")]:
            path.unlink()


def pytest_terminal_summary(terminalreporter):
    """The widget count over every notebook that ran: controls found, controls that redrew; and on
    the static site, the explorers and the controls moved (each picture checked against the widget's
    own)."""
    site = OUT / "site" / "summary.json"
    if site.exists() and not hasattr(terminalreporter.config, "workerinput"):
        moved = json.loads(site.read_text())
        terminalreporter.write_line(
            f"site: {moved['explorers']} explorers, {moved['controls_moved']} controls moved, "
            "each picture the widget's own"
        )
    records = [
        json.loads(p.read_text()) for p in sorted(OUT.glob("*.json")) if p.name != "summary.json"
    ]
    if not records or hasattr(terminalreporter.config, "workerinput"):
        return
    found = sum(r["controls_found"] for r in records)
    redrew = sum(r["controls_redrew"] for r in records)
    summary = {
        "notebooks": len(records),
        "controls_found": found,
        "controls_redrew": redrew,
        "screenshots": sorted(str(p.relative_to(ROOT)) for p in OUT.glob("*.png")),
    }
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    terminalreporter.write_line(
        f"browser: {len(records)} notebooks, {found} widget controls found, {redrew} redrew; "
        f"screenshots in {OUT.relative_to(ROOT)}/"
    )
