"""Notebook 06 · training: the checks of label smoothing and of the paper's learning-rate
schedule (exercises 1 and 2 use the last two: smoothing that never predicts some ids, and the
schedule inverted)."""

import math
from collections.abc import Callable
from functools import partial

import torch

from ...training.train import noam_lr, smoothed_targets
from .engine import Case, CheckResult, Entry, Failure, Mistake, judge, one_number
from .registry import Exercise, Question

__all__ = ["check_label_smoothing", "check_noam_lr"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _smoothing_cases() -> list[Case]:
    return [
        Case(
            (torch.tensor([4, 0, 7, 5]), 9, 0.1, 0),
            "for target [4, 0, 7, 5], V=9, eps=0.1, pad_id=0",
        ),
        Case(
            (torch.tensor([3, 2, 6, 1]), 8, 0.2, 2),
            "for target [3, 2, 6, 1], V=8, eps=0.2, pad_id=2",
        ),
    ]


def _schedule_cases() -> list[Case]:
    return [
        Case(
            (step, d_model, warmup),
            f"at step {step} (d_model={d_model}, warmup={warmup}, in "
            f"the {'warm-up, step <= warmup' if step <= warmup else 'decay, step > warmup'})",
        )
        for d_model, warmup in ((512, 4000), (64, 100))
        for step in (1, warmup // 2, warmup, 3 * warmup)
    ]


def _smoothing_variant(
    target, vocab_size, eps, pad_id, *, others=2, pad_column=True, pad_rows=True
) -> torch.Tensor:
    """``eps`` spread over ``V - others`` tokens; ``pad_column``: <pad> gets none; ``pad_rows``:
    padding rows zero."""
    dist = torch.full((target.numel(), vocab_size), eps / (vocab_size - others))  # (N, V)
    if pad_column:
        dist[:, pad_id] = 0.0
    dist.scatter_(1, target.reshape(-1, 1), 1.0 - eps)
    if pad_rows:
        dist[target.reshape(-1) == pad_id] = 0.0
    return dist


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

LABEL_SMOOTHING = Entry(
    "check_label_smoothing",
    "your label smoothing",
    smoothed_targets,
    _smoothing_cases,
    [
        Mistake(
            "a row whose target is padding should be all zero, so it adds nothing to the loss.",
            partial(_smoothing_variant, pad_rows=False),
        ),
        Mistake(
            "<pad> got probability; it is never a correct answer. Hint: set column pad_id to 0 "
            "and spread eps over V - 2 tokens.",
            partial(_smoothing_variant, others=1, pad_column=False),
        ),
        Mistake(
            "eps was spread over V - 1 tokens; <pad> gets none, so it goes to V - 2: eps / (V - "
            "2) each.",
            partial(_smoothing_variant, others=1),
        ),
        Mistake(
            "padding was taken to be id 0; use the `pad_id` argument.",
            lambda target, v, eps, pad_id: _smoothing_variant(target, v, eps, 0),
        ),
    ],
    "Hint: 1 - eps on the target, eps / (V - 2) on every other token but <pad>, rows of padding "
    "all zero.",
    "1 - eps on the target, eps spread over the rest, nothing on padding.",
    atol=1e-6,
)


NOAM_LR = Entry(
    "check_noam_lr",
    "your schedule",
    noam_lr,
    _schedule_cases,
    [
        Mistake(
            "the warm-up rises too fast: it is step * warmup**-1.5.",
            lambda s, d, w: d**-0.5 * min(s**-0.5, s / w),
        ),
        Mistake("the factor d_model**-0.5 is missing.", lambda s, d, w: min(s**-0.5, s * w**-1.5)),
    ],
    "Hint: d_model**-0.5 * min(step**-0.5, step * warmup**-1.5).",
    "rises linearly during warm-up, peaks at step = warmup, then decays as 1/sqrt(step).",
    pick=one_number("learning rate"),
    atol=0.0,
    rtol=1e-6,
)

ENTRIES = (LABEL_SMOOTHING, NOAM_LR)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_label_smoothing(make_targets: Callable) -> CheckResult:
    """Check ``make_targets(target, vocab_size, eps, pad_id) -> (N, V)``: 1 - eps on the target, eps
    spread over every other token but <pad>, rows whose target is padding all zero. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(LABEL_SMOOTHING, make_targets)


def check_noam_lr(schedule: Callable) -> CheckResult:
    """Check ``schedule(step, d_model, warmup) -> float``, steps counted from 1, against the paper's
    ``d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)`` during warm-up and after.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(NOAM_LR, schedule)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "06",
        "1",
        "my_smoothed_targets",
        "label smoothing that never predicts some ids: who shares eps",
        "check_smoothing_never",
    ),
    Exercise(
        "06",
        "2",
        "my_steps_to_fraction",
        "the schedule inverted: the step where the rate is a fraction of its peak",
        "check_steps_to_fraction",
    ),
]

