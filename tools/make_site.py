"""Render the executed notebooks into a static website: ``python tools/make_site.py
[OUT_DIR]`` (``make site``).

For reading the course without installing anything. ``OUT_DIR/index.html`` holds the table of
notebooks (from the README's table, plus any notebook it does not list yet), the exercises (from the
registry of ``tl.checks``, which ``solutions/`` and the README's table read too) and the diagrams;
``OUT_DIR/notebooks/NN_name.html`` is each notebook as saved, with its figures, a contents sidebar,
previous/next links, code cells that fold, and the commit and date its outputs were made at (the
last commit that changed the notebook file); ``OUT_DIR/images/`` holds the diagrams, so the
notebooks' ``../images/`` links work as they do in the repository. The pages load nothing from
outside the folder: nbconvert's scripts (MathJax, require.js from a CDN) are dropped, display math
is turned into MathML (which browsers draw) by ``latex2mathml`` where it is installed (``make site``
installs it from ``tools/site/requirements.txt``), and the JupyterLab styles go into one shared file
under ``assets/``.

Every explorer still moves on the web. How the pictures get here, and why this way:

* The widget is the one description of its controls
  (``transformer_lib.teaching.widgets``): ``FigureWidget.frames()`` yields ``(control values, PNG)``
  for every combination of the values its ``site_values`` offers, each PNG drawn by the widget's own
  ``draw`` after setting those values. This file knows no widget by name.
* The widgets are built in the notebook's kernel, often from a model trained there. When a widget is
  displayed, the metadata of its controls' output carries ``widget.snapshot()``: a JSON record of
  its controls and of the data its pictures are drawn from (attention maps, token labels; never the
  model), tens of kB at most. Here ``FigureWidget.restore(snapshot)`` rebuilds the same widget and
  asks it for its frames.
* Why not the other designs: PNGs of every frame in the notebook would add megabytes to each
  notebook on every re-execution and minutes to every nbval run; re-executing the notebooks here
  would cost the whole course's run time (training included) on every build. A snapshot costs nbval
  nothing (it never compares output metadata, so the outputs it reads are unchanged), keeps the
  notebooks small, and makes the site build only draw: ``--jobs`` processes draw the widgets side by
  side.
* On the page a widget is its controls (HTML inputs), a sentence on what the web version leaves out,
  its picture, and its table of frames as JSON; ``assets/site.js`` (a few lines,
  ``tools/site/site.js``) swaps pictures. Frames are stored once each under ``frames/``, named by a
  hash of their bytes. A control the site cannot move (a text box the model must read) is shown
  disabled with "run it in JupyterLab: make lab"; a control with one possible value is hidden, as in
  JupyterLab. A notebook executed before snapshots existed keeps its frozen picture with a note to
  re-execute it.

``--notebooks DIR`` renders the notebooks of another folder (e.g. freshly executed copies); nothing
is executed here: run ``make notebooks`` first for fresh outputs. The site's size is printed at the
end.
"""

import argparse
import concurrent.futures
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from bs4 import BeautifulSoup
from nbconvert import HTMLExporter

from transformer_lib.teaching.checks import registry

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "tools" / "site"  # site.js, site.css: copied to OUT_DIR/assets/
README_ROW = re.compile(r"^\| (\d\d) \| `(\w+)` \| (.+?) \| (.+?) \|$")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
NEEDS_PYTHON = "run it in JupyterLab: make lab"
# the site must stay under this (GitHub Pages' recommended limit is 1 GB; ours is far less)
MAX_SITE_MB = 100

sys.path.insert(0, str(ROOT))  # the repository's transformer_lib, also when it is not installed
sys.path.insert(0, str(ROOT / "tools"))
import notebook_header  # noqa: E402  (the repository's address, one setting: [project.urls])


