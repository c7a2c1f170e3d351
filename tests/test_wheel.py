"""Installed as a wheel, not from the checkout: what a learner on Colab gets.

The test builds the wheel from a copy of the package's sources (offline: no build isolation, no
index), installs it into a folder outside the repository, and runs a script from another folder
outside it, with ``python -I`` (neither the working folder nor ``PYTHONPATH`` on ``sys.path``), so
the only ``transformer_lib`` it can import is the installed one; the shared environment still
provides torch and the rest. From there the script loads the Tatoeba pairs, notebook 11's corpus and
the shipped translation model, translates a sentence, and runs one check of every notebook's
``tl.checks`` on the reference answer (``solutions/``), with the network guard on. A data file that
the package data leaves out fails it twice: the file list is compared, and the loaders raise.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import network_guard
import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, runpy, sys, time
site, solutions_parent, guard, log = sys.argv[1:5]
runpy.run_path(guard)["install"](log)  # offline, as the tests are
sys.path[:0] = [site, solutions_parent]
from pathlib import Path

import transformer_lib as tl
from transformer_lib.applications import translation as tr
from transformer_lib.training.translation_corpus import read_pairs

report = {"file": tl.__file__}
pairs = read_pairs()
report["pairs"] = len(pairs)
corpus = tl.PythonSourceCorpus()
report["corpus"] = [len(corpus.files[split]) for split in corpus.SPLITS]
report["corpus_vocab"] = len(corpus.vocab)
model, vocab = tr.load_translator(tr.shipped_model_dir())
report["translation"] = tr.translate(model, vocab, ["I am very happy."])[0]
report["paper_base_ppl"] = tl.experiments.PAPER_TABLE3["base"]["PPL_dev"]

import solutions
from transformer_lib.teaching.checks import registry

first = {}
for exercise in registry.exercises():
    first.setdefault(exercise.notebook, exercise)
report["checks"] = {}
for notebook, exercise in sorted(first.items()):
    started = time.perf_counter()
    result = exercise.grade(solutions.solution(notebook, exercise.name))
    report["checks"][notebook] = [
        exercise.check, bool(result), result.message[:300], round(time.perf_counter() - started, 1)
    ]
print("REPORT " + json.dumps(report))
"""


def _run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{args[:4]}...\n{output}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel, built from a copy of the sources and installed into a folder outside the
    repository: ``(site folder, the wheel's file names)``."""
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(ROOT)
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "transformer_lib",
        source / "transformer_lib",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
          str(base / "dist"), str(source)], cwd=base)  # fmt: skip
    (wheel,) = (base / "dist").glob("transformer_lib-*.whl")
    site = base / "site"
    _run([*pip, "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
         cwd=base)  # fmt: skip
    return site


def test_the_wheel_holds_every_data_file(installed):
    shipped = {
        path.relative_to(ROOT / "transformer_lib").as_posix()
        for path in (ROOT / "transformer_lib" / "data_files").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    there = {
        path.relative_to(installed / "transformer_lib").as_posix()
        for path in (installed / "transformer_lib" / "data_files").rglob("*")
        if path.is_file()
    }
    missing = sorted(shipped - there)
    assert not missing, f"left out of the package data (pyproject.toml): {missing}"


def test_the_installed_package_loads_its_data_translates_and_checks(installed, tmp_path):
    """From outside the repository: the data, the model, and one check of each notebook."""
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    shutil.copytree(
        ROOT / "solutions", run_dir / "answers" / "solutions",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    (run_dir / "script.py").write_text(SCRIPT)
    log = tmp_path / "refused.log"
    result = _run(
        [sys.executable, "-I", str(run_dir / "script.py"), str(installed),
         str(run_dir / "answers"), network_guard.__file__, str(log)],
        cwd=run_dir,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg",
             "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert not log.exists(), f"a connection was attempted: {log.read_text()}"
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    assert Path(report["file"]).is_relative_to(installed), report["file"]
    assert report["pairs"] == 166_149
    assert report["corpus"] == [143, 11, 14] and report["corpus_vocab"] == 101
    assert report["translation"].strip(), report["translation"]
    assert report["paper_base_ppl"] == 4.92
    notebooks = {path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    with_exercises = {path.stem[2:4] for path in (ROOT / "solutions").glob("nb[0-9][0-9]_*.py")}
    assert set(report["checks"]) == with_exercises and with_exercises <= notebooks
    failed = {nb: r for nb, r in report["checks"].items() if not (r[1] and r[2].startswith("✅"))}
    assert not failed, failed