QUESTIONS = [Question("06", "3", "experiment: the paper's schedule instead of the recipe's")]


# --- exercise 1: label smoothing that never predicts some ids -------------------------------------


def _smoothed_never(
    target,
    vocab_size,
    eps,
    pad_id,
    never,
    *,
    drop=None,
    zero_never=True,
    pad_rows=True,
    add=False,
    target_shares=False,
):
    """The reference (its knobs write the known mistakes): ``1 - eps`` on the target, ``eps`` spread
    evenly over the ids that can be a right answer other than the target (every id but ``pad_id``,
    the ids in ``never`` and the target: ``V - 2 - len(never)`` of them), 0 on ``pad_id`` and on
    ``never``, all-zero rows where the target is padding. ``drop`` (default ``2 + len(never)``) is
    how many ids the denominator leaves out; ``zero_never=False`` leaves ``never`` its share;
    ``add=True`` adds ``1 - eps`` to the target's share instead of setting it; ``target_shares``
    reads "shared by the ids that can be a right answer" as taking the target in: eps over
    ``V - 1 - len(never)`` ids, the target's share added to its ``1 - eps`` (rows sum to 1)."""
    if target_shares:
        drop, add = 1 + len(never), True
    drop = 2 + len(never) if drop is None else drop
    rows = target.reshape(-1, 1)  # (N, 1)
    dist = torch.full((rows.size(0), vocab_size), eps / (vocab_size - drop))  # (N, V)
    dist[:, pad_id] = 0.0
    if zero_never:
        dist[:, list(never)] = 0.0
    if add:
        dist.scatter_add_(1, rows, torch.full_like(rows, 1.0 - eps, dtype=dist.dtype))
    else:
        dist.scatter_(1, rows, 1.0 - eps)
    if pad_rows:
        dist[rows[:, 0] == pad_id] = 0.0
    return dist


def _smoothing_never_cases() -> list[Case]:
    # three `never` ids first: V - 2, V - 1 - len(never) and V - len(never) differ only then
    return [
        Case(
            (torch.tensor([3, 2, 6, 1, 2]), 10, 0.2, 2, [0, 5, 8]),
            "for target [3, 2, 6, 1, 2], V=10, eps=0.2, pad_id=2, never=[0, 5, 8]",
        ),
        Case(
            (torch.tensor([4, 0, 7, 5]), 9, 0.1, 0, [1]),
            "for target [4, 0, 7, 5], V=9, eps=0.1, pad_id=0, never=[1]",
        ),
        Case(
            (torch.tensor([4, 0, 7, 5]), 9, 0.1, 0, []),
            "for target [4, 0, 7, 5], V=9, eps=0.1, pad_id=0 and an empty never=[] (section 4's "
            "case)",
        ),
    ]


def _run_naming_the_case(code, case: Case):
    """``code(*case.args)``; when the learner's code raised, the message names the case it raised
    on (an empty ``never`` list is a case of its own: ``torch.tensor([])`` is a float tensor, which
    cannot index)."""
    try:
        return code(*case.args)
    except Failure as failure:
        raise Failure(f"{case.about}: {failure}") from None


