"""The grader (``python -m transformer_lib.grade``): the teacher's edition earns full marks, the
notebooks as shipped earn 0 with a hint per exercise, hostile submissions earn 0 on what they attack
and full marks on the rest in bounded time, and the gradebook and feedback keep their formats.

The class run (``test_class_run``) writes the sample gradebook that the README shows
(``results/sample_gradebook/``); ``UPDATE_SAMPLE_GRADEBOOK=1`` rewrites it after a deliberate
change. ``GRADE_SLOW=1`` also runs every notebook's teacher's edition through its kernel.
"""

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import nbformat
import pytest

import solutions
from solutions.build_notebooks import _replace_stub, _solution_source, exercise_cells
from transformer_lib.teaching import grade as g

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "results" / "sample_gradebook"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
KNOWN = g.course_exercises()


def shipped(number: str):
    (path,) = [p for p in NOTEBOOKS if p.name.startswith(number)]
    return nbformat.read(path, as_version=4)


def solutions_module(number: str):
    return next(m for name, m in solutions.modules().items() if name[2:4] == number)


def teachers_edition(number: str):
    """The notebook with every stub replaced by its reference solution (as ``make solutions``
    writes it), not executed."""
    notebook = shipped(number)
    for cell in exercise_cells(notebook):
        cell.source, _ = _replace_stub(cell.source, solutions_module(number))
    return notebook