def repository_links(notebook_name: str) -> str:
    """The page's one line of links: the notebook in Colab and its source file in the repository,
    both from `notebook_header`, which reads the address from `pyproject.toml`."""
    url = notebook_header.repository_url()
    colab = notebook_header.colab_link(notebook_name, url)
    colab = colab[len(notebook_header.LINK_PREFIX) : colab.index(")")]
    source = f"{url}/blob/main/notebooks/{notebook_name}"
    return (
        f'<span class="tl-links"><a href="{html.escape(colab)}">Open in Colab</a> · '
        f'<a href="{html.escape(source)}">source</a></span>'
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
    """The exercises as an HTML table, one row each, from the registry that solutions/ and the
    README read too."""
    rows = "".join(
        f"<tr><td>{e.notebook}</td><td>{e.number}</td><td><code>{html.escape(e.name)}</code>: "
        f"{html.escape(e.asked)}</td><td><code>{html.escape(e.graded_by)}</code></td></tr>"
        for e in registry.exercises()
    )
    return (
        "<table><tr><th>notebook</th><th>exercise</th><th>what is asked</th><th>graded by "
        f"<code>tl.checks.</code></th></tr>{rows}</table>"
    )


def title_of(notebook) -> str:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def git(*args: str) -> str:
    """A git answer about the repository, or "" where there is no git or no repository."""
    try:
        answer = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        )
        return answer.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def made_at(source: Path) -> str:
    """Which commit and date a notebook's outputs come from: the last commit that changed the
    file."""
    try:
        relative = source.resolve().relative_to(ROOT)
    except ValueError:
        return "outputs executed outside the repository (not committed)"
    if git("status", "--porcelain", "--", str(relative)):
        return "outputs not committed yet (the file differs from the last commit)"
    found = git("log", "-1", "--format=%h %cs", "--", str(relative))
    if not found:
        return "outputs of an unknown commit (no git history here)"
    commit, date = found.split()
    return f"outputs from commit {commit} of {date}"


# --------------------------------------------------------------------------------------------------
# Widgets: find their snapshots in the notebook, let each widget draw its frames, write the HTML
# that swaps them.


def widget_outputs(notebook) -> list[tuple[int, int, dict]]:
    """(cell index, output index of the controls, snapshot) for every widget displayed in the
    notebook."""
    from transformer_lib.teaching.widgets import SNAPSHOT_KEY

    found = []
    for c, cell in enumerate(notebook.cells):
        for o, output in enumerate(cell.get("outputs", [])):
            snapshot = output.get("metadata", {}).get(SNAPSHOT_KEY)
            if snapshot is not None:
                found.append((c, o, snapshot))
    return found


def is_frozen_widget(output) -> bool:
    """A transformer_lib widget displayed without a snapshot (outputs older than the static-site
    frames): its text is the controls' summary, ``[controls: ...]``. Other widget views (tqdm's
    progress bars) are not explorers."""
    from transformer_lib.teaching.widgets import SNAPSHOT_KEY

    data = output.get("data", {})
    return (
        WIDGET_VIEW in data
        and str(data.get("text/plain", "")).startswith("[controls:")
        and SNAPSHOT_KEY not in output.get("metadata", {})
    )


def frozen_widget_outputs(notebook) -> int:
    return sum(
        1
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if is_frozen_widget(output)
    )


def _label(control, value) -> str:
    """A value as the control's own readout shows it."""
    if hasattr(control, "options"):
        return str(control._options_labels[list(control._options_values).index(value)])
    if isinstance(value, bool):
        return "on" if value else "off"
    fmt = getattr(control, "readout_format", None)
    return format(value, fmt) if fmt and isinstance(value, (int, float)) else str(value)


def _kind(control) -> str:
    import ipywidgets as w

    from transformer_lib.teaching.widgets import control_values

    if isinstance(control, w.Checkbox):
        return "checkbox"
    if isinstance(control, (w.Dropdown, w.Select, w.RadioButtons, w.ToggleButtons)):
        return "select"
    return "range" if control_values(control) is not None else "text"


def draw_frames(snapshot: dict) -> dict:
    """Rebuild one widget from its snapshot and let it draw every frame the site shows (runs in a
    worker).

    Returns the controls as the page shows them, the frames as value indices, and the PNGs by file
    name.
    """
    import matplotlib

    matplotlib.use("Agg")
    from transformer_lib.teaching.widgets import FigureWidget, control_values

    widget = FigureWidget.restore(snapshot)
    start = widget.values()
    frames = list(widget.frames())
    controls = []
    for name, control in widget.controls.items():
        seen = list(dict.fromkeys(values[name] for values, _ in frames))
        full = control_values(control)
        if hasattr(control, "options") or isinstance(seen[0], bool):
            seen = [v for v in full if v in seen]  # the control's own order
        elif all(isinstance(v, (int, float)) for v in seen):
            seen = sorted(seen)
        site = widget.site_values(name)
        controls.append(
            {
                "name": name,
                "description": control.description or name,
                "kind": _kind(control),
                "values": seen,
                "labels": [_label(control, v) for v in seen],
                # how many values JupyterLab offers now
                "options": len(full) if full is not None else None,
                "offered": len(site),  # how many of them the site offers now
            }
        )
    pictures, rows = {}, []
    for values, png in frames:
        file = hashlib.sha256(png).hexdigest()[:20] + ".png"
        pictures[file] = png
        rows.append([c["values"].index(values[c["name"]]) for c in controls] + [file])
    return {
        "class": snapshot["class"],
        "start": start,
        "controls": controls,
        "rows": rows,
        "pictures": pictures,
        "caption": snapshot["caption"],
    }


