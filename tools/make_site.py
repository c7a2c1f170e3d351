"""Render the executed notebooks into a static website: ``python tools/make_site.py [OUT_DIR]`` (``make site``).

For reading the course without installing anything: ``OUT_DIR/index.html`` holds the table of notebooks (from
the README's table, plus any notebook it does not list yet), the exercises (from the registry of ``tl.checks``,
which ``solutions/`` and the README's table read too) and the diagrams; ``OUT_DIR/notebooks/NN_name.html``
is each notebook as saved, with its figures and the last picture of every widget, and links to the index and
to the previous and next notebook; ``OUT_DIR/images/`` holds the diagrams, so the notebooks' ``../images/``
links work as they do in the repository. Nothing is executed: run ``make notebooks`` first for fresh outputs.
"""

import html
import re
import shutil
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

from transformer_lib.checks import registry

ROOT = Path(__file__).resolve().parent.parent
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
README_ROW = re.compile(r"^\| (\d\d) \| `(\w+)` \| (.+?) \| (.+?) \|$")
STYLE = (
    "nav.course{font:15px sans-serif;padding:8px 16px;background:#f4f4f4;border-bottom:1px solid #ddd}"
    "nav.course a{margin-right:18px}"
    "body.index{font:16px/1.5 sans-serif;max-width:960px;margin:24px auto;padding:0 16px}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
    "figure{display:inline-block;margin:8px}figure img{max-width:420px}"
)


def readme_rows() -> dict[str, tuple[str, str]]:
    """Notebook number -> (what it teaches, CPU budget), from the README's notebook table."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        match = README_ROW.match(line.strip())
        if match:
            rows[match.group(1)] = (match.group(3), match.group(4))
    return rows


def inline_markdown(text: str) -> str:
    """The README's cell text as HTML: escaped, with `code` spans."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def exercise_table() -> str:
    """The exercises as an HTML table, one row each, from the registry that solutions/ and the README read too."""
    rows = "".join(
        f"<tr><td>{e.notebook}</td><td>{e.number}</td><td><code>{html.escape(e.name)}</code>: {html.escape(e.asked)}"
        f"</td><td><code>{html.escape(e.graded_by)}</code></td></tr>"
        for e in registry.exercises()
    )
    return (
        "<table><tr><th>notebook</th><th>exercise</th><th>what is asked</th><th>graded by <code>tl.checks.</code></th>"
        f"</tr>{rows}</table>"
    )


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def without_widget_views(notebook):
    """Widget views need a kernel: keep their text (the controls and their values) and the picture below."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if WIDGET_VIEW in output.get("data", {}):
                del output["data"][WIDGET_VIEW]
    notebook.metadata.pop("widgets", None)
    return notebook


def nav(pages: list[Path], index: int) -> str:
    links = ['<a href="../index.html">index</a>']
    if index > 0:
        links.append(f'<a href="{pages[index - 1].stem}.html">previous: {pages[index - 1].stem}</a>')
    if index + 1 < len(pages):
        links.append(f'<a href="{pages[index + 1].stem}.html">next: {pages[index + 1].stem}</a>')
    return f'<nav class="course">{"".join(links)}</nav>'


def build(out: Path) -> list[Path]:
    """Write the site into ``out`` and return the pages written (index first)."""
    if out.exists():
        shutil.rmtree(out)
    (out / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "images", out / "images", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copy(ROOT / "NOTATION.md", out / "NOTATION.md")  # the notation card the pages link to
    sources = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    exporter = HTMLExporter()
    described, rows, written = readme_rows(), [], []
    for i, source in enumerate(sources):
        notebook = without_widget_views(nbformat.read(source, as_version=4))
        body, _ = exporter.from_notebook_node(notebook)
        body = re.sub(r'href="([\w.-]+)\.ipynb"', r'href="\1.html"', body)
        body = body.replace("<body", f"<style>{STYLE}</style><body", 1)
        links = nav(sources, i)
        body = re.sub(r"(<body[^>]*>)", lambda m, links=links: m.group(1) + links, body, count=1)
        page = out / "notebooks" / f"{source.stem}.html"
        page.write_text(body)
        written.append(page)
        teaches, budget = described.get(source.stem[:2], ("", ""))
        rows.append(
            f'<tr><td>{source.stem[:2]}</td><td><a href="notebooks/{page.name}">{html.escape(title_of(notebook))}'
            f"</a></td><td>{inline_markdown(teaches)}</td><td>{html.escape(budget)}</td></tr>"
        )
    diagrams = "".join(
        f'<figure><a href="images/{p.name}"><img src="images/{p.name}" alt="{p.stem}"></a>'
        f"<figcaption>{p.name}</figcaption></figure>"
        for p in sorted((out / "images").glob("*.png"))
    )
    index = out / "index.html"
    index.write_text(
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Transformers from Scratch</title>"
        f"<style>{STYLE}</style></head><body class='index'><h1>Transformers from Scratch</h1>"
        "<p>The course's notebooks as last executed, with their figures and the first picture of each widget. "
        "To move the sliders, run them: <code>make lab</code>.</p>"
        "<table><tr><th>#</th><th>notebook</th><th>what it teaches</th><th>CPU budget</th></tr>"
        f"{''.join(rows)}</table><h2>Exercises</h2>{exercise_table()}<h2>Diagrams</h2>{diagrams}</body></html>"
    )
    return [index, *written]


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "site"
    for path in build(target):
        print(path)
