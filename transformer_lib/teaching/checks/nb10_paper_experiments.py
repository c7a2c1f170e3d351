"""Notebook 10 · paper experiments: the check of a Table 3 row of the learner's own.

It has no reference: the row is trained for one seed and the outcome reported next to the learner's
prediction (:func:`judge_own_row`).
"""

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

import torch

from ...applications import experiments as ex
from ...model.transformer import Transformer, count_parameters
from ...training.data import StringProgramTask
from .engine import Case, CheckResult, Entry, Failure, judge
from .registry import Exercise, Question

__all__ = ["check_table3_row"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _own_row_cases(results=None) -> list[Case]:
    """Notebook 10: ``my_row()`` takes no argument; ``results`` (the committed runs by default) go
    to the verdict."""
    return [Case((results,), "your row")]


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


def _row_and_prediction(answer) -> tuple[ex.Row, str | float]:
    """The learner's ``(row, prediction)``: a :class:`Row` (a dict of changes becomes one) and
    ``"lower"``, ``"same"``, ``"higher"`` or a perplexity; a TypeError or ValueError names what is
    wrong."""
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
        return row, prediction.strip().lower()
    if isinstance(prediction, bool) or not (
        isinstance(prediction, (int, float)) and math.isfinite(prediction) and prediction >= 1.0
    ):
        raise ValueError(
            "the prediction should be 'lower', 'same' or 'higher' (than the base row's dev "
            "perplexity), or a perplexity (a number >= 1: a model can do no better than 1), got "
            f"{prediction!r}"
        )
    return row, prediction


def _check_new(row: ex.Row, grid: ex.Grid) -> None:
    """Raise a ValueError when the row changes nothing of the base, or is a row the grid has."""
    d_model, heads = (row.changes.get(key, grid.base[key]) for key in ("d_model", "num_heads"))
    # the row's own default d_k: d_model // h of its own width and heads
    # ({"num_heads": 1, "d_k": 16} is new)
    own_d_k = (
        d_model // heads
        if isinstance(d_model, int) and isinstance(heads, int) and heads > 0
        else None
    )
    as_base = {"positional": "sinusoidal", **grid.base, "d_k": own_d_k}
    # what the row really changes: {"num_heads": 1, "d_ff": <the base's d_ff>} is the row "A h=1"
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


def _base_and_noise(results: Sequence[dict], grid: ex.Grid) -> dict:
    """What a row of one seed is judged against, from ``results``: the base row's summary over
    seeds (``base``), its seed 0's dev perplexity (``seed0``), the typical seed-to-seed standard
    deviation of one row's runs (``seed_std``: the median over the rows of their sample standard
    deviations) and of a paired difference row - base (``paired_sd``: the median over the rows
    that the seeds pair, those with the base's shapes; None when the results hold none)."""
    summary = ex.summarise(results, grid.name)
    base = [s for s in summary if s["config"] == "base"]
    base_seed0 = [
        r["dev_ppl"]
        for r in results
        if r["grid"] == grid.name and r["config"] == "base" and r["seed"] == 0
    ]
    if not base or base[0]["seeds"] < 2 or not base_seed0:
        raise ValueError(
            f"the results hold fewer than two seeds (seed 0 among them) of grid {grid.name!r}'s "
            "base row to compare with"
        )
    paired = [
        c["sd"] for c in ex.compare_with_base(results, grid) if c["paired"] and len(c["seeds"]) >= 2
    ]
    return {
        "base": base[0],
        "seed0": base_seed0[0],
        "seed_std": statistics.median(s["std"] for s in summary if s["seeds"] >= 2),
        "paired_sd": statistics.median(paired) if paired else None,
    }


def _size_against_base(grid: ex.Grid, row: ex.Row, task: StringProgramTask) -> tuple[int, bool]:
    """The row's parameter count, and whether its parameters have the base's shapes
    (:func:`~transformer_lib.applications.experiments.same_shapes`: then one seed draws the same
    initial weights for both); a ValueError for an invalid row or one over 4x the base's size or
    depth. Counted without memory: a huge row gets this message, not an allocation error."""
    try:
        config = ex._config(grid, row, len(task.vocab), task.vocab.pad_id)
        base_config = ex._config(grid, grid.row("base"), len(task.vocab), task.vocab.pad_id)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"row {row.name!r} is not a valid model: {exc}") from None
    with torch.device("meta"):
        size, base_size = (count_parameters(Transformer(c))["total"] for c in (config, base_config))
    if size > 4 * base_size or config.num_layers > 4 * base_config.num_layers:
        raise ValueError(
            f"row {row.name!r} has {size:,} parameters and N={config.num_layers}, the base "
            f"{base_size:,} and N={base_config.num_layers}: keep it within 4x of the base so it "
            "trains in about a minute"
        )
    return size, ex.same_shapes(grid, row)


