"""Notebook 06 · training: the checks of label smoothing and of the paper's learning-rate
schedule."""

from collections.abc import Callable
from functools import partial

import torch

from ...training.train import noam_lr, smoothed_targets
from .engine import Case, CheckResult, Entry, Mistake, judge, one_number
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
        "label-smoothed target distributions",
        "check_label_smoothing",
    ),
    Exercise("06", "2", "my_noam_lr", "the paper's learning-rate schedule", "check_noam_lr"),
]

QUESTIONS = [Question("06", "3", "experiment: the paper's schedule instead of the recipe's")]