def _png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")


def widget_html(drawn: dict, notebook: str, number: int) -> str:
    """The explorer as the page shows it: controls, what the web leaves out, the picture, its table
    of frames."""
    live = [c for c in drawn["controls"] if len(c["values"]) > 1]
    fixed = [c for c in drawn["controls"] if len(c["values"]) == 1]
    parts = []
    for c in drawn["controls"]:
        name, label = html.escape(c["name"]), html.escape(c["description"])
        if len(c["values"]) == 1:
            if c["options"] is not None and c["options"] <= 1:
                continue  # one possible value: hidden, as in JupyterLab
            value = html.escape(c["labels"][0])
            parts.append(
                f'<label>{label} <input type="text" value="{value}" disabled data-fixed="{name}">'
                f'<span class="tl-needs-python">{NEEDS_PYTHON}</span></label>'
            )
        elif c["kind"] == "checkbox":
            parts.append(f'<label><input type="checkbox" data-control="{name}"> {label}</label>')
        elif c["kind"] == "select":
            options = "".join(
                f'<option value="{i}">{html.escape(text)}</option>'
                for i, text in enumerate(c["labels"])
            )
            parts.append(f'<label>{label} <select data-control="{name}">{options}</select></label>')
        else:
            parts.append(
                f'<label>{label} <input type="range" min="0" max="{len(c["values"]) - 1}" step="1" '
                f'data-control="{name}"><output data-for="{name}"></output></label>'
            )
    left_out = [
        f"{c['description']}: {c['offered']} of its {c['options']} values"
        for c in live
        if c["options"] is not None and c["offered"] < c["options"]
    ]
    note = f"On this page: {len(drawn['rows'])} pictures drawn in advance by the widget itself."
    if left_out:
        note += " Left out here: " + "; ".join(left_out) + "."
    if left_out or any(c["options"] is None or c["options"] > 1 for c in fixed):
        note += f" Every value: {NEEDS_PYTHON}."
    start = [c["values"].index(drawn["start"][c["name"]]) for c in live]
    first = next(
        row[-1] for row in drawn["rows"] if [row[drawn["controls"].index(c)] for c in live] == start
    )
    table = {
        "controls": [c["name"] for c in live],
        "values": {c["name"]: c["values"] for c in live},
        "labels": {c["name"]: c["labels"] for c in live},
        "fixed": {c["name"]: c["values"][0] for c in fixed},
        "start": start,
        "frames": [
            [row[drawn["controls"].index(c)] for c in live] + [row[-1]] for row in drawn["rows"]
        ],
        "root": "../frames/",
    }
    table_json = json.dumps(table).replace("</", "<\\/")  # never ends the <script> it sits in
    # the widget's own HTML
    caption = f'<p class="tl-caption">{drawn["caption"]}</p>' if drawn["caption"] else ""
    # the widget's PNGs are retina: half their pixels on screen
    width = _png_width(drawn["pictures"][first]) // 2
    return (
        f'<div class="tl-widget" data-notebook="{html.escape(notebook)}" '
        f'data-widget="{number}"><div class="tl-controls">{"".join(parts)}</div>{caption}<p '
        f'class="tl-note">{html.escape(note)}</p><img class="tl-frame" src="../frames/{first}" '
        f'width="{width}" alt="{html.escape(drawn["class"])}: picture"><script '
        f'type="application/json" class="tl-frames">{table_json}</script></div>'
    )


