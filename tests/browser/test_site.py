"""The static site of ``make site`` read in Chromium: every page opens, every image loads, every link works.

The site is served over HTTP from ``build/site/`` (``make test-browser`` builds it first). Requests to other hosts
(MathJax from its CDN) are refused, so the test proves the pages need nothing but the site itself.
"""

import functools
import http.server
import threading
import urllib.error
import urllib.parse
import urllib.request

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.browser
SITE = ROOT / "build" / "site"

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


def test_every_page_image_and_link_of_the_site(site, browser):
    context = browser.new_context()
    context.route(lambda url: not url.startswith(site), lambda route: route.abort())
    page = context.new_page()
    not_found = []
    page.on("response", lambda r: not_found.append(r.url) if r.status >= 400 else None)
    to_visit, visited, checked_links = [f"{site}/index.html"], set(), set()
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
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
    context.close()