SMOOTHING_NEVER = Entry(
    "check_smoothing_never",
    "your label smoothing",
    _smoothed_never,
    _smoothing_never_cases,
    [
        Mistake(
            "the ids in `never` got eps / (V - 2) like any other token (that is section 4's "
            "`tl.smoothed_targets`); they are never a right answer, so they get 0, and their share "
            "goes to the ids that can be.",
            partial(_smoothed_never, drop=2, zero_never=False),
        ),
        Mistake(
            "the row sums to less than 1: you set the `never` ids to 0 but kept section 4's eps / "
            "(V - 2). Count again the ids that share eps: every id but <pad>, the `never` ids and "
            "the target.",
            partial(_smoothed_never, drop=2),
        ),
        Mistake(
            "the row sums to less than 1: eps was spread over one id too many, V - 1 - "
            "len(never). Both <pad> and the target are left out of the share: V - 2 - "
            "len(never).",
            lambda t, v, e, p, n: _smoothed_never(t, v, e, p, n, drop=1 + len(n)),
        ),
        Mistake(
            "the row sums to less than 1: eps was spread over V - len(never) ids, <pad> and the "
            "target counted among them. Leave both out: V - 2 - len(never).",
            lambda t, v, e, p, n: _smoothed_never(t, v, e, p, n, drop=len(n)),
        ),
        Mistake(
            "the target got 1 - eps plus its share of eps: it gets exactly 1 - eps, and eps goes "
            "to the other ids only.",
            partial(_smoothed_never, add=True),
        ),
        Mistake(
            "the target took a share of eps as well as its 1 - eps: it keeps exactly 1 - eps, and "
            "eps is shared by the other ids that can be a right answer only (the row sums to 1 "
            "either way, so check the target's own value).",
            partial(_smoothed_never, target_shares=True),
        ),
        Mistake(
            "a row whose target is padding should be all zero, so it adds nothing to the loss.",
            partial(_smoothed_never, pad_rows=False),
        ),
        Mistake(
            "padding was taken to be id 0; use the `pad_id` argument.",
            lambda t, v, e, p, n: _smoothed_never(t, v, e, 0, n),
        ),
    ],
    "Hint: which ids can never be the right answer (they get 0), and which id already has its "
    "1 - eps? Count the ids left over: they share eps evenly, and each row but padding's sums to "
    "1. Rows of padding are all zero.",
    "1 - eps on the target, eps shared by the ids that can be a right answer, nothing on <pad> "
    "or on `never`, whatever `never` holds.",
    run=_run_naming_the_case,
    atol=1e-6,
)


def check_smoothing_never(make_targets: Callable) -> CheckResult:
    """Check ``make_targets(target (N,), vocab_size, eps, pad_id, never) -> (N, V)``: ``1 - eps``
    on the target, 0 on ``pad_id`` and on the ids in ``never`` (ids that are never a right answer,
    such as ``<bos>``), ``eps`` spread evenly over the remaining ``V - 2 - len(never)`` ids, and
    all-zero rows where the target is padding. Returns a CheckResult: truthy when it passed; it
    prints as one friendly paragraph."""
    return judge(SMOOTHING_NEVER, make_targets)


# --- exercise 2: how slowly the paper's schedule decays ------------------------------------------


def _steps_to_fraction(fraction, warmup, *, power=2, rounding=math.ceil, after_peak=False):
    """The reference (its knobs write the known mistakes): the first step at or after the peak
    (``warmup``) at which ``noam_lr`` is at most ``fraction`` of its peak. After the peak the rate
    is ``peak * sqrt(warmup / step)``, so it is ``step >= warmup / fraction**2``, rounded up to a
    whole step. ``power=1`` is a decay as 1/step; ``after_peak`` counts the steps after the peak."""
    step = rounding(warmup / fraction**power)
    return step - warmup if after_peak else step


