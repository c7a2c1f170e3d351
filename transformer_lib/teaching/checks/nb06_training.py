"""Notebook 06 · training: the checks of label smoothing and of the paper's learning-rate
schedule."""

from collections.abc import Callable
from functools import partial

from ...training.train import noam_lr, smoothed_targets
from ..checks import inputs as draw
from ..checks import variants
from .engine import CheckResult, Entry, Mistake, judge, one_number
from .registry import Exercise, Question

__all__ = ["check_label_smoothing", "check_noam_lr"]


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

LABEL_SMOOTHING = Entry(
    "check_label_smoothing",
    "your label smoothing",
    smoothed_targets,
    draw.smoothing_targets,
    [
        Mistake(
            "a row whose target is padding should be all zero, so it adds nothing to the loss.",
            partial(variants.label_smoothing, pad_rows=False),
        ),
        Mistake(
            "<pad> got probability; it is never a correct answer. Hint: set column pad_id to 0 "
            "and spread eps over V - 2 tokens.",
            partial(variants.label_smoothing, others=1, pad_column=False),
        ),
        Mistake(
            "eps was spread over V - 1 tokens; <pad> gets none, so it goes to V - 2: eps / (V - "
            "2) each.",
            partial(variants.label_smoothing, others=1),
        ),
        Mistake(
            "padding was taken to be id 0; use the `pad_id` argument.",
            lambda target, v, eps, pad_id: variants.label_smoothing(target, v, eps, 0),
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
    draw.schedule_steps,
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
        "label-smoothed target distributions",
        "check_label_smoothing",
    ),
    Exercise("06", "2", "my_noam_lr", "the paper's learning-rate schedule", "check_noam_lr"),
]

QUESTIONS = [Question("06", "3", "experiment: the paper's schedule instead of the recipe's")]
