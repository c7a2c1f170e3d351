"""Every notebook opens with an "Open in Colab" link and a Colab install cell, both written from the
one repository setting in pyproject.toml (tools/notebook_header.py); the cell does nothing outside
Colab."""

import importlib.machinery
import json
import pathlib
import subprocess
import sys
import types

import pytest

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import notebook_header  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_header_matches_the_repository_setting():
    assert notebook_header.main(["--check"]) == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_link_opens_this_notebook_from_the_repository(path):
    title = "".join(json.loads(path.read_text())["cells"][0]["source"])
    url = notebook_header.repository_url()
    owner_and_name = url.removeprefix("https://github.com/")
    expected = f"colab.research.google.com/github/{owner_and_name}/blob/main/notebooks/{path.name})"
    assert expected in title


def first_code_cell(path):
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_is_a_no_op_outside_colab(path, monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))
    exec(first_code_cell(path), {})
    assert calls == []


def test_install_cell_installs_from_the_repository_on_colab(monkeypatch):
    """With a stand-in `google.colab`, the cell pip-installs the package with its extras from the
    repository's address and turns on Colab's widget manager."""
    calls, widget_manager = [], []
    google, colab, output = (
        types.ModuleType(name) for name in ("google", "google.colab", "google.colab.output")
    )
    for package in (google, colab):
        package.__path__ = []
        package.__spec__ = importlib.machinery.ModuleSpec(package.__name__, None, is_package=True)
    output.enable_custom_widget_manager = lambda: widget_manager.append(True)
    colab.output = output
    for name, module in [
        ("google", google),
        ("google.colab", colab),
        ("google.colab.output", output),
    ]:
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(subprocess, "run", lambda args, check: calls.append((args, check)))
    exec(first_code_cell(NOTEBOOKS[0]), {})
    ((args, check),) = calls
    assert args[:4] == [sys.executable, "-m", "pip", "install"] and check
    assert args[-1] == (
        f"transformer_lib[{notebook_header.EXTRAS}] @ git+{notebook_header.repository_url()}"
    )
    assert widget_manager == [True]


def test_a_missing_or_foreign_repository_setting_is_named(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match=r"expected \[project.urls\] Repository"):
        notebook_header.repository_url(pyproject)
    pyproject.write_text('[project.urls]\nRepository = "https://gitlab.com/a/b"\n')
    with pytest.raises(ValueError, match="got 'https://gitlab.com/a/b'"):
        notebook_header.repository_url(pyproject)
