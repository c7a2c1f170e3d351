"""Every committed notebook was executed top to bottom on the CPU and holds nothing nbval or a
reader trips on."""

import json
import pathlib
import re

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))

ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(work|tmp|root|home|Users)/[\w.-]+")
GPU_TEXT = re.compile(r"cuda:\d|NVIDIA|Tesla|H100|H200|A100")


def code_cells(path):
    cells = json.loads(path.read_text())["cells"]
    return [c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def output_text(output):
    text = "".join(output.get("text", []))
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/"):
            text += "".join(value) if isinstance(value, list) else str(value)
    return text


def test_notebooks_follow_the_naming_scheme():
    for path in NOTEBOOKS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom_in_one_run(path):
    counts = [cell["execution_count"] for cell in code_cells(path)]
    assert counts == list(range(1, len(counts) + 1)), (
        f"run `make notebooks`: execution counts are {counts}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_hold_no_errors_svg_gpu_text_or_machine_paths(path):
    for cell in code_cells(path):
        source = "".join(cell["source"])
        for output in cell.get("outputs", []):
            if output["output_type"] == "error":
                assert "NBVAL_RAISES_EXCEPTION" in source, (
                    f"stored error {output['ename']} in:\n{source}"
                )
            assert "image/svg+xml" not in output.get("data", {}), (
                f"SVG figure (use PNG) in:\n{source}"
            )
            text = output_text(output)
            assert not ABSOLUTE_PATH.search(text), f"absolute path in output of:\n{source}"
            assert not GPU_TEXT.search(text), f"GPU output (commit CPU outputs) in:\n{source}"
            assert "Traceback (most recent call last)" not in text, (
                f"traceback in output of:\n{source}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_markdown_cells_are_markdown_not_commented_source(path):
    """A markdown cell whose every line starts with '# ' is a script's comment block pasted in: it
    renders as a wall of headings."""
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        lines = [line for line in "".join(cell["source"]).splitlines() if line.strip()]
        if cell["cell_type"] == "markdown" and len(lines) > 1:
            assert not all(line.startswith("#") for line in lines), (
                f"commented-out markdown:\n{lines[0]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_images_referenced_by_markdown_exist(path):
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", source) + re.findall(
                r'<img src="([^"]+)"', source
            ):
                assert (path.parent / target).is_file(), (
                    f"{path.name} shows a missing image {target}"
                )