def with_explorers(notebook, drawn: list[dict], name: str):
    """The notebook with each widget's two outputs (controls, first picture) replaced by its
    explorer's HTML; a widget without a snapshot keeps its picture, after a note that it cannot move
    here."""
    from transformer_lib.teaching.widgets import SNAPSHOT_KEY

    number = 0
    for cell in notebook.cells:
        outputs = []
        skip_picture = False
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if SNAPSHOT_KEY in output.get("metadata", {}):
                page = widget_html(drawn[number], name, number)
                outputs.append(nbformat.v4.new_output("display_data", data={"text/html": page}))
                number, skip_picture = number + 1, True
            elif is_frozen_widget(output):
                note = (
                    "<p class='tl-note'>This explorer's outputs predate the web frames: "
                    "re-execute the notebook (<code>make notebooks</code>) to move it here. Or "
                    f"{NEEDS_PYTHON}.</p>"
                )
                outputs.append(nbformat.v4.new_output("display_data", data={"text/html": note}))
            # a widget that needs a kernel (a progress bar): its text stays
            elif WIDGET_VIEW in data:
                output.data.pop(WIDGET_VIEW)
                outputs.append(output)
            elif skip_picture and "image/png" in data:
                skip_picture = False  # the widget's first picture: the explorer shows it
            else:
                outputs.append(output)
        if "outputs" in cell:
            cell.outputs = outputs
    notebook.metadata.pop("widgets", None)
    return notebook


# --------------------------------------------------------------------------------------------------
# Pages


def with_mathml(notebook):
    """Display math (``$$...$$``) in markdown as MathML, which browsers draw with no script; left as
    TeX where ``latex2mathml`` is missing."""
    try:
        from latex2mathml.converter import convert
    except ImportError:
        return notebook
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = DISPLAY_MATH.sub(
                lambda m: convert(m.group(1).replace("\n", " "), display="block"), cell.source
            )
    return notebook


def nav(pages: list[Path], index: int) -> str:
    links = ['<a href="../index.html">index</a>']
    if index > 0:
        links.append(
            f'<a href="{pages[index - 1].stem}.html">previous: {pages[index - 1].stem}</a>'
        )
    if index + 1 < len(pages):
        links.append(f'<a href="{pages[index + 1].stem}.html">next: {pages[index + 1].stem}</a>')
    return "".join(links)


def page_html(body: str, header: str, out: Path) -> str:
    """nbconvert's page made the site's: local styles and script only, a header, a contents sidebar,
    code cells that fold."""
    soup = BeautifulSoup(body, "html.parser")
    for script in soup.find_all("script"):
        if "tl-frames" not in script.get("class", []):  # the explorers' tables of frames stay
            # MathJax and require.js from a CDN, widget-manager glue: nothing the site needs
            script.decompose()
    styles = "\n".join(style.get_text() for style in soup.find_all("style"))
    for style in soup.find_all("style"):
        style.decompose()
    css = f"notebook-{hashlib.sha256(styles.encode()).hexdigest()[:12]}.css"
    (out / "assets" / css).write_text(styles)
    head = soup.head
    head.append(soup.new_tag("link", rel="icon", href="data:,"))  # no request for /favicon.ico
    for href in (f"../assets/{css}", "../assets/site.css"):
        head.append(soup.new_tag("link", rel="stylesheet", href=href))
    head.append(soup.new_tag("script", src="../assets/site.js", defer=""))
    for wrapper in soup.select(".jp-CodeCell > .jp-Cell-inputWrapper"):
        details = soup.new_tag("details", attrs={"class": "tl-code", "open": ""})
        summary = soup.new_tag("summary")
        summary.string = "code"
        wrapper.wrap(details)
        details.insert(0, summary)
    contents = []
    for heading in soup.select(".jp-MarkdownCell h1, .jp-MarkdownCell h2, .jp-MarkdownCell h3"):
        if heading.get("id"):
            text = heading.get_text().rstrip("¶").strip()
            contents.append(
                f'<li class="tl-{heading.name}"><a href="#{html.escape(heading["id"])}">'
                f"{html.escape(text)}</a></li>"
            )
    main = soup.new_tag("main", attrs={"class": "tl-main"})
    for child in list(soup.body.children):
        main.append(child.extract())
    soup.body.append(BeautifulSoup(header, "html.parser"))
    soup.body.append(
        BeautifulSoup(f'<nav class="tl-contents"><ol>{"".join(contents)}</ol></nav>', "html.parser")
    )
    soup.body.append(main)
    return str(soup)


