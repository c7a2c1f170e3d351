"""The diagrams in images/ are drawn by images/make_diagrams.py; redrawing them must work and cover
every file."""

import runpy
from pathlib import Path

IMAGES = Path(__file__).resolve().parent.parent / "images"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_script_draws_every_diagram_as_png(tmp_path):
    script = runpy.run_path(str(IMAGES / "make_diagrams.py"))
    written = script["draw_all"](tmp_path)
    assert [p.name for p in written] == list(script["DIAGRAM_NAMES"])
    for path in written:
        assert path.read_bytes().startswith(PNG_SIGNATURE), path
        assert path.stat().st_size > 10_000, f"{path.name} looks empty"


def test_committed_images_are_exactly_the_drawn_ones():
    names = runpy.run_path(str(IMAGES / "make_diagrams.py"))["DIAGRAM_NAMES"]
    assert sorted(p.name for p in IMAGES.glob("*.png")) == sorted(names)


def test_split_combine_diagram_refuses_widths_that_heads_cannot_share():
    import pytest

    draw = runpy.run_path(str(IMAGES / "make_diagrams.py"))["draw_split_combine"]
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        draw(2, 10, 3)
