"""Notebook 10 · paper experiments: the check of a Table 3 row of the learner's own.

It has no reference: the row is trained for one seed and the outcome reported next to the learner's
prediction (:func:`transformer_lib.training.experiments.judge_own_row`).
"""

from collections.abc import Callable
from dataclasses import replace
from functools import partial

from ..checks import inputs as draw
from .engine import Case, CheckResult, Entry, Failure, judge
from .registry import Exercise, Question

__all__ = ["check_table3_row"]


def _own_row_verdict(answer, case: Case) -> str:
    """Notebook 10 has no reference: the row is trained for one seed and the outcome reported next
    to the prediction (:func:`transformer_lib.training.experiments.judge_own_row`)."""
    from ... import experiments  # on use: experiments needs train.py

    results = (
        case.args[0]
        if case.args[0] is not None
        else experiments.read_results(experiments.COMMITTED_CSV)
    )
    try:
        return experiments.judge_own_row(answer, results)
    except (TypeError, ValueError) as exc:
        raise Failure(f"{exc}.") from None
    # the row itself failed to build or train (out of memory, say): a message, not a crash
    except Exception as exc:
        raise Failure(
            f"your row could not be trained ({type(exc).__name__}: "
            f"{str(exc).strip()[:200]}). Hint: keep the row close to the base model's "
            "sizes."
        ) from None


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

TABLE3_ROW = Entry(  # no reference: the row is trained and the outcome set next to the prediction
    "check_table3_row",
    "your my_table3_row()",
    None,
    draw.own_row,
    run=lambda my_row, case: my_row(),
    verdict=_own_row_verdict,
)

ENTRIES = (TABLE3_ROW,)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_table3_row(my_row: Callable, results=None) -> CheckResult:
    """Notebook 10: ``my_row() -> (row, prediction)``, a Table 3 row of the learner's own and a
    prediction of its dev perplexity next to the base row's ("lower", "same", "higher" or a number).
    It has no reference to compare with: it trains the row for one seed (about 10 s of CPU time) and
    reports the outcome next to the prediction. ``results``: the committed runs (default: the
    repository's ``results/table3.csv``)."""
    return judge(replace(TABLE3_ROW, cases=partial(draw.own_row, results)), my_row)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "10",
        "1",
        "my_table3_row",
        "a Table 3 row of your own and a prediction of its result",
        "check_table3_row",
    ),
]

QUESTIONS = [Question("10", "2", "an experiment that tests the hypothesis about dropout")]