def grade_folder(tmp_path, *args, timeout=900):
    """Run the grader's command line on ``args``; return (gradebook rows by student, seconds)."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "transformer_lib.grade", *map(str, args), "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "graded" in done.stdout.splitlines()[-1], done.stdout
    with open(out / "gradebook.csv", newline="") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    return rows, seconds


# --- how the grader reads a submission's source ---------------------------------------------------


def test_statements_take_the_last_definition_and_what_it_reads():
    cells = [
        "import torch\nSCALE = 2.0\nunused = torch.ones(3)\n",
        "def helper(x):\n    return x * SCALE\n",
        "def my_double(x):\n    raise NotImplementedError\n",
        "%timeit 1 + 1\ndef my_double(x):\n    return helper(x)\n\nprint(my_double(1))\n",
    ]
    chosen = g.needed(g.statements(cells), "my_double")
    sources = [s.source for s in chosen]
    assert sources == ["SCALE = 2.0", "def helper(x):\n    return x * SCALE", sources[-1]]
    assert "return helper(x)" in sources[-1]  # the last definition, magics and all
    assert g.needed(g.statements(cells), "my_triple") is None


def test_statements_leave_out_what_is_not_a_definition():
    cells = [
        "from solutions.nb01_attention import my_attention\n",
        "import solutions\nfrom x import my_mask as my_causal_mask\n",
        "tl.checks.check_attention = print\nmy_causal_mask = tl.causal_mask\n",
        "for i in range(3):\n    def my_attention(q):\n        return q\n",
    ]
    found = g.statements(cells)
    assert [s.kind for s in found] == ["assign"]  # the plain assignment only
    assert g.needed(found, "my_attention") is None
    assert g.needed(found, "my_causal_mask") is None  # an assignment is not a definition


def test_identify_by_title_then_file_name_then_exercises():
    titles = g.course_titles()
    notebook = shipped("02")
    assert g.identify(notebook, "anything.ipynb", titles, KNOWN) == "02"
    notebook.cells = [c for c in notebook.cells if not c.source.startswith("# ")]
    assert g.identify(notebook, "Copy of 02_multi_head_attention (3).ipynb", titles, KNOWN) == "02"
    assert g.identify(notebook, "homework.ipynb", titles, KNOWN) == "02"  # its exercises
    empty = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    assert g.identify(empty, "homework.ipynb", titles, KNOWN) == ""


def test_collect_one_student_per_file_or_per_folder(tmp_path):
    (tmp_path / "files").mkdir()
    for name in ("ann.ipynb", "bob.ipynb", ".hidden"):
        (tmp_path / "files" / name).write_text("{}")
    (tmp_path / "folders" / "cem" / "notebooks").mkdir(parents=True)
    (tmp_path / "folders" / "cem" / "notebooks" / "01_attention.ipynb").write_text("{}")
    (tmp_path / "folders" / "dee").mkdir()
    found = g.collect([tmp_path / "files", tmp_path / "folders", tmp_path / "eve.ipynb"])
    assert [student for student, _ in found] == ["ann", "bob", "cem", "dee", "eve"]
    assert found[2][1].name == "01_attention.ipynb" and found[3][1].is_dir()


# --- the formats ----------------------------------------------------------------------------------


def reports():
    first, second = (g.column(e) for e in KNOWN["01"])
    ann = g.Report("ann", "/class/ann.ipynb", "01", cells=["cell 3 raised NameError: x"])
    ann.verdicts = [
        g.Verdict(first, "my_attention", True, "✅ check_attention: well done"),
        g.Verdict(second, "my_causal_mask", False, "❌ not the past.\nHint: tril"),
    ]
    bob = g.Report("bob", "/class/bob.txt", status="not graded: not a notebook (NotJSONError)")
    return [ann, bob]


def test_gradebook_and_points_csv(tmp_path):
    header = g.write_gradebook(reports(), tmp_path, KNOWN)
    assert header == [
        "student",
        "notebook",
        "01.1 check_attention",
        "01.2 check_causal_mask",
        "score",
        "max_score",
        "status",
        "submission",
    ]
    with open(tmp_path / "gradebook.csv", newline="") as file:
        rows = list(csv.reader(file))
    assert rows[1] == ["ann", "01", "1", "0", "1", "2", "graded", "ann.ipynb"]
    assert rows[2] == ["bob", "", "", "", "", "", "not graded: not a notebook (NotJSONError)"] + [
        "bob.txt"
    ]
    with open(tmp_path / "points.csv", newline="") as file:
        points = list(csv.reader(file))
    assert points[0] == list(g.POINTS_COLUMNS)
    assert points[1] == ["ann", "01", "01.1", "my_attention", "check_attention", "1", "1", ""]
    assert points[2][:7] == ["ann", "01", "01.2", "my_causal_mask", "check_causal_mask", "0", "1"]
    assert points[2][7] == "❌ not the past. Hint: tril"


def test_feedback_markdown(tmp_path):
    g.write_feedback(reports(), tmp_path)
    ann = (tmp_path / "feedback" / "ann.md").read_text()
    heading = "## Notebook 01 (`ann.ipynb`): 1 of 2"
    assert ann.splitlines()[:3] == ["# Feedback for ann", "", heading]
    assert "### Exercise 01.1: `my_attention` (✅ passed)" in ann
    assert "### Exercise 01.2: `my_causal_mask` (❌ not passed)" in ann
    assert "> ❌ not the past.\n> Hint: tril" in ann
    assert "### How the notebook ran\n\n- cell 3 raised NameError: x" in ann
    bob = (tmp_path / "feedback" / "bob.md").read_text()
    assert "## `bob.txt`: not graded\n\nNot a notebook (NotJSONError)." in bob


def test_passed_reads_the_gradebook(tmp_path, capsys):
    g.write_gradebook(reports()[:1], tmp_path, KNOWN)
    assert g.main(["--out", str(tmp_path), "--passed", "01.1"]) == 0
    assert g.main(["--out", str(tmp_path), "--passed", "01.2"]) == 1
    assert g.main(["--out", str(tmp_path / "none"), "--passed", "01.1"]) == 1
    assert "no gradebook" in capsys.readouterr().out


def test_bad_submissions_get_a_line_not_a_crash(tmp_path):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "empty.ipynb").write_text("")
    (tmp_path / "class" / "notes.txt").write_text("my answers\n")
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Hello")]),
        tmp_path / "class" / "prose.ipynb",
    )
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")]),
        tmp_path / "class" / "unknown.ipynb",
    )
    assert g.main([str(tmp_path / "class"), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    with open(tmp_path / "out" / "gradebook.csv", newline="") as file:
        status = {row["student"]: row["status"] for row in csv.DictReader(file)}
    assert status == {
        "empty": "not graded: the file is empty",
        "notes": "not graded: not a notebook (NotJSONError: Notebook does not appear to be JSON: "
        "'my answers\\n')",
        "prose": "not graded: the notebook has no code cells",
        "unknown": "not graded: not one of the course's notebooks with exercises (by its title, "
        "its file name and its exercises)",
    }
    assert (tmp_path / "out" / "feedback" / "unknown.md").read_text().startswith("# Feedback")


# --- grading: the teacher's edition, the shipped notebooks, hostile submissions -------------------


def test_every_teachers_edition_full_marks_every_shipped_notebook_zero(tmp_path):
    """Definitions only (``--no-execute``): the grade never depends on the kernel's run."""
    for path in NOTEBOOKS:
        number = path.name[:2]
        if number in KNOWN:
            nbformat.write(teachers_edition(number), tmp_path / f"teacher_{path.name}")
            shutil.copy(path, tmp_path / f"student_{path.name}")
    rows, _ = grade_folder(tmp_path, tmp_path, "--no-execute", "--jobs", "2", "--no-progress")
    assert len(rows) == 2 * len(KNOWN)
    for student, row in rows.items():
        assert row["status"] == "graded", row
        want = row["max_score"] if student.startswith("teacher") else "0"
        assert row["score"] == want, (student, row)
    shipped_feedback = (tmp_path / "out" / "feedback" / "student_13_modern_decoder.md").read_text()
    assert shipped_feedback.count("(❌ not passed)") == len(KNOWN["13"])
    assert shipped_feedback.count("> ⏳") == len(KNOWN["13"])  # a hint for each exercise


