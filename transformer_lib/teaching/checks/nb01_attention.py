"""Notebook 01 · attention: the checks of scaled dot-product attention and of the causal mask.

``check_causal_mask`` has a second form, for notebook 07's mask for cached decoding
(``with_cache=True``): it is the entry ``CAUSAL_MASK_WITH_CACHE``, variant ``"with_cache"``, kept
here with the check it belongs to. ``ATTENTION_BUGS`` are attention's known mistakes, which
multi-head attention (notebook 02) meets as well.
"""

import math
from collections.abc import Callable
from functools import partial

import torch

from ...model.attention import scaled_dot_product_attention
from ...model.masks import causal_mask
from . import inputs as draw
from . import variants
from .engine import (
    Case,
    CheckResult,
    Entry,
    Failure,
    Mistake,
    judge,
    knob_mistakes,
    output_and_weights,
    refuse,
    truth,
)
from .registry import Exercise, Question

__all__ = ["check_attention", "check_causal_mask"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _attention_cases() -> list[Case]:
    """Two shapes with d_k != d_v, a causal mask, per-sequence padding, and a query row with no
    allowed key."""
    gen = draw.generator()
    q, k, v, x = (
        draw.randn(gen, 2, 3, 4),
        draw.randn(gen, 2, 5, 4),
        draw.randn(gen, 2, 5, 6),
        draw.randn(gen, 2, 5, 4),
    )
    q4, k4, v4 = (
        draw.randn(gen, 3, 2, 4, 8, grad=True),
        draw.randn(gen, 3, 2, 4, 8, grad=True),
        draw.randn(gen, 3, 2, 4, 6, grad=True),
    )
    grads = {"q": q4, "k": k4, "v": v4}
    none_allowed = torch.ones(2, 3, 5, dtype=torch.bool)
    # sequence 0's query 1 may see no key: zero weights and a zero output, never NaN
    none_allowed[0, 1] = False
    return [
        Case((q, k, v), "for q (2, 3, 4), k (2, 5, 4), v (2, 5, 6), no mask"),
        Case((q4, k4, v4), "for (B, h, T, d_k) = (3, 2, 4, 8) and d_v = 6, no mask", inputs=grads),
        Case((x, x, x, causal_mask(5)[0]), "with a causal mask (1, 5, 5)"),
        Case(
            (q, k, v, draw.padded([3, 5], 5, dims=3)),
            "with a padding mask (2, 1, 5) that differs per sequence",
        ),
        Case(
            (q4, k4, v4, draw.padded([2, 4, 1], 4)),
            "with a padding mask (3, 1, 1, 4) that differs per sequence",
            inputs=grads,
        ),
        Case(
            (q, k, v, none_allowed),
            "with a mask (2, 3, 5) that lets query 1 of sequence 0 "
            "see no key (its weights and output must be 0, not NaN)",
        ),
    ]


def _causal_mask_cases(with_cache: bool) -> list[Case]:
    sizes = [(2, 5), (3, 3), (1, 1)] if with_cache else [(4,), (7,), (1,)]
    return [
        Case(size, f"for {'(T_q, T_k)' if with_cache else 'T'} = {', '.join(map(str, size))}")
        for size in sizes
    ]


# (hint, the knobs of variants.attention that make the bug), for attention and multi-head attention
# fmt: off
ATTENTION_BUGS = [
    ("you did not divide the scores by sqrt(d_k). Hint: `q @ k.transpose(-2, -1) / "
     "math.sqrt(q.size(-1))`.",
     {"scale": lambda q, v: 1.0}),
    ("you divided the scores by d_k instead of sqrt(d_k). Hint: `/ math.sqrt(q.size(-1))`.",
     {"scale": lambda q, v: q.size(-1)}),
    ("the scores were divided by sqrt(d_v), the width of the values; the scaling belongs to "
     "the dot products of queries and keys. Hint: `/ math.sqrt(q.size(-1))`, d_k.",
     {"scale": lambda q, v: math.sqrt(v.size(-1))}),
    ("the mask was applied after the softmax: the masked weights are 0, but each row no longer "
     "sums to 1. Hint: mask the scores with float('-inf') before the softmax.",
     {"after_softmax": True}),
    ("softmax ran over the queries (dim=-2), so the columns sum to 1, not the rows. Hint: "
     "`scores.softmax(dim=-1)`, over the keys.",
     {"dim": -2}),
    ("the mask changed nothing. Hint: `masked_fill` returns a new tensor: write `scores = "
     "scores.masked_fill(~mask, float('-inf'))`, and check that you used the mask at all.",
     {"keep": torch.ones_like}),
    ("the mask has the opposite polarity: you blocked where it is True. In this course True "
     "means 'may attend' (as in F.scaled_dot_product_attention; nn.MultiheadAttention uses "
     "True = blocked). Hint: `scores.masked_fill(~mask, float('-inf'))`.",
     {"keep": lambda m: ~m}),
    ("masked scores were set to 0, but exp(0) = 1 still gives them weight. Hint: fill with "
     "float('-inf') so softmax gives exactly 0.",
     {"fill": 0.0}),
    ("every sequence got the first sequence's mask, but each row of a batch is padded "
     "differently. Hint: keep the mask's batch axis, (B, 1, 1, T_k), and let it broadcast over "
     "heads and queries.",
     {"keep": lambda m: m[:1].expand_as(m)}),
    ("a query that may see no key got equal weights on every key (1/T_k each) and the mean of "
     "the values, not zeros: that is what `scores.masked_fill(mask == 0, -1e9)` does (the "
     "Annotated Transformer's code), since softmax of a row of equal -1e9 scores is uniform. In "
     "this course such a row gets zero weights and a zero output. Hint: after the softmax, "
     "`weights = weights.masked_fill(~mask, 0.0)`.",
     {"fill": -1e9, "nan_rows": True}),
]
# fmt: on


def _causal_mask_pick(result, case: Case) -> dict:
    """A causal mask may be ``(T_q, T_k)`` or ``(1, 1, T_q, T_k)`` (any leading axes of size 1); it
    must be bool."""
    size_q, size_k = case.args[0], case.args[-1]
    if isinstance(result, torch.Tensor) and result.dtype != torch.bool:
        raise Failure(
            f"the mask has dtype {result.dtype}; masks are bool, True = may attend. "
            "Hint: `torch.ones(T, T, dtype=torch.bool).tril()`."
        )
    if (
        isinstance(result, torch.Tensor)
        and result.shape[-2:] == (size_q, size_k)
        and result.numel() == size_q * size_k
    ):
        result = result.reshape(size_q, size_k)
    return {"mask": result}


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

ATTENTION = Entry(
    "check_attention",
    "your attention",
    lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask),
    _attention_cases,
    [
        *knob_mistakes(
            variants.attention,
            [
                (
                    "a query that may see no key got NaN: softmax over a row of -inf divides 0 by "
                    "0. In this course such a row gets zero weights and a zero output. Hint: "
                    "after the softmax, `weights = weights.masked_fill(~mask, 0.0)`.",
                    {"nan_rows": True},
                ),
                *ATTENTION_BUGS,
            ],
        ),
        Mistake(
            "you returned (weights, output): the output comes first, `return weights @ v, "
            "weights`.",
            lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[::-1],
        ),
    ],
    "Hint: scores = q k^T / sqrt(d_k); masked scores -inf; weights = softmax over the last axis; "
    "output = weights @ v.",
    # the success message is printed in notebook 08's committed outputs: changing it changes them
    "matches the library on 2 shapes, without a mask, with a causal mask and with padding that "
    "differs per sequence; gradients match too.",
    pick=output_and_weights,
)


