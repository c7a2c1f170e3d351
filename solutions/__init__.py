"""The teacher's edition: a reference solution of every exercise, one module per notebook.

``solutions/nbNN_<name>.py`` holds, under each exercise's own name (``my_*`` or ``My*``), a solution
that its ``tl.checks`` function passes; ``WRONG_ANSWERS``, a typical wrong answer to each exercise
with words its hint must contain; and ``ANSWERS``, a model answer to each Think/Experiment question,
keyed by its number. ``make solutions`` puts these into the notebooks and runs them. Which exercises
and questions exist comes from the registry of ``transformer_lib.teaching.checks``, never from here.
"""

import importlib
import pathlib

from transformer_lib.teaching.checks import registry

NOTEBOOKS = {  # solutions module -> notebook number
    path.stem: path.stem[2:4]
    for path in sorted(pathlib.Path(__file__).parent.glob("nb[0-9][0-9]_*.py"))
}


def modules() -> dict:
    """``{"nb01_attention": <module>, ...}``: every solutions module, imported."""
    return {name: importlib.import_module(f"solutions.{name}") for name in NOTEBOOKS}


# From the one registry (each notebook's ``transformer_lib/teaching/checks/nbNN_*.py``). An Exercise
# names the function or class a notebook asks for (its solution's name here) and the check that
# grades it: ``exercise.grade(code)`` calls the check as the notebook's cell does. A Question is a
# Think/Experiment question; its model answer is ``ANSWERS[question.number]`` in the module here.
EXERCISES = registry.exercises()
QUESTIONS = registry.questions()


def solution(notebook: str, name: str):
    """The reference solution ``name`` of notebook ``NN``."""
    (module,) = [m for n, m in modules().items() if n[2:4] == notebook]
    return getattr(module, name)


def wrong_answer(notebook: str, name: str) -> tuple:
    """``(code, words)``: a typical wrong answer to exercise ``name`` of notebook ``NN``, and words
    of the hint its check gives."""
    (module,) = [m for n, m in modules().items() if n[2:4] == notebook]
    return module.WRONG_ANSWERS[name]
