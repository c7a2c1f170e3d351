"""Notebook 09 · GPU and scale: the check of the loss one data-parallel process backpropagates."""

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from ..checks import inputs as draw
from ..checks import variants
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, judge
from .registry import Exercise, Question

__all__ = ["check_shard_loss"]


def _shard_run(loss, case: Case):
    """What DDP's gradient averaging amounts to: the mean over the processes of each one's loss."""
    shards, tokens, world_size = case.args
    losses = [loss(logits, target, tokens, world_size) for logits, target in shards]
    wrong = [
        value for value in losses if not (isinstance(value, torch.Tensor) and value.dim() == 0)
    ]
    if wrong:
        raise Failure(
            "return one scalar tensor per process (0-dim, as `loss.backward()` needs), "
            f"got {describe(wrong[0])}."
        )
    return sum(losses) / world_size


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

SHARD_LOSS = Entry(
    "check_shard_loss",
    "your function",
    variants.shard_loss,
    draw.shards,
    [
        Mistake(
            "you averaged over each process's own tokens. With unequal shards the average of "
            "those means is not the mean over all tokens. Hint: sum over this shard's non-pad "
            "tokens and divide by `global_tokens`.",
            lambda logits, target, n, w: F.cross_entropy(
                logits.flatten(0, 1), target.flatten(), ignore_index=0
            ),
        ),
        Mistake(
            "the processes' average is world_size times too small: DDP divides the summed "
            "gradients by `world_size`, so multiply your loss by `world_size` to undo it.",
            partial(variants.shard_loss, scale=False),
        ),
        Mistake(
            "padding was counted in the loss. Hint: `ignore_index=0`.",
            partial(variants.shard_loss, ignore=-100),
        ),
    ],
    "Hint: cross-entropy summed over this shard's non-pad tokens (`reduction='sum', "
    "ignore_index=0`), times `world_size`, divided by `global_tokens`.",
    "the processes' average equals the big batch's mean over all tokens, however unequal.",
    run=_shard_run,
    pick=lambda result, case=None: {"loss": result},
)

ENTRIES = (SHARD_LOSS,)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_shard_loss(shard_loss: Callable) -> CheckResult:
    """Check ``shard_loss(logits, target, global_tokens, world_size) -> scalar``, the loss one
    data-parallel process backpropagates: averaged over the processes (what DDP does to the
    gradients), it must equal the big batch's mean over all its non-pad tokens, however unequal the
    shards. Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(SHARD_LOSS, shard_loss)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "09",
        "1",
        "my_shard_loss",
        "the loss one data-parallel process backpropagates",
        "check_shard_loss",
    ),
]

QUESTIONS = [Question("09", "2", "the work no attention kernel avoids")]
