"""Every notebook's "Open in Colab" link and its Colab install cell, written from one setting.

The repository's address is `[project.urls] Repository` in `pyproject.toml`: the link at the top of
each notebook, the install cell that runs on Colab and the static site all read it from there. This
script writes both into every notebook (`--write`) or reports the notebooks that differ from what
the setting gives (`--check`, run by `tests/test_notebook_header.py`).

The install cell is the first code cell. It runs `pip install` only where `google.colab` can be
imported (a Colab runtime), so on a laptop, a GPU server or under nbval it prints nothing and
changes nothing. It installs the package from the repository with its data, the shipped
translation model and the extras the notebooks use, then turns on Colab's widget manager so the
sliders move.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LINK_PREFIX = "[Open in Colab]("
INSTALL_MARKER = "# Colab only: install the course's package"
# the extras the notebooks import: ipywidgets (sliders), tokenizers and sacrebleu (12),
# transformers (11, 13)
EXTRAS = "widgets,translation,huggingface"


def repository_url(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> str:
    """The repository's address, `https://github.com/OWNER/NAME`, from `[project.urls]`."""
    # a regular expression, not tomllib: the tests run on Python 3.10 too, which has no tomllib
    section = re.search(r"^\[project\.urls\]\n(.*?)(?=^\[|\Z)", pyproject.read_text(), re.M | re.S)
    found = re.search(r'^Repository\s*=\s*"([^"]*)"', section.group(1), re.M) if section else None
    url = found.group(1).rstrip("/") if found else ""
    if not url.startswith("https://github.com/") or url.count("/") != 4:
        raise ValueError(
            "expected [project.urls] Repository = 'https://github.com/OWNER/NAME' in "
            f"pyproject.toml, got {url!r}"
        )
    return url


def colab_link(notebook_name: str, url: str) -> str:
    """The markdown line that opens `notebooks/<notebook_name>` of the main branch in Colab."""
    owner_and_name = url.removeprefix("https://github.com/")
    colab = "https://colab.research.google.com/github"
    target = f"{colab}/{owner_and_name}/blob/main/notebooks/{notebook_name}"
    return f"{LINK_PREFIX}{target}) · runs on a CPU, an NVIDIA GPU or Apple's `mps`"


def install_cell_source(url: str) -> str:
    """The first code cell: a no-op except on Colab, where it installs the package from `url`."""
    return (
        f"{INSTALL_MARKER} (with its data and the trained model); elsewhere this cell\n"
        "# does nothing. On your own machine, `make lab` (or the README's steps) installs it.\n"
        "import importlib.util\n"
        "\n"
        'if importlib.util.find_spec("google") and importlib.util.find_spec("google.colab"):\n'
        "    import subprocess\n"
        "    import sys\n"
        "\n"
        f'    package = "transformer_lib[{EXTRAS}] @ git+{url}"\n'
        '    pip = [sys.executable, "-m", "pip", "install", "--quiet"]\n'
        "    subprocess.run([*pip, package], check=True)\n"
        "    from google.colab import output\n"
        "\n"
        "    output.enable_custom_widget_manager()  # ipywidgets' sliders in Colab"
    )


def _source_lines(text: str) -> list[str]:
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + [lines[-1]]


def with_header(notebook: dict, notebook_name: str, url: str) -> dict:
    """`notebook` with the Colab link as the title cell's second line and the install cell first.

    Adding the install cell shifts every later execution count by one, as a fresh top-to-bottom run
    would number them; the outputs stay (the new cell prints nothing outside Colab).
    """
    cells = notebook["cells"]
    title = cells[0]
    if title["cell_type"] != "markdown":
        raise ValueError(f"{notebook_name}: expected a markdown title cell first")
    title_lines = "".join(title["source"]).split("\n")
    if len(title_lines) > 2 and title_lines[2].startswith(LINK_PREFIX):
        del title_lines[1:3]  # the blank line and the link written last time
    # title, blank line, link, then the rest (the blank line before the quote stays)
    title_lines = [title_lines[0], "", colab_link(notebook_name, url)] + title_lines[1:]
    title["source"] = _source_lines("\n".join(title_lines))

    code_indices = [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"]
    has_install = bool(code_indices) and "".join(cells[code_indices[0]]["source"]).startswith(
        INSTALL_MARKER
    )
    if has_install:
        cells[code_indices[0]]["source"] = _source_lines(install_cell_source(url))
        return notebook
    install = {
        "cell_type": "code",
        "execution_count": 1,
        "metadata": {},
        "outputs": [],
        "source": _source_lines(install_cell_source(url)),
    }
    for i in code_indices:
        if cells[i].get("execution_count") is not None:
            cells[i]["execution_count"] += 1
    position = code_indices[0] if code_indices else len(cells)
    cells.insert(position, install)
    return notebook


def render(notebook: dict) -> str:
    """The notebook as `nbformat` writes it (one-space indent, a final newline)."""
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write the header into every notebook")
    mode.add_argument("--check", action="store_true", help="list notebooks whose header is stale")
    args = parser.parse_args(argv)
    url = repository_url()
    stale = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        text = path.read_text()
        new_text = render(with_header(json.loads(text), path.name, url))
        if new_text != text:
            stale.append(path.name)
            if args.write:
                path.write_text(new_text)
    if args.check and stale:
        print("stale Colab header (run `python tools/notebook_header.py --write`):", *stale)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
