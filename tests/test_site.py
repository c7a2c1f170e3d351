"""``tools/make_site.py`` without a browser: a notebook's widgets become explorers whose every frame
is the picture the widget itself draws for those values, and the index's counts agree with the
notebooks."""

import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import nbformat
import pytest
import torch
from bs4 import BeautifulSoup

import transformer_lib as tl
from transformer_lib import widgets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import make_site  # noqa: E402


def test_the_readme_counts_the_buggy_versions_notebook_08_shows():
    """The site's index takes its 'what it teaches' column from the README: its count must be the
    notebook's."""
    cells = nbformat.read(ROOT / "notebooks" / "08_debugging_attention.ipynb", as_version=4).cells
    bugs = sum(1 for c in cells if c.cell_type == "code" and c.source.startswith("# BUG:"))
    teaches, _ = make_site.readme_rows()["08"]
    assert re.search(r"\b(\d+) buggy versions\b", teaches).group(1) == str(bugs), teaches


def displayed(widget) -> list:
    """The outputs a notebook cell saves when it displays ``widget`` (controls with their snapshot,
    picture)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    with capture_output() as shown:
        display(widget)
    return [
        nbformat.v4.new_output("display_data", data=o.data, metadata=o.metadata or {})
        for o in shown.outputs
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A site from one notebook with three widgets; yields (site folder, the widgets, the page's
    soup)."""
    tl.seed_everything(0)
    task = tl.DateTask(num_test=10)
    model = tl.Transformer(
        tl.TransformerConfig.cpu_tiny(len(task.vocab)).replace(num_heads=2)
    ).eval()
    shown = [
        widgets.MaskBuilder(["a", "b", "<pad>"]),
        widgets.HeadExplorer(torch.softmax(torch.randn(1, 3, 3), -1)),
        widgets.AttentionExplorer(model, task.vocab, "3 may 1999", max_len=4),
    ]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# 01 · A test\n\n## Explorers\n\n$$\\frac{a}{b}$$")
    ]
    for widget in shown:
        cell = nbformat.v4.new_code_cell("widget")
        cell.outputs = displayed(widget)
        notebook.cells.append(cell)
    view = {
        "application/vnd.jupyter.widget-view+json": {
            "model_id": "0",
            "version_major": 2,
            "version_minor": 0,
        }
    }
    # its controls' output has no snapshot
    old = nbformat.v4.new_code_cell("widget made before snapshots")
    old.outputs = [
        nbformat.v4.new_output(
            "display_data", data={**view, "text/plain": "[controls: head = 0; run ...]"}
        ),
        displayed(shown[1])[1],
    ]
    # a progress bar: a widget view that is no explorer
    progress = nbformat.v4.new_code_cell("training")
    progress.outputs = [
        nbformat.v4.new_output("display_data", data={**view, "text/plain": "training: 4/4 steps"})
    ]
    notebook.cells += [old, progress]
    folder = tmp_path_factory.mktemp("notebooks")
    nbformat.write(notebook, folder / "01_test.ipynb")
    out = tmp_path_factory.mktemp("site") / "site"
    make_site.build(out, folder, jobs=1)
    soup = BeautifulSoup((out / "notebooks" / "01_test.html").read_text(), "html.parser")
    yield out, shown, soup
    matplotlib.pyplot.close("all")


def test_each_page_links_to_its_notebook_in_colab_and_in_the_repository(site):
    """One line of links per page, from the one repository setting that the notebooks' Colab links
    read too."""
    import notebook_header

    _, _, soup = site
    url = notebook_header.repository_url()
    links = {a.get_text(): a["href"] for a in soup.select("header.tl-header .tl-links a")}
    assert links == {
        "Open in Colab": url.replace(
            "https://github.com/", "https://colab.research.google.com/github/"
        )
        + "/blob/main/notebooks/01_test.ipynb",
        "source": f"{url}/blob/main/notebooks/01_test.ipynb",
    }


def test_each_frame_of_an_explorer_is_what_its_widget_draws_for_those_values(site):
    out, shown, soup = site
    explorers = soup.select("div.tl-widget")
    assert len(explorers) == len(shown)
    for explorer, widget in zip(explorers, shown, strict=True):
        table = json.loads(explorer.select_one("script.tl-frames").string)
        start = [
            table["values"][n][i] for n, i in zip(table["controls"], table["start"], strict=True)
        ]
        assert start == [widget.controls[n].value for n in table["controls"]]
        expected = {json.dumps(values, sort_keys=True): png for values, png in widget.frames()}
        assert len(table["frames"]) == len(expected)
        for row in table["frames"]:
            values = dict(table["fixed"])
            values |= {
                n: table["values"][n][i] for n, i in zip(table["controls"], row[:-1], strict=True)
            }
            assert (out / "frames" / row[-1]).read_bytes() == expected[
                json.dumps(values, sort_keys=True)
            ]
        first = explorer.select_one("img.tl-frame")["src"]
        # the picture before any move
        assert (out / "notebooks" / first).resolve().read_bytes() == widget.png


def test_controls_are_inputs_a_text_box_is_disabled_and_one_value_is_hidden(site):
    _, _, soup = site
    mask, head, attention = soup.select("div.tl-widget")
    assert [i["type"] for i in mask.select("[data-control]")] == ["checkbox", "checkbox"]
    # one head: its slider is hidden
    assert [i.name for i in head.select("[data-control]")] == ["select"]
    assert [i["data-control"] for i in attention.select("[data-control]")] == [
        "kind",
        "head",
        "scale",
    ]
    text = attention.select_one('input[data-fixed="text"]')
    assert text.has_attr("disabled") and text["value"] == "3 may 1999"
    assert make_site.NEEDS_PYTHON in text.parent.get_text() and "make lab" in make_site.NEEDS_PYTHON
    assert "query" in attention.select_one("p.tl-note").get_text() or attention.select_one(
        '[data-fixed="query"]'
    )


def test_a_page_loads_nothing_from_outside_the_site(site):
    out, _, soup = site
    for tag in soup.find_all(["script", "link", "img"]):
        address = tag.get("src") or tag.get("href") or ""
        assert not re.match(r"(https?:)?//", address), tag
    assert [s["src"] for s in soup.find_all("script", src=True)] == ["../assets/site.js"]
    assert (out / "assets" / "site.js").is_file() and (out / "assets" / "site.css").is_file()
    contents = soup.select("nav.tl-contents a")
    assert [a.get_text() for a in contents] == ["01 · A test", "Explorers"]
    assert all(soup.find(id=a["href"][1:]).name in ("h1", "h2") for a in contents)
    assert soup.select("details.tl-code[open] > summary")
    index = (out / "index.html").read_text()
    assert "notebooks/01_test.html" in index and "3 explorers" in index


def test_a_widget_without_a_snapshot_keeps_its_picture_and_says_how_to_move_it(site):
    out, shown, soup = site
    frozen = soup.find(string=re.compile("predate the web frames")).find_parent(
        "div", class_="jp-Cell"
    )
    assert "make notebooks" in frozen.get_text() and frozen.select("img")  # the first picture stays
    assert "training: 4/4 steps" in soup.get_text()  # a progress bar's text stays