CAUSAL_MASK = Entry(
    "check_causal_mask",
    "your causal mask",
    lambda size: causal_mask(size)[0, 0],
    partial(_causal_mask_cases, with_cache=False),
    [
        Mistake(
            "the mask is inverted: True should mark what a query *may* see (j <= i).",
            lambda t: ~causal_mask(t)[0, 0],
        ),
        Mistake(
            "this lets each token see the future and not the past: use `.tril()`, not `.triu()`.",
            lambda t: torch.ones(t, t, dtype=torch.bool).triu(),
        ),
        Mistake(
            "a token must be allowed to see itself: the diagonal belongs to the mask.",
            lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1),
        ),
    ],
    "Hint: query i may attend to keys j <= i (1 = may attend).",
    "lets each position see itself and the past only.",
    pick=_causal_mask_pick,
)


CAUSAL_MASK_WITH_CACHE = Entry(
    "check_causal_mask",
    "your causal mask",
    lambda size_q, size_k: causal_mask(size_q, size_k)[0, 0],
    partial(_causal_mask_cases, with_cache=True),
    [
        Mistake(
            "for T_q new queries among T_k positions, query i is position i + T_k - T_q: it sees "
            "every cached token. Hint: `.tril(diagonal=T_k - T_q)`.",
            lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(),
        ),
        Mistake(
            "the mask is inverted: True should mark what a query *may* see.",
            lambda q, k: ~causal_mask(q, k)[0, 0],
        ),
    ],
    "Hint: query i is position i + T_k - T_q and may see keys up to there.",
    "lets each new query see the cache, itself and the past only.",
    pick=_causal_mask_pick,
    variant="with_cache",
)

ENTRIES = (ATTENTION, CAUSAL_MASK, CAUSAL_MASK_WITH_CACHE)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_attention(attention: Callable) -> CheckResult:
    """Check ``attention(q, k, v, mask=None) -> (output, weights)`` (or ``output`` alone) against
    the library's scaled dot-product attention: two shapes (d_k != d_v), a causal mask, padding that
    differs per sequence, a query row that may see no key (its weights and output must be 0, not
    NaN), and gradients; the caller's tensors must not change. Returns a CheckResult: truthy when it
    passed; it prints as one friendly paragraph."""
    return judge(ATTENTION, attention)


def check_causal_mask(make_mask: Callable, with_cache: bool = False) -> CheckResult:
    """``make_mask(T) -> bool (T, T)``, or with leading axes of size 1 such as ``(1, 1, T, T)``,
    True where query i may see key j <= i; with_cache=True: ``make_mask(T_q, T_k)`` for the last
    ``T_q`` of ``T_k`` positions (KV cache): query i sits at ``i + T_k - T_q``."""
    cached = truth(with_cache)  # before judge's guard: an option whose bool() raises is refused
    if cached is None:
        return refuse("check_causal_mask", "`with_cache` should be True or False.")
    return judge(CAUSAL_MASK_WITH_CACHE if cached else CAUSAL_MASK, make_mask)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "01",
        "1",
        "my_attention",
        "scaled dot-product attention with an optional mask",
        "check_attention",
    ),
    Exercise("01", "2", "my_causal_mask", "the causal mask, (T, T) bool", "check_causal_mask"),
]

QUESTIONS = [Question("01", "3", "why another token's key can tie with a token's own")]
