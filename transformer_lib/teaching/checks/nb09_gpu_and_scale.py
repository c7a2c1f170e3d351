"""Notebook 09 · GPU and scale: the check of the loss one data-parallel process backpropagates."""

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F

from . import inputs as draw
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, judge
from .registry import Exercise, Question

__all__ = ["check_shard_loss"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _shard_cases() -> list[Case]:
    """Data-parallel shards of unequal length and padding:
    ``([(logits, target) per rank], tokens, world_size)``."""
    gen, cases = draw.generator(), []
    for world_size in (2, 3):
        per_rank = []
        for rank in range(world_size):
            length = 3 + 2 * rank  # later ranks hold longer sequences: unequal token counts
            target = torch.randint(1, 7, (2, length), generator=gen)
            target[0, length - rank - 1 :] = 0  # some padding (pad id 0)
            per_rank.append((draw.randn(gen, 2, length, 7, grad=True), target))
        tokens = sum(int((target != 0).sum()) for _, target in per_rank)
        cases.append(
            Case(
                (per_rank, tokens, world_size),
                f"with {world_size} processes holding unequal shards",
                inputs={f"rank {r}'s logits": logits for r, (logits, _) in enumerate(per_rank)},
            )
        )
    return cases


def _shard_loss_variant(
    logits, target, tokens, world_size, *, scale=True, ignore=0
) -> torch.Tensor:
    """One process's loss: summed over its tokens but ``ignore``, over all ``tokens``, times
    ``world_size``."""
    total = F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=ignore, reduction="sum"
    )
    return total * (world_size if scale else 1) / tokens


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
    _shard_loss_variant,
    _shard_cases,
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
            partial(_shard_loss_variant, scale=False),
        ),
        Mistake(
            "padding was counted in the loss. Hint: `ignore_index=0`.",
            partial(_shard_loss_variant, ignore=-100),
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
