"""The teacher's edition: every exercise has a reference solution that its check passes, a stub that
the check calls "not implemented yet", and a typical wrong answer that earns a specific hint; every
Think/Experiment question has a model answer."""

import inspect
import pathlib

import pytest
from torch import nn

import solutions
import transformer_lib as tl
from solutions import exercise_table

IDS = [f"{exercise.notebook}-{exercise.number}-{exercise.name}" for exercise in solutions.EXERCISES]


def stub_like(solution):
    """The notebook's stub of an exercise: a function, or an nn.Module whose ``__init__`` is not
    written yet."""
    if isinstance(solution, type):

        class Stub(nn.Module):
            def __init__(self, *args, **kwargs):
                super().__init__()
                raise NotImplementedError

        return Stub

    def stub(*args, **kwargs):
        raise NotImplementedError

    return stub


@pytest.mark.parametrize("exercise", solutions.EXERCISES, ids=IDS)
def test_reference_solution_passes_and_stub_is_not_implemented(exercise):
    solution = solutions.solution(exercise.notebook, exercise.name)
    result = exercise.grade(solution)
    assert result and result.message.startswith("✅"), result.message
    stub = exercise.grade(stub_like(solution))
    assert not stub and "not implemented yet" in stub.message


@pytest.mark.parametrize("exercise", solutions.EXERCISES, ids=IDS)
def test_a_typical_wrong_answer_gets_a_specific_hint(exercise):
    wrong, words = solutions.wrong_answer(exercise.notebook, exercise.name)
    result = exercise.grade(wrong)
    assert not result and words in result.message, result.message


def test_every_solution_is_documented_and_has_a_wrong_answer():
    for name, module in solutions.modules().items():
        exercises = {e.name for e in solutions.EXERCISES if e.notebook == name[2:4]}
        assert set(module.WRONG_ANSWERS) == exercises, name
    for exercise in solutions.EXERCISES:
        solution = solutions.solution(exercise.notebook, exercise.name)
        assert inspect.getdoc(solution), f"{exercise.notebook} {exercise.name} has no docstring"


def test_every_question_of_the_registry_is_asked_in_its_notebook_and_has_a_model_answer():
    """The registry's questions, the solutions' ``ANSWERS`` and the notebooks name the same
    Think/Experiment questions; every marked question (``**N.** (Think)``) is registered."""
    import re

    import nbformat

    from solutions import build_notebooks

    for name, module in solutions.modules().items():
        asked = {q.number: q.asked for q in solutions.QUESTIONS if q.notebook == name[2:4]}
        assert set(module.ANSWERS) == set(asked), f"{name}: ANSWERS and the registry's questions"
        for number, answer in module.ANSWERS.items():
            assert len(answer) > 200, f"{name}: a short model answer to {number} ({asked[number]})"
    root = pathlib.Path(__file__).parent.parent
    for path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        asked = {q.number for q in solutions.QUESTIONS if q.notebook == path.name[:2]}
        for number in asked:
            assert build_notebooks.question_cell(notebook, number) is not None, (path.name, number)
        marked = {
            number
            for cell in notebook.cells
            if cell.cell_type == "markdown"
            for number in re.findall(r"\*\*(\d+)\.\*\* \((?:Think|Experiment)\)", cell.source)
        }
        assert marked <= asked, f"{path.name}: questions {marked - asked} are not in the registry"


def test_make_solutions_swaps_a_notebook_stub_for_the_solution_of_the_same_name():
    from solutions import build_notebooks, nb02_multi_head_attention

    stub = "\n".join(
        [
            "class MyMultiHeadAttention(nn.Module):",
            "    def __init__(self, d_model, num_heads):",
            "        super().__init__()",
            "        raise NotImplementedError",
            "",
            "tl.checks.check_multi_head_attention(MyMultiHeadAttention)",
        ]
    )
    source, name = build_notebooks._replace_stub(stub, nb02_multi_head_attention)
    assert name == "MyMultiHeadAttention" and "NotImplementedError" not in source
    namespace = {"tl": tl}
    exec(
        compile(source.replace("tl.checks.check_", "result = tl.checks.check_"), "<cell>", "exec"),
        namespace,
    )
    assert namespace["result"], namespace["result"].message
    assert (
        build_notebooks._replace_stub(
            "def shard_loss(x):\n    raise NotImplementedError", nb02_multi_head_attention
        )[0]
        is None
    )


def test_the_readme_lists_every_exercise_for_teachers():
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("## For teachers", 1)[1].split("\n## ", 1)[0]
    for exercise in solutions.EXERCISES:
        notebook, number, name, check = (
            exercise.notebook,
            exercise.number,
            exercise.name,
            exercise.graded_by,
        )
        assert f"| {notebook} | {number} | `{name}`" in section and f"`{check}`" in section, name
    assert exercise_table.markdown_table() in section, (
        "run `python -m solutions.exercise_table` to update the README"
    )


def test_every_registered_exercise_is_a_stub_and_its_check_in_its_notebook_and_nothing_else_is():
    """The registry, the solutions and the notebooks name the same exercises: each exercise cell (a
    stub and a check call) of notebook NN defines one registered exercise of NN and calls its check
    with its options."""
    import ast

    import nbformat

    from solutions import build_notebooks

    found = set()
    for path in sorted(
        (pathlib.Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")
    ):
        for cell in build_notebooks.exercise_cells(nbformat.read(path, as_version=4)):
            tree = ast.parse(cell.source)
            (name,) = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
            (exercise,) = [
                e for e in solutions.EXERCISES if (e.notebook, e.name) == (path.name[:2], name)
            ]
            assert f"tl.checks.{exercise.check}({name}" in cell.source, (path.name, name)
            assert all(
                f"{key}={value!r}" in cell.source for key, value in exercise.options.items()
            ), (path.name, name)
            found.add((exercise.notebook, exercise.name))
    assert found == {(e.notebook, e.name) for e in solutions.EXERCISES}