def _solution(name: str) -> str:
    return _solution_source(solutions_module("01"), name)


def _check_call(name: str, check: str) -> str:
    return f"\n\ntl.checks.{check}({name})\n"


MASK = _solution("my_causal_mask") + _check_call("my_causal_mask", "check_causal_mask")
ATTENTION = _solution("my_attention")
STUB = "def my_attention(q, k, v, mask=None):\n    raise NotImplementedError\n"
FAKE = "✅ check_attention: matches the library on 2 shapes, gradients match too. Well done!\n"

# Each attacks exercise 01.1 (my_attention), or the run itself, and answers 01.2 correctly.
HOSTILE = {
    "fake_output": [
        STUB + _check_call("my_attention", "check_attention"),
        MASK,
        f"print({FAKE!r})",
    ],
    "patched_check": [
        "import pathlib\n\nimport transformer_lib.teaching.checks.nb01_attention as _nb01\n"
        "from transformer_lib.teaching.checks.engine import CheckResult as _Result\n\n"
        "def _forge(code):\n"
        "    _nb01.judge = lambda *a, **k: _Result('check_attention', True, '✅ forged')\n"
        "    return code\n\n\n@_forge\n" + STUB,
        "tl.checks.check_attention = lambda *a, **k: _Result('check_attention', True, '✅')\n"
        "path = pathlib.Path(_nb01.__file__)  # the kernel's copy of the library, on disk\n"
        "path.write_text(path.read_text() + '\\ncheck_attention = lambda *a, **k: None\\n')\n",
        MASK,
    ],
    "infinite_loop": [
        "while True:\n    pass\n",
        "def my_attention(q, k, v, mask=None):\n    while True:\n        pass\n",
        MASK,
    ],
    "os_exit": [
        "import os\n\n\ndef my_attention(q, k, v, mask=None):\n    os._exit(0)\n",
        MASK,
        "os._exit(1)\n",
    ],
    "sys_exit": [
        "import sys\n\n\ndef my_attention(q, k, v, mask=None):\n    sys.exit(0)\n",
        MASK,
        "sys.exit(0)\n",
    ],
    "huge_output": [
        "for _ in range(200):\n    print('x' * 100_000)\n",
        ATTENTION + "\n\nprint('y' * 20_000_000)\n",
        MASK,
    ],
    "file_outside": [
        "open('../escaped.txt', 'w').write('written by a submission')\n",
        ATTENTION,
        MASK,
    ],
    "reads_others": [
        "import glob\nimport importlib\n\n\ndef my_attention(q, k, v, mask=None):\n"
        "    found = glob.glob('../**/*.ipynb', recursive=True)\n"
        "    found += glob.glob('../../**/*.py', recursive=True)\n"
        "    for path in found:\n"
        "        if 'def my_attention' in open(path).read() and 'solutions' in path:\n"
        "            exec(open(path).read(), globals())\n"
        "            return globals()['my_attention'](q, k, v, mask)\n"
        "    reference = importlib.import_module('solutions.nb01_attention')\n"
        "    return reference.my_attention(q, k, v, mask)\n",
        MASK,
    ],
}
FULL_MARKS = {"huge_output", "file_outside"}  # they attack the run, not an exercise


def hostile(cells: list[str]):
    """A short notebook 01: its title and import cells, then ``cells``."""
    notebook = shipped("01")
    header = [c for c in notebook.cells[:4] if c.cell_type == "markdown" or "import" in c.source]
    new = [nbformat.v4.new_code_cell(source) for source in cells]
    if "print(" in cells[-1] and "✅" in cells[-1]:  # the fake success, already in the outputs
        for cell in new:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=FAKE)]
    notebook.cells = [*header, *new]
    return notebook


