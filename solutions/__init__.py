"""The teacher's edition: reference solutions of every exercise in the notebooks, one module per notebook.

``solutions/nbNN_<name>.py`` holds, under the exercise's own name (``my_*`` or ``My*``), a solution that its
``tl.checks`` function passes; ``WRONG_ANSWERS``: a typical wrong answer to each exercise and words of the hint
its check must give; and ``ANSWERS``: model answers to the Think/Experiment questions, keyed by exercise number.
``make solutions`` swaps each notebook's stubs for these and runs the notebooks. Which exercises exist is not
written here: :data:`EXERCISES` comes from the registry of ``transformer_lib.checks``.
"""

import importlib
import pathlib

from transformer_lib.checks import registry

NOTEBOOKS = {  # solutions module -> notebook file
    path.stem: path.stem[2:4] for path in sorted(pathlib.Path(__file__).parent.glob("nb[0-9][0-9]_*.py"))
}


def modules() -> dict:
    """``{"nb01_attention": <module>, ...}``: every solutions module, imported."""
    return {name: importlib.import_module(f"solutions.{name}") for name in NOTEBOOKS}


# The exercises, from the one registry in transformer_lib.checks (each notebook's ``checks/nbNN_*.py``): an
# Exercise says which notebook asks for which function or class (the name of its solution here) and which check
# grades it; ``exercise.grade(code)`` calls that check as the notebook's cell does.
EXERCISES = registry.exercises()

THINK = {
    "01": ["3"], "02": ["4"], "03": ["3"], "04": ["4"], "05": ["3"], "06": ["3"], "07": ["3"], "08": ["3"], "09": ["2"],
    "10": ["2"], "11": ["4"], "12": ["2", "3"], "13": ["6"],
}


def solution(notebook: str, name: str):
    """The reference solution ``name`` of notebook ``NN``."""
    (module,) = [m for n, m in modules().items() if n[2:4] == notebook]
    return getattr(module, name)


def wrong_answer(notebook: str, name: str) -> tuple:
    """``(code, words)``: a typical wrong answer to exercise ``name`` of notebook ``NN``, and words of its hint."""
    (module,) = [m for n, m in modules().items() if n[2:4] == notebook]
    return module.WRONG_ANSWERS[name]
