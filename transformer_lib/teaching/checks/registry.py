"""The registry of the exercises: which notebook asks what, and which check grades it.

Each notebook with exercises has one file here, ``nbNN_<name>.py``: the entries of the checks the
notebook introduces, those checks' public functions (its ``__all__``), ``EXERCISES`` (one
:class:`Exercise` per checked exercise) and ``QUESTIONS`` (a :class:`Question` per Think/Experiment
question; may be left out). This module collects the files in notebook order: the one source that
``solutions/``, the README's table for teachers and the site's index (``tools/make_site.py``) read.
"""

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

from .engine import CheckResult, Entry

__all__ = ["Exercise", "Question", "entry_files", "exercises", "questions", "entries", "checks"]

_ENTRY_FILE = re.compile(r"nb\d\d_\w+")  # nb01_attention: the notebook's number and name


@dataclass(frozen=True)
class Exercise:
    """One exercise: notebook ``NN`` asks, under ``number``, for the function or class ``name``;
    ``check`` (a public check's name, called with ``options`` as keyword arguments) grades it."""

    notebook: str  # "07"
    number: str  # "2": as the notebook's exercise list numbers it
    name: str  # what the learner writes, and its reference solution's name: "my_cached_causal_mask"
    asked: str  # in a few words: "the causal mask for cached decoding"
    check: str  # "check_causal_mask"
    options: dict = field(default_factory=dict, hash=False)  # {"with_cache": True}

    @property
    def graded_by(self) -> str:
        """How the exercise's cell calls its check: ``check_causal_mask(..., with_cache=True)``."""
        if not self.options:
            return self.check
        return f"{self.check}(..., {', '.join(f'{k}={v!r}' for k, v in self.options.items())})"

    def grade(self, code) -> CheckResult:
        """Run the exercise's check on ``code``, as the notebook's cell does."""
        return checks()[self.check](code, **self.options)


@dataclass(frozen=True)
class Question:
    """A Think/Experiment question of notebook ``NN``, graded by no check; ``ANSWERS[number]`` in
    its solutions file is the model answer that ``make solutions`` places after it."""

    notebook: str  # "01"
    number: str  # "3": as the notebook numbers it
    asked: str  # in a few words: "why another token's key can tie with a token's own"


@cache
def entry_files() -> tuple[ModuleType, ...]:
    """The ``nbNN_<name>`` modules of this package, imported, in notebook order."""
    names = sorted(info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)]))
    return tuple(
        importlib.import_module(f"{__package__}.{name}")
        for name in names
        if _ENTRY_FILE.fullmatch(name)
    )


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every notebook's exercises, in notebook order, then in the order the notebook asks them."""
    return tuple(exercise for module in entry_files() for exercise in module.EXERCISES)


@cache
def questions() -> tuple[Question, ...]:
    """Every notebook's Think/Experiment questions, in notebook order."""
    return tuple(q for module in entry_files() for q in getattr(module, "QUESTIONS", ()))


@cache
def entries() -> dict[tuple[str, str], Entry]:
    """Every entry, keyed by (its check's name, its variant); two entries with one key are an
    error."""
    found: dict[tuple[str, str], Entry] = {}
    for module in entry_files():
        for entry in module.ENTRIES:
            key = (entry.check, entry.variant)
            if key in found:
                raise ValueError(
                    f"two entries for {key}: one in {module.__name__}; keys must be unique"
                )
            found[key] = entry
    return found


@cache
def checks() -> dict[str, Callable[..., CheckResult]]:
    """Every public check by name: the ``__all__`` of each entry file."""
    return {name: getattr(module, name) for module in entry_files() for name in module.__all__}
