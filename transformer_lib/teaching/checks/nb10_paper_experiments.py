"""Notebook 10 · paper experiments: the check of a Table 3 row of the learner's own.

It has no reference: the row is trained for one seed and the outcome reported next to the learner's
prediction (:func:`judge_own_row`).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import torch

from ...model.transformer import Transformer, count_parameters
from ...training import experiments as ex
from ...training.data import StringProgramTask
from ..checks import inputs as draw
from .engine import Case, CheckResult, Entry, Failure, judge
from .registry import Exercise, Question

__all__ = ["check_table3_row"]


def _own_row_verdict(answer, case: Case) -> str:
    """Notebook 10 has no reference: the row is trained for one seed and the outcome reported next
    to the prediction (:func:`judge_own_row`)."""
    results = case.args[0] if case.args[0] is not None else ex.read_results(ex.COMMITTED_CSV)
    try:
        return judge_own_row(answer, results)
    except (TypeError, ValueError) as exc:
        raise Failure(f"{exc}.") from None
    # the row itself failed to build or train (out of memory, say): a message, not a crash
    except Exception as exc:
        raise Failure(
            f"your row could not be trained ({type(exc).__name__}: {str(exc).strip()[:200]}). "
            "Hint: keep the row close to the base model's sizes."
        ) from None


_PREDICTIONS = ("lower", "same", "higher")


def judge_own_row(
    answer,
    results: Sequence[dict],
    grid: ex.Grid | str = "cpu",
    task: StringProgramTask | None = None,
) -> str:
    """The judge of notebook 10's exercise: ``answer = (row, prediction)``, a :class:`Row` (or a
    dict of its changes) that the grid does not have, and the learner's prediction of its dev
    perplexity next to the base row's: ``"lower"``, ``"same"`` or ``"higher"``, or a number. Trains
    the row for seed 0 on the grid's budget and returns what happened next to the prediction; raises
    ValueError (or TypeError) naming what is wrong.

    "same" means within two of the base row's seed standard deviations of its mean in ``results``.
    """
    grid = ex.GRIDS[grid] if isinstance(grid, str) else grid
    if not (isinstance(answer, tuple) and len(answer) == 2):
        raise TypeError(
            f"return a pair (row, prediction), got {type(answer).__name__} {answer!r:.80}"
        )
    row, prediction = answer
    if isinstance(row, dict):
        row = ex.Row("your row", "yours", row)
    if not isinstance(row, ex.Row):
        raise TypeError(
            f"the row should be a tl.experiments.Row or a dict of changes, got {type(row).__name__}"
        )
    if isinstance(prediction, str) and prediction.strip().lower() in _PREDICTIONS:
        prediction = prediction.strip().lower()
    elif isinstance(prediction, bool) or not (
        isinstance(prediction, (int, float)) and math.isfinite(prediction) and prediction >= 1.0
    ):
        raise ValueError(
            "the prediction should be 'lower', 'same' or 'higher' (than the base row's dev "
            "perplexity), or a perplexity (a number >= 1: a model can do no better than 1), got "
            f"{prediction!r}"
        )
    # The row's own default d_k is d_model // h of its own width and heads ({"num_heads": 1, "d_k":
    # 16} is new).
    d_model, heads = (row.changes.get(key, grid.base[key]) for key in ("d_model", "num_heads"))
    own_d_k = (
        d_model // heads
        if isinstance(d_model, int) and isinstance(heads, int) and heads > 0
        else None
    )
    as_base = {"positional": "sinusoidal", **grid.base, "d_k": own_d_k}
    # What the row really changes: {"num_heads": 1, "d_ff": <the base's d_ff>} is the grid's row "A
    # h=1".
    effective = {key: value for key, value in row.changes.items() if as_base.get(key) != value}
    if not effective:
        raise ValueError(
            f"row {row.name!r} changes nothing of the base model {grid.base}: change one thing"
        )
    for existing in grid.rows:
        if existing.changes == effective:
            raise ValueError(
                f"the grid already has this row ({existing.name!r}): predict a row of your own"
            )
    base = [s for s in ex.summarise(results, grid.name) if s["config"] == "base"]
    if not base or base[0]["seeds"] < 2:
        raise ValueError(
            f"the results hold fewer than two seeds of grid {grid.name!r}'s base row to compare "
            "with"
        )
    task = task if task is not None else StringProgramTask()
    try:
        config = ex._config(grid, row, len(task.vocab), task.vocab.pad_id)
        base_config = ex._config(grid, grid.row("base"), len(task.vocab), task.vocab.pad_id)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"row {row.name!r} is not a valid model: {exc}") from None
    # counted without memory: a huge row gets this message, not an allocation error
    with torch.device("meta"):
        size = count_parameters(Transformer(config))["total"]
        base_size = count_parameters(Transformer(base_config))["total"]
    if size > 4 * base_size or config.num_layers > 4 * base_config.num_layers:
        raise ValueError(
            f"row {row.name!r} has {size:,} parameters and N={config.num_layers}, the base "
            f"{base_size:,} and N={base_config.num_layers}: keep it within 4x of the base so it "
            "trains in about a minute"
        )
    result = ex.run_one(grid, row, 0, task)
    mean, std = base[0]["mean"], base[0]["std"]
    ppl = result["dev_ppl"]
    outcome = "same" if abs(ppl - mean) <= 2 * std else ("lower" if ppl < mean else "higher")
    if isinstance(prediction, str):
        verdict = "as you predicted" if prediction == outcome else f"you predicted {prediction!r}"
    else:
        verdict = (
            f"you predicted {prediction:.2f}, off by {abs(result['dev_ppl'] - prediction):.2f}"
        )
    return (
        f"row {row.name!r} ({size:,} parameters) reached dev perplexity {result['dev_ppl']:.3f} "
        f"(seed 0, {grid.steps} steps); the base row has {mean:.3f} ± {std:.3f} over "
        f"{base[0]['seeds']} seeds, so yours is {outcome!r} ({verdict}). One seed: run seeds 1 and "
        "2 (run_one) before you trust a small difference."
    )


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
