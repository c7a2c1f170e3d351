"""Notebook 07 · inference: the check of sampling with a temperature.

The notebook's second exercise, the causal mask for cached decoding, is graded by notebook 01's
``check_causal_mask(..., with_cache=True)``: its entry sits with that check, in
:mod:`.nb01_attention`.
"""

from collections.abc import Callable
from functools import partial

from . import inputs as draw
from .engine import CheckResult, Entry, Mistake, judge
from .registry import Exercise, Question

__all__ = ["check_temperature_softmax"]


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

TEMPERATURE_SOFTMAX = Entry(
    "check_temperature_softmax",
    "your function",
    lambda logits, t: (logits / t).softmax(-1),
    # no gradients: sampling needs none, so code run under torch.no_grad() is right; a 3-D case, (B,
    # T, V), shows a softmax over dim=1 that 2-D logits would hide
    partial(
        draw.floats, [(2, 5), (2, 5), (3, 4), (2, 3, 5)], extra=(0.1, 1.0, 5.0, 2.0), grad=False
    ),
    [
        Mistake(
            "you multiplied by the temperature; divide: a high temperature should flatten.",
            lambda logits, t: (logits * t).softmax(-1),
        ),
        Mistake(
            "softmax ran over the wrong axis. Hint: `.softmax(dim=-1)`, over the vocabulary.",
            lambda logits, t: (logits / t).softmax(0),
        ),
        Mistake(
            "softmax ran over dim=1: for logits (B, V) that is the vocabulary, but for (B, T, V) "
            "it is the positions. Hint: `.softmax(dim=-1)`, always the last axis, the vocabulary.",
            lambda logits, t: (logits / t).softmax(1),
        ),
    ],
    "Hint: `(logits / temperature).softmax(dim=-1)`.",
    "low temperatures sharpen, high ones flatten.",
)

ENTRIES = (TEMPERATURE_SOFTMAX,)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_temperature_softmax(softmax_with_temperature: Callable) -> CheckResult:
    """Check ``softmax_with_temperature(logits, temperature)``: ``softmax(logits / temperature)``
    over the last axis, at temperatures 0.1, 1, 2 and 5, for logits ``(B, V)`` and ``(B, T, V)``; no
    gradient is needed. Returns a CheckResult: truthy when it passed; it prints as one friendly
    paragraph."""
    return judge(TEMPERATURE_SOFTMAX, softmax_with_temperature)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "07",
        "1",
        "my_softmax_with_temperature",
        "probabilities at a temperature",
        "check_temperature_softmax",
    ),
    Exercise(
        "07",
        "2",
        "my_cached_causal_mask",
        "the causal mask for cached decoding",
        "check_causal_mask",
        {"with_cache": True},
    ),
]

QUESTIONS = [Question("07", "3", "experiment: beam search with length penalties 0 and 2")]