# warmup / fraction**2 is no whole number in any case, 1e-2 or more away from one: a loop that
# compares rates in floats meets no tie
_FRACTION_CASES = ((0.3, 100), (0.7, 4000), (0.9, 50), (0.35, 400), (0.15, 40))


def _fraction_cases() -> list[Case]:
    return [
        Case((fraction, warmup), f"for fraction={fraction}, warmup={warmup}")
        for fraction, warmup in _FRACTION_CASES
    ]


_WARM_UP_SIDE = (
    "that step is not after the peak, it is on the warm-up side: the rate rises "
    "through that fraction of its peak at step fraction * warmup, and a loop that starts at step 1 "
    "stops at once, since the rate at step 1 is below that fraction too. The exercise asks for the "
    "decay: start the search after the peak."
)


def _pick_step(result, case: Case) -> dict:
    """The answer as one number (``one_number``); any answer at or before the peak, ``<= warmup``,
    is on the warm-up side (``fraction * warmup``, or 1 from a loop that starts at step 1), and is
    told so whatever its value."""
    picked = one_number("step")(result, case)
    warmup = case.args[1]
    if picked["step"] <= warmup:  # NaN compares False, and gets the NaN message
        raise Failure(
            f"{case.about}: your step is {float(picked['step']):g}, at or before the peak "
            f"(step {warmup}): {_WARM_UP_SIDE}"
        )
    return picked


STEPS_TO_FRACTION = Entry(
    "check_steps_to_fraction",
    "your step",
    _steps_to_fraction,
    _fraction_cases,
    [
        Mistake(
            "that is where a rate decaying as 1/step would be: after the peak the paper's rate is "
            "peak * sqrt(warmup / step), so the step must grow by 1 / fraction**2, not 1 / "
            "fraction.",
            partial(_steps_to_fraction, power=1),
        ),
        Mistake(
            "you counted the steps after the peak; return the step itself, counted from 1 as "
            "`tl.noam_lr` counts it (add warmup).",
            partial(_steps_to_fraction, after_peak=True),
        ),
        Mistake(
            "a step is a whole number: the first whole step at or past warmup / fraction**2.",
            lambda fraction, warmup: warmup / fraction**2,
        ),
        Mistake(
            "at that step the rate is still above the fraction of its peak: the first step at or "
            "past warmup / fraction**2 rounds up (math.ceil), not down or to the nearest.",
            partial(_steps_to_fraction, rounding=math.floor),
        ),
        Mistake(
            "at that step the rate is still above the fraction of its peak: the first step at or "
            "past warmup / fraction**2 rounds up (math.ceil), not down or to the nearest.",
            partial(_steps_to_fraction, rounding=round),
        ),
        Mistake(
            "one step late: the step before already has the rate at or below the fraction.",
            lambda fraction, warmup: _steps_to_fraction(fraction, warmup) + 1,
        ),
    ],
    "Hint: after the peak, how does noam_lr(step) compare with noam_lr(warmup)? Write their "
    "ratio from the formula (d_model cancels), then find the first whole step at which it is at "
    "most fraction.",
    "the first step after the peak at which the rate is at most that fraction of it: warmup / "
    "fraction**2, rounded up. The rate halves at step 4 x warmup and falls to a tenth at step 100 "
    "x warmup.",
    pick=_pick_step,
    atol=0.0,
    rtol=0.0,
)


def check_steps_to_fraction(steps_to_fraction: Callable) -> CheckResult:
    """Check ``steps_to_fraction(fraction, warmup) -> step``: the first step at or after the peak at
    which the paper's schedule (``noam_lr``, steps counted from 1) is at most ``fraction`` of its
    peak, ``0 < fraction < 1``: ``ceil(warmup / fraction**2)``, whatever ``d_model``. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(STEPS_TO_FRACTION, steps_to_fraction)


ENTRIES += (SMOOTHING_NEVER, STEPS_TO_FRACTION)
__all__ += ["check_smoothing_never", "check_steps_to_fraction"]
