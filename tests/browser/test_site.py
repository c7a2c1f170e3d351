"""The static site of ``make site`` read in Chromium: every page opens, every image loads, every
link works, nothing is requested from outside the site, no script error; every control of every
explorer moves its picture, and the picture shown is the one the widget itself draws for the values
shown.

The site is served over HTTP from ``build/site/`` (``make test-browser`` builds it first). Requests
to other hosts are refused and recorded: the test proves the pages need nothing but the site itself.
The widgets are rebuilt from the snapshots in the notebooks the site was made from: ``notebooks/``,
or the folder in ``SITE_NOTEBOOKS`` for a site built with ``tools/make_site.py --notebooks``.
"""

import functools
import http.server
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import pytest

from .conftest import OUT, ROOT

pytestmark = pytest.mark.browser
SITE = ROOT / "build" / "site"
NOTEBOOKS = Path(os.environ.get("SITE_NOTEBOOKS", ROOT / "notebooks"))

LOCAL_LINKS = """() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)
  .filter(href => href.startsWith(location.origin))"""
IMAGES = """() => Array.from(document.images).map(i => ({src: i.getAttribute('src').slice(0, 80),
  complete: i.complete, width: i.naturalWidth}))"""


@pytest.fixture(scope="module")
def site():
    if not (SITE / "index.html").exists():
        pytest.skip("build/site/ is missing: run `make site` (make test-browser does)")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture()
def reader(site, browser):
    """A page that may only reach the site; yields (page, requests refused, script errors, responses
    >= 400)."""
    context = browser.new_context()
    outside, errors, not_found = [], [], []

    def refuse(route):
        outside.append(route.request.url)
        route.abort()

    context.route(lambda url: not url.startswith(site), refuse)
    page = context.new_page()
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda r: not_found.append(r.url) if r.status >= 400 else None)
    yield page, outside, errors, not_found
    context.close()


def site_pages() -> list[str]:
    return sorted(p.stem for p in (SITE / "notebooks").glob("*.html"))


def test_every_page_image_and_link_of_the_site(site, reader):
    page, outside, errors, not_found = reader
    to_visit, visited, checked_links = [f"{site}/index.html"], set(), set()
    notebooks = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    while to_visit:
        url = to_visit.pop()
        if url in visited:
            continue
        visited.add(url)
        page.goto(url)
        page.wait_for_function(f"() => ({IMAGES})().every(i => i.complete)", timeout=30_000)
        broken = [i["src"] for i in page.evaluate(IMAGES) if i["width"] == 0]
        assert not broken, f"{url}: images that did not load: {broken}"
        for link in page.evaluate(LOCAL_LINKS):
            target = urllib.parse.urldefrag(link).url
            if target.endswith(".html"):
                to_visit.append(target)
            elif target not in checked_links:
                with urllib.request.urlopen(target) as answer:  # raises HTTPError on 404
                    assert answer.status == 200, target
                checked_links.add(target)
    pages = {urllib.parse.urlparse(u).path for u in visited}
    assert {f"/notebooks/{n}.html" for n in notebooks} <= pages, sorted(pages)
    assert not not_found, not_found
    assert not outside, f"requests that left the site: {outside}"
    assert not errors, f"script or console errors: {errors}"


def snapshots(notebook: str) -> list[dict]:
    """The widget snapshots of a notebook, in the order make_site numbers its explorers."""
    sys.path.insert(0, str(ROOT / "tools"))
    import make_site

    return [
        s
        for _, _, s in make_site.widget_outputs(
            nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4)
        )
    ]


def displayed_widgets(notebook: str) -> int:
    """How many widgets the notebook displays (each leaves a '[controls: ...]' line in its outputs).
    """
    cells = nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4).cells
    return sum(
        1
        for c in cells
        for o in c.get("outputs", [])
        if o.get("data", {}).get("text/plain", "").startswith("[controls:")
    )


def move(page, control) -> bool:
    """Move one control to another value; True when the explorer's picture changed."""
    explorer = control.locator("xpath=ancestor::div[contains(@class, 'tl-widget')]")
    image = explorer.locator("img.tl-frame")

    def changed(before: str) -> bool:
        try:
            page.wait_for_function(
                "([img, before]) => img.getAttribute('src') !== before",
                arg=[image.element_handle(), before],
                timeout=3_000,
            )
            return True
        except Exception:  # Playwright's TimeoutError: the picture stayed
            return False

    kind = control.evaluate("e => e.type")
    before = image.get_attribute("src")
    if kind == "range":
        control.focus()
        # the other way when it sits at its end
        for key in ("ArrowRight", "ArrowLeft", "ArrowLeft"):
            page.keyboard.press(key)
            if changed(before):
                return True
        return False
    if kind == "checkbox":
        control.click()
        return changed(before)
    now = control.evaluate("e => e.value")
    for value in control.evaluate(
        "e => Array.from(e.options).filter(o => !o.disabled).map(o => o.value)"
    ):
        if value != now:
            control.select_option(value)
            if changed(before):
                return True
            before = image.get_attribute("src")
    return False


def test_every_control_of_every_explorer_shows_the_widgets_own_picture(site, reader):
    import matplotlib

    matplotlib.use("Agg")
    from transformer_lib.teaching.widgets import FigureWidget

    page, outside, errors, _ = reader
    moved, explorers = 0, 0
    for name in site_pages():
        page.goto(f"{site}/notebooks/{name}.html")
        found = page.locator("div.tl-widget")
        assert found.count() == displayed_widgets(name), f"{name}: a widget the page does not move"
        saved = snapshots(name)
        for k in range(found.count()):
            explorer = found.nth(k)
            widget = FigureWidget.restore(saved[int(explorer.get_attribute("data-widget"))])
            explorers += 1
            controls = explorer.locator("[data-control]")
            assert controls.count() >= 1, f"{name}: explorer {k} has nothing to move"
            for c in range(controls.count()):
                control = controls.nth(c)
                label = f"{name}, explorer {k}, control {control.get_attribute('data-control')}"
                control.scroll_into_view_if_needed()
                assert move(page, control), f"{label}: the picture did not change"
                values = json.loads(explorer.get_attribute("data-values"))
                for key in widget.controls:  # in the controls' order, as frames() set them
                    widget.controls[key].value = values[key]
                source = urllib.parse.urljoin(
                    page.url, explorer.locator("img.tl-frame").get_attribute("src")
                )
                with urllib.request.urlopen(source) as answer:
                    assert answer.read() == widget.png, (
                        f"{label}: the picture is not the widget's for {values}"
                    )
                moved += 1
    (OUT / "site").mkdir(parents=True, exist_ok=True)
    (OUT / "site" / "summary.json").write_text(
        json.dumps({"explorers": explorers, "controls_moved": moved})
    )
    assert explorers > 0, "no explorer on any page"
    assert not outside, f"requests that left the site: {outside}"
    assert not errors, f"script or console errors: {errors}"