def _reference(same_weights: bool, noise: dict, grid: ex.Grid) -> tuple[float, float, str]:
    """What the learner's seed-0 run is set against: the value, the standard deviation of the
    difference when nothing changes, and the words that say why.

    Only the initial weights pair a run with the base's run of the same seed (every seed of every
    row trains on the same batches), and only when the row keeps the base's shapes. Such a row is
    compared with the base's seed 0, with the noise of a paired difference. Any other row is
    compared with the base's mean over its seeds, with the noise of one run next to a mean of
    ``n``: sqrt(seed_std^2 + base_std^2 / n). (The base's seed 0 alone would be unfair here: it
    is the base's worst seed in the committed grid, which leans every comparison towards "lower".)
    """
    base = noise["base"]
    if same_weights:
        if noise["paired_sd"] is None:
            raise ValueError(
                f"the results hold no row of grid {grid.name!r} with the base's shapes and two or "
                "more seeds: nothing to measure the noise of a paired difference with"
            )
        return (
            noise["seed0"],
            noise["paired_sd"],
            f"it keeps the base's parameter shapes, so its seed 0 started from the base's seed-0 "
            f"weights: it is compared with the base's seed 0 ({noise['seed0']:.3f}). A paired "
            f"difference row - base of the grid typically varies by {noise['paired_sd']:.3f} "
            "(standard deviation) from seed to seed",
        )
    sd = math.sqrt(noise["seed_std"] ** 2 + base["std"] ** 2 / base["seeds"])
    return (
        base["mean"],
        sd,
        f"it changes the parameters' shapes, so its seed 0 starts from other weights than any "
        f"seed of the base and pairs with none of them: it is compared with the base's mean over "
        f"{base['seeds']} seeds ({base['mean']:.3f} ± {base['std']:.3f}; its seed 0 alone reached "
        f"{noise['seed0']:.3f}). One run of a grid row typically varies by {noise['seed_std']:.3f} "
        f"(standard deviation), so one run minus that mean varies by {sd:.3f}",
    )


def judge_own_row(
    answer,
    results: Sequence[dict],
    grid: ex.Grid | str = "cpu",
    task: StringProgramTask | None = None,
) -> str:
    """The judge of notebook 10's exercise: trains the learner's row for seed 0 on the grid's budget
    and returns what happened next to the prediction.

    A row with the base's parameter shapes started from the base's seed-0 weights, so it is judged
    against the base's **seed 0** in ``results`` with the noise of a paired difference; any other
    row shares little of its starting weights with any seed of the base (section 3 of the
    notebook), is not paired and is judged against the base's **mean** over seeds with
    the noise of one run next to that mean (:func:`_reference`). The difference counts as "same"
    when it is within two of those standard deviations.

    Args:
        answer: ``(row, prediction)``: a :class:`Row` (or a dict of its changes) that the grid does
            not have, and the predicted dev perplexity next to the base row's: ``"lower"``,
            ``"same"`` or ``"higher"``, or a number.
        results: the runs to compare with (rows of ``experiments.read_results``).
        grid: the grid, or its name.
        task: the task to train on (by default ``StringProgramTask()``).

    Raises:
        TypeError, ValueError: naming what is wrong with the answer or the results.
    """
    grid = ex.GRIDS[grid] if isinstance(grid, str) else grid
    row, prediction = _row_and_prediction(answer)
    _check_new(row, grid)
    noise = _base_and_noise(results, grid)
    task = task if task is not None else StringProgramTask()
    size, same_weights = _size_against_base(grid, row, task)
    reference, sd, why = _reference(same_weights, noise, grid)
    ppl = ex.run_one(grid, row, 0, task)["dev_ppl"]
    difference = ppl - reference
    outcome = "same" if abs(difference) <= 2 * sd else ("lower" if difference < 0 else "higher")
    if isinstance(prediction, str):
        verdict = "as you predicted" if prediction == outcome else f"you predicted {prediction!r}"
    else:
        verdict = f"you predicted {prediction:.2f}, off by {abs(ppl - prediction):.2f}"
    return (
        f"row {row.name!r} ({size:,} parameters) reached dev perplexity {ppl:.3f} (seed 0, "
        f"{grid.steps} steps). {why[0].upper()}{why[1:]}. A difference of {difference:+.3f} "
        f"is {outcome!r} ({verdict}): 'same' means within two of those standard deviations. One "
        "seed: run seeds 1 and 2 (run_one) and the test section 5 uses before you trust a small "
        "difference."
    )


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

TABLE3_ROW = Entry(  # no reference: the row is trained and the outcome set next to the prediction
    "check_table3_row",
    "your my_table3_row()",
    None,
    _own_row_cases,
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
    return judge(replace(TABLE3_ROW, cases=partial(_own_row_cases, results)), my_row)


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
