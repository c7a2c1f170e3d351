"""Notebook 06 · training: label smoothing that never predicts some ids, and the paper's
learning-rate schedule inverted."""

import math

import torch

import transformer_lib as tl


def my_smoothed_targets(target, vocab_size, eps, pad_id, never):
    """``(N,) -> (N, vocab_size)``: ``1 - eps`` on the target; 0 on ``<pad>`` and on the ids in
    ``never``, which are never a right answer; ``eps`` shared evenly by the other ids that can be,
    ``V - 2 - len(never)`` of them (all but <pad>, ``never`` and the target); all-zero rows where
    the target is padding."""
    share = eps / (vocab_size - 2 - len(never))
    dist = torch.full((target.numel(), vocab_size), share)  # (N, V)
    dist[:, [pad_id, *never]] = 0.0
    dist.scatter_(1, target.reshape(-1, 1), 1.0 - eps)
    dist[target.reshape(-1) == pad_id] = 0.0
    return dist


def my_steps_to_fraction(fraction, warmup):
    """The first step at which the paper's rate has fallen to ``fraction`` of its peak: after the
    peak at step ``warmup`` it is ``peak * sqrt(warmup / step)`` (``d_model`` cancels), at most
    ``fraction * peak`` from ``warmup / fraction**2`` on, rounded up to a whole step."""
    return math.ceil(warmup / fraction**2)


ANSWERS = {
    "3": (
        "With factor=0.24 the paper's schedule peaks at 3e-3 (0.24 * 64^-0.5 * 100^-0.5), like the "
        "recipe. In the committed run (results/paper_schedule.csv, seed 0, eps_ls=0.1) it first "
        "reaches 99% on the validation split at step 900 (the recipe's seeds with the same eps_ls: "
        "at step 1100) but does not stay there: it falls back below 99% at later checkpoints and "
        "ends at 0.986 at step 1600, while every recipe run ends at 1.000. Its 1/sqrt(step) "
        "tail still takes steps of 7.5e-4 at the end, where the recipe's linear decay reaches 0. "
        "With factor=2 the peak is 0.025, about 8 times the recipe's. No factor=2 run is "
        "committed; what to look at: the loss against the recipe's at the same steps (does it stop "
        "falling, or jump?), whether the trainer warns or stops on a non-finite loss, and the "
        "exact match at the end. Expect Adam's steps to be far too large for this model: the loss "
        "to stall well above the recipe's rather than reach it, and the exact match to stay well "
        "below 99% within the budget; a NaN is possible but not needed for the run to fail. The "
        "schedule's peak, factor * d_model^-0.5 * warmup^-0.5, matters more than its shape; "
        "compare several seeds before concluding."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_smoothed_targets": (lambda t, v, e, p, n: tl.smoothed_targets(t, v, e, p), "`never`"),
    "my_steps_to_fraction": (lambda fraction, warmup: math.ceil(warmup / fraction), "1/step"),
}
