"""``python -m solutions.build_notebooks [NN ...]`` (``make solutions``): the teacher's edition.

For each ``notebooks/NN_name.ipynb`` it writes ``build/solutions/NN_name.ipynb``: every exercise
cell's stub (the one ``my_*`` function or ``My*`` class it defines) replaced by the solution of that
name from ``solutions/nbNN_*.py``, a model answer after each Think/Experiment question, executed. It
fails (exit status 1) when an exercise or question lacks its solution or answer or the reverse, a
cell raises, or a check reports anything but success.
"""

import ast
import inspect
import os
import pathlib
import re
import sys

import nbformat
from nbclient import NotebookClient

import solutions

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "solutions"


def _solution_source(module, name: str) -> str:
    """The solution's code after the imports it uses from its module (a notebook may lack them)."""
    module_source, code = inspect.getsource(module), inspect.getsource(getattr(module, name))
    used = set(re.findall(r"\b\w+\b", code))
    imports = [
        ast.get_source_segment(module_source, node)
        for node in ast.parse(module_source).body
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any((alias.asname or alias.name.split(".")[0]) in used for alias in node.names)
    ]
    short = module.__name__.split(".")[-1]
    siblings = sorted(
        other
        for other in vars(module)
        if other != name and other.startswith(("my_", "My")) and other in used
    )
    if siblings:
        imports.append(f"from solutions.{short} import {', '.join(siblings)}")
    return "\n".join([f"# Reference solution, from solutions/{short}.py", *imports, "", code])


def exercise_cells(notebook) -> list:
    """The code cells with a stub (``raise NotImplementedError``) and a check call."""
    return [
        cell
        for cell in notebook.cells
        if cell.cell_type == "code"
        and "raise NotImplementedError" in cell.source
        and "tl.checks.check_" in cell.source
    ]


def _replace_stub(source: str, module) -> tuple[str | None, str | None]:
    """(new cell source, exercise name); (None, name or what is wrong) when no solution fits."""
    tree = ast.parse(source)
    defined = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name.startswith(("my_", "My"))
    ]
    if len(defined) != 1:
        names = [
            node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)
        ]
        return None, f"defines {names}, not exactly one my_* function or My* class"
    node = defined[0]
    if not hasattr(module, node.name):
        return None, node.name
    lines = source.splitlines()
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    new = [*lines[:first], _solution_source(module, node.name).rstrip(), *lines[node.end_lineno :]]
    return "\n".join(new), node.name


def question_cell(notebook, number: str) -> int | None:
    """The index of the markdown cell that asks question ``number`` (``**3.** (Think)`` or item
    ``3.`` of the Exercises list); None when no cell asks it."""
    for index, cell in enumerate(notebook.cells):
        listed = "## Exercises" in cell.source
        listed = listed and re.search(rf"^{number}\. ", cell.source, re.MULTILINE)
        if cell.cell_type == "markdown" and (f"**{number}.** (" in cell.source or listed):
            return index
    return None


def _add_answers(notebook, answers: dict) -> list[str]:
    """Insert each model answer after the cell that asks its question; return the numbers placed."""
    placed = []
    for number, answer in answers.items():
        index = question_cell(notebook, number)
        if index is not None:
            text = f"**Model answer ({number}).** {answer}"
            notebook.cells.insert(index + 1, nbformat.v4.new_markdown_cell(text))
            placed.append(number)
    return placed


def build(path: pathlib.Path) -> list[str]:
    """Write and execute one notebook's teacher's edition; return its problems (none: all well)."""
    number = path.name[:2]
    (module,) = [m for name, m in solutions.modules().items() if name[2:4] == number]
    notebook = nbformat.read(path, as_version=4)
    problems, solved, replaced = [], set(), []
    for cell in exercise_cells(notebook):
        source, name = _replace_stub(cell.source, module)
        if source is None:
            index = notebook.cells.index(cell)
            problem = (
                name
                if name.startswith("defines")
                else f"{name} has no solution of that name in {module.__name__}"
            )
            problems.append(f"cell {index}: exercise {problem}")
            continue
        cell.source, cell.outputs = source, []
        solved.add(name)
        replaced.append(cell)
    expected = {exercise.name for exercise in solutions.EXERCISES if exercise.notebook == number}
    problems += [
        f"solution {name} has no exercise cell (stub + check) in {path.name}"
        for name in expected - solved
    ]
    asked = {question.number for question in solutions.QUESTIONS if question.notebook == number}
    problems += [
        f"question {n} has no model answer in {module.__name__}.ANSWERS"
        for n in sorted(asked - set(module.ANSWERS))
    ]
    missing = set(module.ANSWERS) - set(_add_answers(notebook, module.ANSWERS))
    problems += [
        f"no question (Think/Experiment) numbered {n} for its model answer" for n in sorted(missing)
    ]
    try:
        NotebookClient(
            notebook, timeout=600, resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    except Exception as exc:  # a cell raised: name it, keep the partial notebook for the teacher
        problems.append(
            f"execution stopped: {type(exc).__name__}: {str(exc).strip().splitlines()[-1]}"
        )
    for cell in replaced:  # (the debugging notebook's bug cells fail their checks on purpose)
        text = "".join(
            o.get("data", {}).get("text/plain", "") + o.get("text", "")
            for o in cell.get("outputs", [])
        )
        if "✅" not in text:
            outcome = text.strip()[:300] or "not run (execution stopped before it)"
            problems.append(f"cell {notebook.cells.index(cell)}: {outcome}")
    OUT.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, OUT / path.name)
    return problems


def main(numbers: list[str]) -> int:
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
    )
    paths = sorted(
        p
        for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
        if not numbers or p.name[:2] in numbers
    )
    failed = False
    for path in paths:
        problems = build(path)
        failed |= bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} build/solutions/{path.name}")
        for problem in problems:
            print(f"     - {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