def write_class(folder: pathlib.Path) -> None:
    """The sample class: the teacher's edition, the notebook as shipped, the hostile submissions
    and three that cannot be graded."""
    folder.mkdir()
    nbformat.write(teachers_edition("01"), folder / "teacher_01.ipynb")
    shutil.copy(NOTEBOOKS[0], folder / "student_01.ipynb")
    for name, cells in HOSTILE.items():
        nbformat.write(hostile(cells), folder / f"hostile_{name}.ipynb")
    (folder / "empty.ipynb").write_text("")
    (folder / "notes.txt").write_text("my answers\n")
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('hello')")]),
        folder / "other_course.ipynb",
    )


LIMITS = ("--cell-timeout", "45", "--notebook-timeout", "240", "--exercise-timeout", "20")


def test_class_run(tmp_path):
    """One run over a class, two at a time: every submission's grade as expected, in bounded time;
    the gradebook is the committed sample's."""
    write_class(tmp_path / "class")
    rows, seconds = grade_folder(tmp_path, tmp_path / "class", "--jobs", "2", *LIMITS)
    first, second = (g.column(e) for e in KNOWN["01"])
    assert rows["teacher_01"]["score"] == "2" and rows["student_01"]["score"] == "0"
    for name in HOSTILE:
        row = rows[f"hostile_{name}"]
        assert row["status"] == "graded", row
        assert (row[first], row[second]) == ("1" if name in FULL_MARKS else "0", "1"), row
    assert rows["empty"]["status"] == "not graded: the file is empty"
    assert rows["other_course"]["status"].startswith("not graded: not one of the course's")
    assert seconds < 600  # bounded: every wait has its deadline
    assert not list(tmp_path.rglob("escaped.txt")) and not (ROOT / "escaped.txt").exists()
    feedback = (tmp_path / "out" / "feedback" / "hostile_patched_check.md").read_text()
    assert "relies on (transformer_lib.teaching.checks.nb01_attention.judge)" in feedback
    feedback = (tmp_path / "out" / "feedback" / "hostile_infinite_loop.md").read_text()
    assert "ran past 45 s and was stopped" in feedback
    # the check's own time limit (engine.TIME_LIMIT_S) stops the loop before the grader's 20 s
    assert "your attention did not return within the 15 s" in feedback
    feedback = (tmp_path / "out" / "feedback" / "hostile_os_exit.md").read_text()
    assert "the kernel died in cell" in feedback and "the grading process died" in feedback

    made = tmp_path / "out"
    if os.environ.get("UPDATE_SAMPLE_GRADEBOOK"):
        shutil.rmtree(SAMPLE, ignore_errors=True)
        shutil.copytree(made, SAMPLE)
    assert (made / "gradebook.csv").read_text() == (SAMPLE / "gradebook.csv").read_text()
    assert sorted(p.name for p in (made / "feedback").iterdir()) == sorted(
        p.name for p in (SAMPLE / "feedback").iterdir()
    )
    for path in (made / "feedback").iterdir():
        headings = [line for line in path.read_text().splitlines() if line.startswith("#")]
        committed = (SAMPLE / "feedback" / path.name).read_text().splitlines()
        assert headings == [line for line in committed if line.startswith("#")], path.name


@pytest.mark.skipif(not os.environ.get("GRADE_SLOW"), reason="GRADE_SLOW=1: every notebook run")
def test_every_teachers_edition_executed_full_marks(tmp_path):
    """Every notebook's teacher's edition, run in its kernel, then graded (07 needs the model
    that 06 saves: ``checkpoints/date_model.pt`` in the course folder)."""
    for number in KNOWN:
        nbformat.write(teachers_edition(number), tmp_path / f"teacher_{number}.ipynb")
    rows, _ = grade_folder(tmp_path, tmp_path, "--jobs", "2", "--no-progress", timeout=3600)
    for student, row in rows.items():
        assert row["score"] == row["max_score"], (student, row)


def test_classroom_config_is_the_registrys():
    """``.github/classroom/`` is written from the registry: a test per exercise, one point each."""
    committed = ROOT / ".github" / "classroom"
    made = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"classroom-{os.getpid()}"
    g.write_classroom(made)
    for name in ("autograding.json", "classroom.yml"):
        assert (made / name).read_text() == (committed / name).read_text(), (
            f"{name} is out of date: python -m transformer_lib.grade --write-classroom "
            ".github/classroom"
        )
    shutil.rmtree(made)
    tests = json.loads((committed / "autograding.json").read_text())["tests"]
    graded = [t for t in tests if t["points"]]
    assert [t["name"].split(":")[0] for t in graded] == [
        f"exercise {e.notebook}.{e.number}" for exercises in KNOWN.values() for e in exercises
    ]


def test_readme_shows_the_sample_gradebook():
    readme = (ROOT / "README.md").read_text()
    assert (SAMPLE / "gradebook.csv").read_text() in readme