def site_size(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def build(out: Path, notebooks: Path | None = None, jobs: int = 1) -> list[Path]:
    """Write the site into ``out`` and return the pages written (index first)."""
    notebooks = notebooks or ROOT / "notebooks"
    if out.exists():
        shutil.rmtree(out)
    for folder in ("notebooks", "assets", "frames"):
        (out / folder).mkdir(parents=True)
    shutil.copytree(
        ROOT / "images", out / "images", ignore=shutil.ignore_patterns("*.py", "__pycache__")
    )
    shutil.copy(ROOT / "NOTATION.md", out / "NOTATION.md")  # the notation card the pages link to
    for asset in ("site.js", "site.css"):
        shutil.copy(ASSETS / asset, out / "assets" / asset)
    sources = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    read = {source: nbformat.read(source, as_version=4) for source in sources}
    snapshots = {source: [s for _, _, s in widget_outputs(read[source])] for source in sources}
    everything = [s for source in sources for s in snapshots[source]]
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        drawn = iter(list(pool.map(draw_frames, everything)))
    exporter = HTMLExporter(exclude_anchor_links=False)
    described, rows, written = readme_rows(), [], []
    built_from = git("rev-parse", "--short", "HEAD") or "unknown"
    for i, source in enumerate(sources):
        explorers = [next(drawn) for _ in snapshots[source]]
        for explorer in explorers:
            for file, png in explorer["pictures"].items():
                (out / "frames" / file).write_bytes(png)
        frozen = frozen_widget_outputs(read[source])
        if frozen:
            print(
                f"warning: {source.name}: {frozen} widget(s) without a snapshot stay frozen: "
                "re-execute it",
                file=sys.stderr,
            )
        notebook = with_mathml(with_explorers(read[source], explorers, source.stem))
        body, _ = exporter.from_notebook_node(notebook)
        body = re.sub(r'href="([\w.-]+)\.ipynb"', r'href="\1.html"', body)
        header = (
            f'<header class="tl-header">{nav(sources, i)}<button id="tl-fold" type="button">fold '
            "all code"
            f"</button>{repository_links(source.name)}"
            f'<span class="tl-made">{html.escape(made_at(source))}; site built from '
            f"{built_from}</span></header>"
        )
        page = out / "notebooks" / f"{source.stem}.html"
        page.write_text(page_html(body, header, out))
        written.append(page)
        teaches, budget = described.get(source.stem[:2], ("", ""))
        widgets_here = (
            f"{len(explorers)} explorer{'s' * (len(explorers) != 1)}" if explorers else ""
        )
        rows.append(
            f"<tr><td>{source.stem[:2]}</td><td><a "
            f'href="notebooks/{page.name}">{html.escape(title_of(notebook))}'
            f"</a></td><td>{inline_markdown(teaches)}</td><td>{widgets_here}</td><td>{html.escape(budget)}</td></tr>"
        )
    diagrams = "".join(
        f'<figure><a href="images/{p.name}"><img src="images/{p.name}" alt="{p.stem}"></a>'
        f"<figcaption>{p.name}</figcaption></figure>"
        for p in sorted((out / "images").glob("*.png"))
    )
    index = out / "index.html"
    index.write_text(
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'><title>Transformers "
        "from Scratch</title>"
        "<link rel='icon' href='data:,'>"
        "<link rel='stylesheet' href='assets/site.css'></head><body class='tl-index'>"
        "<header class='tl-header'><strong>Transformers from Scratch</strong>"
        f"<span class='tl-made'>site built from commit {built_from}</span></header><main "
        "class='tl-main'>"
        "<h1>Transformers from Scratch</h1>"
        "<p>The course's notebooks as last executed, with their figures. Every explorer moves: its "
        "pictures were "
        "drawn in advance, by the widget itself, for the values its controls offer here (each page "
        "says what it "
        "leaves out). To type your own input, run the notebooks: <code>make lab</code>.</p>"
        "<table><tr><th>#</th><th>notebook</th><th>what it teaches</th><th>explorers</th><th>CPU "
        "budget</th></tr>"
        f"{''.join(rows)}</table><h2>Exercises</h2>{exercise_table()}<h2>Diagrams</h2>{diagrams}"
        '<p>The notation card: <a href="NOTATION.md">NOTATION.md</a>.</p></main></body></html>'
    )
    return [index, *written]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "build" / "site")
    parser.add_argument(
        "--notebooks", type=Path, help="render these executed notebooks instead of notebooks/"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count() or 1,
        help="processes that draw the widgets' frames side by side",
    )
    args = parser.parse_args(argv)
    for path in build(args.out, args.notebooks, args.jobs):
        print(path)
    frames = len(list((args.out / "frames").glob("*.png")))
    size = site_size(args.out) / 2**20
    print(f"site: {size:.1f} MB in {args.out} ({frames} widget frames)")
    if size >= MAX_SITE_MB:
        sys.exit(f"the site is {size:.1f} MB, over the {MAX_SITE_MB} MB it must stay under")


if __name__ == "__main__":
    main()
