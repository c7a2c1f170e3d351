"""Notebook 13 · the modern decoder: the checks of RMSNorm, rotary attention, SwiGLU, repeating
key/value heads for grouped-query attention, and choosing the number of key/value heads for a cache
budget.

Rotary positions come in two pair layouts: the interleaved pairs ``(2i, 2i+1)`` of RoFormer and
Meta's Llama (``tl.apply_rope``) and Hugging Face's "rotate half" pairs ``(i, i + d_k/2)``. Both are
right: the check of rotary attention accepts either and names the one it found, and names a known
mistake in either layout.
"""

import dataclasses
import math
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from ...model.attention import kv_cache_bytes_per_token
from ...model.layers import PositionwiseFeedForward, RMSNorm
from ...model.lm import LMConfig
from ...model.masks import causal_mask
from .engine import (
    Case,
    CheckResult,
    Entry,
    Failure,
    Mistake,
    _differs,
    _text,
    judge,
    one_number,
)
from .references import copy_weights
from .registry import Exercise, Question

__all__ = [
    "check_rms_norm",
    "check_rotary_attention",
    "check_swiglu",
    "check_repeat_kv",
    "check_kv_heads_for_budget",
]


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(13)


# --- RMSNorm --------------------------------------------------------------------------------------


def _rms_reference(student: nn.Module, d_model: int, eps: float = 1e-5) -> RMSNorm:
    """``tl.RMSNorm(d_model, eps)`` with the student's gain ``weight``, set first to values other
    than 1."""
    named = dict(student.named_parameters())
    found = sum(p.numel() for p in named.values())
    if found != d_model or "weight" not in named or named["weight"].shape != (d_model,):
        shapes = ", ".join(f"`{n}` {tuple(p.shape)}" for n, p in named.items()) or "none"
        raise Failure(
            f"RMSNorm({d_model}) learns one gain per feature and no shift: a parameter "
            f"`weight` of shape ({d_model},) and nothing else; found {shapes}. Hint: "
            "`self.weight = nn.Parameter(torch.ones(d_model))`, and no bias."
        )
    if not torch.all(named["weight"] == 1):
        raise Failure(
            "a fresh RMSNorm should only rescale: its gain `weight` starts at 1. Hint: "
            "`torch.ones(d_model)`."
        )
    with torch.no_grad():
        named["weight"].copy_(torch.linspace(0.5, 2.0, d_model))
    reference = RMSNorm(d_model, eps)
    with torch.no_grad():
        reference.weight.copy_(named["weight"])
    return reference


def _rms(x, eps, dim=-1):
    return x / torch.sqrt(x.pow(2).mean(dim, keepdim=True) + eps)


def _rms_norms() -> list[Case]:
    """Random tokens with a large mean (the first with gradients), tokens near zero (where eps
    decides), and a module built with another eps."""
    gen = _generator()
    # mean 5: centring would show
    x = (torch.randn(3, 4, 8, generator=gen) + 5.0).requires_grad_(True)
    y = torch.randn(5, 8, generator=gen) * 3 + 1
    # rms 0, ~1e-3, ~1e-2
    small = torch.tensor([0.0, 1e-3, 1e-2])[:, None] * torch.randn(3, 8, generator=gen)
    return [
        Case((x,), "for tokens (3, 4, 8) whose features average about 5", ((8,), {}), {"input": x}),
        Case((y,), "for tokens (5, 8)", ((8,), {})),
        Case(
            (small,),
            "for a zero token and two near zero (rms 0, ~1e-3, ~1e-2), where eps matters",
            ((8,), {}),
        ),
        Case((y,), "for tokens (5, 8) and eps=1e-2", ((8,), {"eps": 1e-2})),
    ]


RMS_NORM = Entry(
    "check_rms_norm",
    "your RMSNorm",
    _rms_reference,
    _rms_norms,
    [
        Mistake(
            "you subtracted the mean: that is LayerNorm without its shift. RMSNorm divides x "
            "itself by its root mean square, so a token whose features all sit near 5 keeps that "
            "offset. Hint: `x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * "
            "self.weight`, no `x - mean`.",
            lambda ref, x: _rms(x - x.mean(-1, keepdim=True), ref.eps) * ref.weight,
        ),
        Mistake(
            "you divided by the standard deviation (mean subtracted inside the variance) instead "
            "of the root mean square. Hint: `x.pow(2).mean(-1, keepdim=True)`, not `x.var(...)`.",
            lambda ref, x: (
                x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + ref.eps) * ref.weight
            ),
        ),
        Mistake(
            "eps was added outside the square root, `/ (rms + eps)`; RMSNorm (Llama, tl.RMSNorm) "
            "adds it to the mean square: `/ torch.sqrt(mean_square + eps)` (a token near zero "
            "shows the difference).",
            lambda ref, x: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + ref.eps) * ref.weight,
        ),
        Mistake(
            "eps was ignored: the module always used 1e-5 (or another fixed number). Hint: store "
            "the `eps` argument, `self.eps = eps`, and use it.",
            lambda ref, x: _rms(x, 1e-5) * ref.weight,
        ),
        Mistake(
            "eps was 1e-6 (Llama's) where the module was built with another: the default is 1e-5, "
            "as tl.RMSNorm's, and the `eps` argument must be used. Hint: `def __init__(self, "
            "d_model, eps=1e-5)` and `self.eps = eps`.",
            lambda ref, x: _rms(x, 1e-6) * ref.weight,
        ),
        Mistake(
            "there is no eps: a zero token is 0 / 0 (NaN). Hint: `torch.sqrt(mean_square + "
            "self.eps)`.",
            lambda ref, x: _rms(x, 0.0) * ref.weight,
        ),
        Mistake(
            "you normalised over the tokens (dim=-2), not over each token's features. Hint: the "
            "mean square over dim=-1, with keepdim=True.",
            lambda ref, x: _rms(x, ref.eps, dim=-2) * ref.weight,
        ),
        Mistake(
            "the root mean square was not taken: you divided by the mean square (no square "
            "root). Hint: `torch.sqrt(...)` or `torch.rsqrt(...)` as a multiplier.",
            lambda ref, x: x / (x.pow(2).mean(-1, keepdim=True) + ref.eps) * ref.weight,
        ),
        Mistake(
            "the gain is not applied. Hint: `... * self.weight`.", lambda ref, x: _rms(x, ref.eps)
        ),
    ],
    "Hint: x / sqrt(mean(x^2) + eps) * gain, over the last axis; no mean subtracted, no shift.",
    "divides each token by its root mean square over the features, keeps its mean, eps inside the "
    "root; gradients match.",
    builds=True,
)


# --- rotary attention -----------------------------------------------------------------------------

LAYOUTS = {
    "interleaved": "interleaved pairs (2i, 2i+1), as RoFormer, Meta's Llama and tl.apply_rope",
    "rotate_half": "rotate-half pairs (i, i + d_k/2), as Hugging Face's Llama",
}


def _rotate(
    x: torch.Tensor, positions: torch.Tensor, theta: float, layout: str, exponent: str = "right"
):
    """``x (B, h, T, d_k)`` rotated pair by pair: pair ``i`` turns by
    ``position * theta^(-2i/d_k)``; ``exponent`` writes a known mistake of that frequency."""
    d_k = x.size(-1)
    i = torch.arange(d_k // 2, dtype=torch.float64)
    frequency = {
        "right": theta ** (-2 * i / d_k),
        "pair index": theta ** (-i / d_k),
        "positive": theta ** (2 * i / d_k),
        "no d_k": theta ** (-2 * i),
    }[exponent]
    angles = positions.double()[:, None] * frequency  # (T, d_k/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., : d_k // 2], x[..., d_k // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def rotary_attention(
    q,
    k,
    v,
    start,
    theta,
    layout="interleaved",
    rotate=("q", "k"),
    restart=False,
    exponent="right",
    causal=True,
):
    """The reference (and, with its knobs, the known mistakes): causal attention of queries at
    positions ``start..start+T_q-1`` over keys at ``0..T_k-1``, with rotary positions on the queries
    and keys."""
    t_q, t_k = q.size(2), k.size(2)
    q_positions = torch.arange(t_q) if restart else torch.arange(start, start + t_q)
    k_positions = torch.arange(t_k)
    if "q" in rotate:
        q = _rotate(q, q_positions, theta, layout, exponent)
    if "k" in rotate:
        k = _rotate(k, k_positions, theta, layout, exponent)
    if "v" in rotate:
        v = _rotate(v, k_positions, theta, layout, exponent)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, T_q, T_k)
    if causal:
        scores = scores.masked_fill(~causal_mask(t_q, t_k), float("-inf"))
    return scores.softmax(-1) @ v  # (B, h, T_q, d_k)


_ROTARY_MISTAKES = [
    (
        "the values were rotated too. Rotary positions turn the queries and the keys only: the "
        "score q·k then sees the offset m - n; the values carry content, and a rotated value "
        "would mix position into what is read.",
        {"rotate": ("q", "k", "v")},
    ),
    (
        "the keys were not rotated (only the queries): the score then depends on the query's "
        "absolute position, not on the offset. Hint: rotate k by its positions 0..T_k-1 too.",
        {"rotate": ("q",)},
    ),
    (
        "the queries' positions restarted at 0: in cached decoding the new tokens sit after the "
        "`start` cached ones, at positions start, start+1, ... Hint: `torch.arange(start, start + "
        "T_q)` for the queries.",
        {"restart": True},
    ),
    (
        "the queries were not rotated (only the keys). Hint: rotate q by its positions "
        "start..start+T_q-1 too.",
        {"rotate": ("k",)},
    ),
    (
        "the frequencies are wrong: pair i turns at theta^(-2i/d_k), and you used theta^(-i/d_k), "
        "counting i over pairs but dividing as if over features. Hint: `theta ** (-torch.arange(0, "
        "d_k, 2) / d_k)`.",
        {"exponent": "pair index"},
    ),
    (
        "the frequencies grow instead of shrinking: pair i turns at theta^(-2i/d_k) (a minus in "
        "the exponent), so pair 0 turns fastest, one radian per position. Hint: `1.0 / theta ** "
        "(torch.arange(0, d_k, 2) / d_k)`.",
        {"exponent": "positive"},
    ),
    (
        "the exponent lost its `/ d_k`: pair i turns at theta^(-2i/d_k). Hint: `theta ** "
        "(-torch.arange(0, d_k, 2) / d_k)`.",
        {"exponent": "no d_k"},
    ),
    (
        "there is no causal mask: with several new queries, query start+i may see only keys "
        "0..start+i. Hint: `tl.causal_mask(T_q, T_k)`, True = may attend, into "
        "`tl.scaled_dot_product_attention`.",
        {"causal": False},
    ),
]


def _rotary_cases() -> list[Case]:
    gen = _generator()

    def case(b, h, t_q, start, d_k, theta, about):
        t_k = start + t_q
        q, k, v = (torch.randn(b, h, t, d_k, generator=gen) for t in (t_q, t_k, t_k))
        return Case((q, k, v, start, theta), about)

    return [
        case(
            2,
            2,
            4,
            0,
            8,
            10000.0,
            "for a prompt: 4 queries at positions 0-3, start=0, d_k=8, theta=10000",
        ),
        case(
            1,
            2,
            1,
            5,
            8,
            10000.0,
            "for one cached step: the query at position 5 over 6 keys, d_k=8",
        ),
        case(
            2,
            1,
            2,
            3,
            16,
            100.0,
            "for 2 new queries at positions 3-4 over 5 keys, d_k=16, theta=100",
        ),
    ]


_FIRST_ROTARY_CASE = "for a prompt"


def _output_only(result):
    return result[0] if isinstance(result, tuple) and len(result) == 2 else result


def _rotary_verdict(result, case: Case) -> str:
    """Pass in either layout, naming it; else name a known mistake (in either layout), or the first
    difference."""
    got = {"output": _output_only(result)}
    problems = {}
    for layout in LAYOUTS:
        problems[layout] = _differs(
            got, {"output": rotary_attention(*case.args, layout=layout)}, 1e-4, 1e-5
        )
        if problems[layout] is None:
            return (
                f"your rotation uses {LAYOUTS[layout]}; both layouts are right."
                if case.about.startswith(_FIRST_ROTARY_CASE)
                else ""
            )
    for hint, knobs in _ROTARY_MISTAKES:
        for layout in LAYOUTS:
            wrong = rotary_attention(*case.args, layout=layout, **knobs)
            if (
                _differs(
                    {"output": wrong},
                    {"output": rotary_attention(*case.args, layout=layout)},
                    1e-4,
                    1e-5,
                )
                and _differs(got, {"output": wrong}, 1e-4, 1e-5) is None
            ):
                raise Failure(f"{case.about}: {hint} (Your pairs: {LAYOUTS[layout]}.)")
    raise Failure(
        f"{case.about}: {problems['interleaved']} Hint: rotate q (positions "
        "start..start+T_q-1) and k (positions 0..T_k-1) pair by pair, e.g. with "
        "`tl.apply_rope`, leave v alone, then causal attention: "
        "`tl.scaled_dot_product_attention(q, k, v, tl.causal_mask(T_q, T_k))[0]`."
    )


ROTARY_ATTENTION = Entry(
    "check_rotary_attention",
    "your rotary attention",
    None,
    _rotary_cases,
    verdict=_rotary_verdict,
    success="rotates queries and keys by their positions (new queries after the cached ones), "
    "leaves values alone, masks causally.",
)


# --- SwiGLU ---------------------------------------------------------------------------------------


def _swiglu_reference(student: nn.Module, d_model: int, d_ff: int) -> PositionwiseFeedForward:
    found = sum(p.numel() for p in student.parameters())
    if found != 3 * d_model * d_ff:
        raise Failure(
            f"MySwiGLU({d_model}, {d_ff}) should hold three bias-free matrices, gate and "
            f"up ({d_model} -> {d_ff}) and down ({d_ff} -> {d_model}): "
            f"{3 * d_model * d_ff} numbers; it registers {found}. Hint: "
            "`nn.Linear(d_model, d_ff, bias=False)` for `gate` and `up`, "
            "`nn.Linear(d_ff, d_model, bias=False)` for `down`."
        )
    reference = PositionwiseFeedForward(d_model, d_ff, activation="swiglu", bias=False)
    return copy_weights(reference, student, {"gate": "gate", "linear1": "up", "linear2": "down"})


SWIGLU = Entry(
    "check_swiglu",
    "your SwiGLU",
    _swiglu_reference,
    lambda: [
        Case((x,), f"for input {tuple(x.shape)}", ((8, 12), {}), {"input": x} if i == 0 else {})
        for i, x in enumerate(
            [
                torch.randn(2, 5, 8, generator=_generator()).requires_grad_(True),
                torch.randn(7, 8, generator=_generator()) * 3,
            ]
        )
    ],
    [
        Mistake(
            "SiLU went on the up projection instead of the gate: `silu(up(x)) * gate(x)`. That "
            "is a different function of the same weights, though just as trainable from scratch "
            "(the two matrices swap roles); the names matter when weights are copied: Llama's "
            "checkpoints put SiLU on `gate_proj`. Hint: `down(silu(gate(x)) * up(x))`.",
            lambda ref, x: ref.linear2(F.silu(ref.linear1(x)) * ref.gate(x)),
        ),
        Mistake(
            "the gate used a sigmoid, `sigmoid(gate(x)) * up(x)`: that is the original GLU "
            "(Dauphin et al. 2017). SwiGLU uses SiLU (Swish), `gate(x) * sigmoid(gate(x))`. "
            "Hint: `F.silu(self.gate(x))`.",
            lambda ref, x: ref.linear2(torch.sigmoid(ref.gate(x)) * ref.linear1(x)),
        ),
        Mistake(
            "the gate used a ReLU (that is ReGLU). Hint: `F.silu(self.gate(x))`.",
            lambda ref, x: ref.linear2(torch.relu(ref.gate(x)) * ref.linear1(x)),
        ),
        Mistake(
            "SiLU was applied after the product, `silu(gate(x) * up(x))`: the gate's "
            "nonlinearity must act on the gate alone. Hint: `F.silu(self.gate(x)) * self.up(x)`.",
            lambda ref, x: ref.linear2(F.silu(ref.gate(x) * ref.linear1(x))),
        ),
        Mistake(
            "there is no gate: `down(silu(up(x)))` is an ordinary feed-forward with SiLU. Hint: "
            "multiply by the gate, `F.silu(self.gate(x)) * self.up(x)`.",
            lambda ref, x: ref.linear2(F.silu(ref.linear1(x))),
        ),
    ],
    "Hint: `self.down(F.silu(self.gate(x)) * self.up(x))`.",
    "down(silu(gate(x)) * up(x)), three bias-free matrices; gradients match.",
    builds=True,
)


# --- repeating key/value heads --------------------------------------------------------------------


def _repeat_reference(x, num_heads):
    return x.repeat_interleave(num_heads // x.size(1), dim=1)


def _repeat_cases() -> list[Case]:
    def numbered(shape, num_heads, grad=False):
        x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape).requires_grad_(grad)
        about = f"for key/value heads {shape} (h_kv={shape[1]}) and num_heads={num_heads}"
        return Case((x, num_heads), about, inputs={"x": x} if grad else {})

    return [
        numbered((2, 2, 3, 4), 4, grad=True),
        numbered((1, 3, 2, 2), 6),
        numbered((1, 1, 2, 2), 4),
        numbered((1, 4, 2, 2), 4),
    ]


REPEAT_KV = Entry(
    "check_repeat_kv",
    "your repeat_kv",
    _repeat_reference,
    _repeat_cases,
    [
        Mistake(
            "the heads came out in the order 0, 1, 0, 1 (tiled: `repeat` does this, and so does "
            "an `expand` whose new axis comes before h_kv); tl.MultiHeadAttention (and Hugging "
            "Face's `repeat_kv`) groups consecutive query heads: query heads 0 and 1 read "
            "key/value head 0, heads 2 and 3 read head 1, so the order is 0, 0, 1, 1. Hint: put "
            "the new axis after h_kv, `x[:, :, None].expand(B, h_kv, g, T, d).reshape(B, "
            "num_heads, T, d)`. (Either grouping trains, but weights copied from a checkpoint "
            "only work with the one it used.)",
            lambda x, n: x.repeat(1, n // x.size(1), 1, 1),
        ),
        Mistake(
            "every head was repeated num_heads times (not num_heads // h_kv). Hint: each "
            "key/value head serves num_heads // h_kv query heads.",
            lambda x, n: x.repeat_interleave(n, dim=1),
        ),
    ],
    "Hint: query head i reads key/value head i // g, g = num_heads // h_kv: "
    "`x[:, :, None].expand(B, h_kv, g, T, d).reshape(B, num_heads, T, d)`.",
    "each key/value head serves a block of num_heads // h_kv consecutive query heads, as in "
    "tl.MultiHeadAttention.",
)


# --- choosing the number of key/value heads -------------------------------------------------------


def _kv_heads_for_budget(
    config,
    budget_bytes,
    dtype,
    bytes_of=None,
    factor=2,
    layers=True,
    fits=None,
    divides=True,
    smallest=False,
    allowed=None,
):
    """The reference (its knobs write the known mistakes): the most key/value heads, a divisor of
    ``num_heads``, whose cache grows by at most ``budget_bytes`` per token; a ValueError, as the
    notebook asks, when not even one head's cache fits. ``allowed(k, num_heads)`` narrows the
    numbers tried (a mistake that never tries ``num_heads``, or tries powers of two only)."""
    size = bytes_of if bytes_of is not None else torch.empty((), dtype=dtype).element_size()
    d_k = config.d_model // config.num_heads
    per_head = factor * (config.num_layers if layers else 1) * d_k * size
    fits = fits or (lambda need: need <= budget_bytes)
    candidates = [
        k
        for k in range(1, config.num_heads + 1)
        if (not divides or config.num_heads % k == 0)
        and (allowed is None or allowed(k, config.num_heads))
        and fits(k * per_head)
    ]
    if not candidates:
        raise ValueError(
            f"expected a budget of at least {per_head} bytes per token (one key/value head), "
            f"got {budget_bytes}"
        )
    return (min if smallest else max)(candidates)


def _budget_cases() -> list[Case]:
    # d_k 16: 512 B a head in fp32
    small = LMConfig.llama_like(100, d_model=128, num_heads=8, num_layers=4)
    # d_k 16: 256 B a head in fp32
    wide = LMConfig.llama_like(100, d_model=192, num_heads=12, num_layers=2)
    # d_k 16: 256 B a head in fp32; h = 10 has divisors 1, 2, 5, 10
    ten = LMConfig.llama_like(100, d_model=160, num_heads=10, num_layers=2)
    # 1536: exactly 6 heads
    exact = kv_cache_bytes_per_token(wide.replace(n_kv_heads=6), torch.float32)
    return [
        Case(
            (small, 2000, torch.float32),
            "for h=8, 4 layers, d_model=128, a budget of 2000 bytes, float32",
        ),
        Case(
            (small, 2000, torch.float16),
            "for h=8, 4 layers, d_model=128, a budget of 2000 bytes, float16",
        ),
        # all 8 heads fit (4096 bytes): the answer is num_heads itself
        Case(
            (small, 10**6, torch.float32),
            "for h=8, 4 layers, d_model=128, a budget of 1000000 bytes, float32",
        ),
        Case(
            (wide, 1400, torch.float32),
            "for h=12, 2 layers, d_model=192, a budget of 1400 bytes, float32",
        ),
        # 7 heads fit: the answer is 6, not a power of two (4)
        Case(
            (wide, 2000, torch.float32),
            "for h=12, 2 layers, d_model=192, a budget of 2000 bytes, float32",
        ),
        Case(
            (wide, exact, torch.float32),
            f"for h=12, 2 layers, d_model=192, a budget of {exact} bytes (exactly 6 heads' cache), "
            "float32",
        ),
        # 4 heads fit, and 4 does not divide 10: the answer is 2 (h // ceil(h / 4) gives 3)
        Case(
            (ten, 1100, torch.float32),
            "for h=10, 2 layers, d_model=160, a budget of 1100 bytes, float32",
        ),
        # one head's cache is 512 bytes: none fits, and the notebook asks for a ValueError
        Case(
            (small, 500, torch.float32),
            "for h=8, 4 layers, d_model=128, a budget of 500 bytes (one head's cache is 512), "
            "float32",
        ),
    ]


class _Raised:
    """What the budget check's run returns when the code raised a ValueError (the notebook's answer
    for a budget below one key/value head's cache)."""


def _run_budget(code, case: Case):
    """``code(*case.args)``, or :class:`_Raised` when it raised a ValueError: the reference and the
    mistakes raise it directly, student code through the engine's failure (its context)."""
    try:
        return code(*case.args)
    except ValueError:
        return _Raised
    except Failure as failure:
        raised = failure.__context__
        if isinstance(raised, ValueError):
            return _Raised
        if isinstance(raised, dataclasses.FrozenInstanceError):
            raise Failure(
                f"{case.about}: your choice tried to change the config "
                f"({type(raised).__name__}: {_text(raised)[:80]}); an LMConfig is frozen. Hint: "
                "`config.replace(n_kv_heads=k)` gives a copy with k key/value heads."
            ) from None
        if isinstance(raised, Exception) and not _fits(case):
            raise Failure(
                f"{case.about}: not even one key/value head's cache fits, and your choice raised "
                f"{type(raised).__name__}: the notebook asks for a ValueError here. Hint: "
                "`raise ValueError(...)` when no divisor fits (an `assert` raises "
                "AssertionError)."
            ) from None
        raise


def _fits(case: Case, reference: Callable = _kv_heads_for_budget) -> bool:
    """Whether at least one key/value head's cache fits the case's budget (the reference, bound
    here so that student code that replaces the module's name does not change later checks)."""
    try:
        reference(*case.args)
    except ValueError:
        return False
    return True


def _pick_budget(result, case: Case) -> dict:
    """The number of heads as one number; a ValueError where the notebook asks for one, and a named
    failure where a number and an error are swapped."""
    fits = _fits(case)
    if result is _Raised and fits:
        config, _, dtype = case.args
        one_head = kv_cache_bytes_per_token(config.replace(n_kv_heads=1), dtype)
        raise Failure(
            f"{case.about}: your choice raised a ValueError, but at least one key/value head's "
            f"cache fits this budget (one head costs {one_head} bytes per token), so your count "
            "of one head's bytes is too large: it is 2 (keys and values) x num_layers x d_k x "
            "bytes per number, with d_k = d_model // num_heads (not d_model) and bytes, not bits "
            "(`torch.empty((), dtype=dtype).element_size()`). Hint: "
            "`tl.kv_cache_bytes_per_token(config.replace(n_kv_heads=1), dtype)`; raise only when "
            "no divisor of num_heads fits."
        )
    if result is _Raised:
        return {"number of key/value heads": torch.tensor(-1.0, dtype=torch.float64)}
    if not fits:
        raise Failure(
            f"{case.about}: not even one key/value head's cache fits, and your choice returned "
            f"{_text(result, repr)[:60]}: the notebook asks for a ValueError here (a model "
            "needs at least one key/value head). Hint: `raise ValueError(...)` when no divisor "
            "fits."
        )
    return one_number("number of key/value heads")(result, case)


def _kv_heads_by_division(config, budget_bytes, dtype):
    """Mistake: the heads that fit, ``fit``, turned into ``h // ceil(h / fit)``: a divisor of h
    for h = 8 or 12 and these budgets, not for h = 10 and 4 heads (3)."""
    fit = _kv_heads_for_budget(config, budget_bytes, dtype, divides=False)
    return config.num_heads // math.ceil(config.num_heads / fit)


KV_HEADS_FOR_BUDGET = Entry(
    "check_kv_heads_for_budget",
    "your choice",
    _kv_heads_for_budget,
    _budget_cases,
    [
        Mistake(
            "your number does not divide num_heads: every key/value head must serve a whole "
            "group of query heads (h % h_kv == 0), so take the largest divisor of h that fits.",
            partial(_kv_heads_for_budget, divides=False),
        ),
        Mistake(
            "`h // ceil(h / fit)` is not always a divisor of h: for h = 10 and 4 heads that fit it "
            "gives 3, and 10 % 3 != 0. Hint: try each k from 1 to h, keep those with h % k == 0 "
            "whose cache fits, and take the largest.",
            _kv_heads_by_division,
        ),
        Mistake(
            "you took the fewest heads (1, multi-query): it always fits, but the quality cost "
            "grows as heads are shared; the question is the most heads the budget allows.",
            partial(_kv_heads_for_budget, smallest=True),
        ),
        Mistake(
            "you counted 4 bytes a number whatever the dtype: float16 and bfloat16 take 2. Hint: "
            "`torch.empty((), dtype=dtype).element_size()`, or "
            "`tl.kv_cache_bytes_per_token(config, dtype)`.",
            partial(_kv_heads_for_budget, bytes_of=4),
        ),
        Mistake(
            "you counted the keys but not the values (or the other way): the cache holds both, a "
            "factor 2. Hint: `tl.kv_cache_bytes_per_token`.",
            partial(_kv_heads_for_budget, factor=1),
        ),
        Mistake(
            "you counted one layer: every layer keeps its own keys and values. Hint: times "
            "num_layers.",
            partial(_kv_heads_for_budget, layers=False),
        ),
        Mistake(
            "you never tried k = num_heads, where every query head keeps its own key/value head "
            "(`range(1, num_heads)` stops before num_heads): here all of them fit. Hint: "
            "`range(1, num_heads + 1)`.",
            partial(_kv_heads_for_budget, allowed=lambda k, h: k < h),
        ),
        Mistake(
            "a cache that exactly meets the budget fits too: use `<=`, not `<`.",
            lambda config, budget, dtype: _kv_heads_for_budget(
                config, budget, dtype, fits=lambda need: need < budget
            ),
        ),
        # after `<`: on the exact case both give 4; powers of two fail first on the case before it
        Mistake(
            "you tried powers of two only, but a divisor of num_heads need not be one: h = 12 has "
            "divisors 1, 2, 3, 4, 6, 12. Hint: try every k from 1 to num_heads with "
            "num_heads % k == 0.",
            partial(_kv_heads_for_budget, allowed=lambda k, h: k & (k - 1) == 0),
        ),
    ],
    "Hint: try each divisor k of num_heads; the cache of k heads is `tl.kv_cache_bytes_per_token("
    "config.replace(n_kv_heads=k), dtype)`; keep the largest within the budget.",
    "the most key/value heads that divide h and fit the budget, and a ValueError when not even "
    "one fits.",
    pick=_pick_budget,
    run=_run_budget,
    atol=0.0,
    rtol=0.0,
)

ENTRIES = (RMS_NORM, ROTARY_ATTENTION, SWIGLU, REPEAT_KV, KV_HEADS_FOR_BUDGET)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_rms_norm(module_class: type) -> CheckResult:
    """Check the class ``MyRMSNorm(d_model, eps=1e-5)``, with a learned gain ``weight`` (shape
    ``(d_model,)``, starting at 1) and no shift, against ``tl.RMSNorm``:
    ``x / sqrt(mean(x^2) + eps) * weight`` over each token's features, on tokens with a large mean
    and tokens near zero; gradients match. Returns a CheckResult: truthy when it passed; it prints
    as one friendly paragraph."""
    return judge(RMS_NORM, module_class)


def check_rotary_attention(rotary_attention: Callable) -> CheckResult:
    """Check ``rotary_attention(q, k, v, start, theta) -> (B, h, T_q, d_k)``: the queries
    ``(B, h, T_q, d_k)`` of the tokens at positions ``start..start+T_q-1`` attend causally to the
    keys and values ``(B, h, T_k, d_k)`` at positions ``0..T_k-1`` (``T_k = start + T_q``), queries
    and keys rotated by their positions with frequencies ``theta^(-2i/d_k)``. Either pair layout
    passes (interleaved or rotate-half) and the message names it. Returns a CheckResult: truthy when
    it passed; it prints as one friendly paragraph."""
    return judge(ROTARY_ATTENTION, rotary_attention)


def check_swiglu(module_class: type) -> CheckResult:
    """Check the class ``MySwiGLU(d_model, d_ff)`` with bias-free ``gate``, ``up`` (d_model -> d_ff)
    and ``down`` (d_ff -> d_model) against the library's SwiGLU feed-forward
    ``down(silu(gate(x)) * up(x))`` holding the same weights; gradients match. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(SWIGLU, module_class)


def check_repeat_kv(repeat_kv: Callable) -> CheckResult:
    """Check ``repeat_kv(x (B, h_kv, T, d), num_heads) -> (B, num_heads, T, d)``: query head ``i``
    reads key/value head ``i // (num_heads // h_kv)``, the grouping of ``tl.MultiHeadAttention``.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(REPEAT_KV, repeat_kv)


def check_kv_heads_for_budget(kv_heads_for_budget: Callable) -> CheckResult:
    """Check ``kv_heads_for_budget(config: LMConfig, budget_bytes: int, dtype) -> int``: the largest
    number of key/value heads that divides ``config.num_heads`` and whose KV cache grows by at most
    ``budget_bytes`` per token in ``dtype``. Returns a CheckResult: truthy when it passed; it prints
    as one friendly paragraph."""
    return judge(KV_HEADS_FOR_BUDGET, kv_heads_for_budget)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise("13", "1", "MyRMSNorm", "RMSNorm from scratch", "check_rms_norm"),
    Exercise(
        "13",
        "2",
        "my_rotary_attention",
        "rotary positions in (cached) causal attention",
        "check_rotary_attention",
    ),
    Exercise(
        "13",
        "3",
        "my_swiglu_width",
        "SwiGLU's hidden width: a multiple of multiple_of, parameters closest to ReLU's",
        "check_swiglu_width",
    ),
    Exercise(
        "13",
        "4",
        "my_repeat_kv",
        "key/value heads repeated for grouped-query attention",
        "check_repeat_kv",
    ),
    Exercise(
        "13",
        "5",
        "my_kv_heads_for_budget",
        "choose the key/value heads for a KV-cache budget",
        "check_kv_heads_for_budget",
    ),
]

QUESTIONS = [Question("13", "6", "which runs separate the switches of the modern block")]


# --- exercise 3: the SwiGLU hidden width at the ReLU block's parameters ---------------------------


def _swiglu_width(d_model, d_ff, multiple_of, *, rounding="nearest", base=None, minimum=True):
    """The reference (its knobs write the known mistakes): the multiple of ``multiple_of`` (at
    least ``multiple_of``) whose bias-free SwiGLU block, ``3 d_model width`` parameters, is
    closest to the bias-free ReLU block's ``2 d_model d_ff``; on a tie the smaller. In whole
    numbers: the multiple closest to ``2 d_ff / 3``. ``rounding`` "up" is Meta's Llama rule, "down"
    floors, "even" is Python's ``round`` (ties to even); ``base`` replaces ``d_ff`` (``4 d_model``
    assumes the paper's ratio); ``minimum=False`` allows a width of 0."""
    d_ff = d_ff if base is None else base(d_model)
    below = (2 * d_ff) // (3 * multiple_of)  # multiples of multiple_of at or under 2 d_ff / 3
    gap_below = 2 * d_ff - 3 * multiple_of * below  # 3 x the distance to the multiple below
    gap_above = 3 * multiple_of * (below + 1) - 2 * d_ff
    if rounding == "up":
        k = below + (gap_below > 0)
    elif rounding == "down":
        k = below
    elif rounding == "even":
        k = round(2 * d_ff / (3 * multiple_of))
    else:  # nearest, ties to the smaller
        k = below + (gap_above < gap_below)
    return multiple_of * max(k, 1 if minimum else 0)


def _swiglu_width_truncated(d_model, d_ff, multiple_of):
    """Mistake: ``2 d_ff / 3`` truncated to an integer first (as ``int(2 * d_ff / 3)`` in Meta's
    Llama code), then the nearest multiple, ties to the smaller."""
    target = 2 * d_ff // 3
    below = target // multiple_of
    k = below + (multiple_of * (below + 1) - target < target - multiple_of * below)
    return multiple_of * max(k, 1)


_WIDTH_CASES = (  # (d_model, d_ff, multiple_of): what each case tells apart
    # d_ff = 2 d_model: 682.7 gives 768; 8/3 d_model (1365.3) would give 1280, Llama's rule 1536
    (512, 1024, 256),
    (512, 2048, 256),  # 2/3 d_ff = 1365.3: 1280 is closer than Llama's 1536
    (4096, 16384, 256),  # Llama-7B: 10922.7, and the multiple above (11008) is the closer one
    (512, 1536, 128),  # d_ff = 3 d_model: 1024 exactly
    (64, 256, 32),  # 170.7: 160
    (12, 9, 4),  # 6, halfway between 4 and 8: a tie goes to the smaller width
    (12, 10, 4),  # 6.67: 8; truncated to 6 first, a tie, and the smaller width 4
    (16, 8, 64),  # 5.3: the nearest multiple is 0, which cannot be built
)


def _width_cases() -> list[Case]:
    return [
        Case((d, d_ff, m), f"for d_model={d}, d_ff={d_ff}, multiple_of={m}")
        for d, d_ff, m in _WIDTH_CASES
    ]


SWIGLU_WIDTH = Entry(
    "check_swiglu_width",
    "your width",
    _swiglu_width,
    _width_cases,
    [
        # first: on the tie case Llama's round-up gives the same width, and fails earlier
        Mistake(
            "here 2 d_ff / 3 = 6 lies halfway between 4 and 8, and your width is the larger; the "
            "exercise asks for the smaller on a tie (fewer parameters). A tie goes up with "
            "Python's `round` (half to even: round(1.5) is 2), with `floor(x + 0.5)`, or with "
            "`<` where `<=` belongs. Compare the two candidates' distances yourself.",
            partial(_swiglu_width, rounding="even"),
        ),
        Mistake(
            "you truncated 2 d_ff / 3 to an integer before rounding (here 6.67 became 6, a tie "
            "between 4 and 8): the width closest to 6.67 is 8. Hint: compare the exact parameter "
            "counts in whole numbers, 3 x width against 2 x d_ff.",
            _swiglu_width_truncated,
        ),
        Mistake(
            "you rounded 2/3 d_ff up to the next multiple, as Meta's Llama code does "
            "(multiple_of * ceil(...)); the exercise asks for the parameter count closest to the "
            "ReLU block's, and the multiple below can be closer.",
            partial(_swiglu_width, rounding="up"),
        ),
        Mistake(
            "you rounded 2/3 d_ff down; the multiple above can be closer to the ReLU block's "
            "count.",
            partial(_swiglu_width, rounding="down"),
        ),
        Mistake(
            "you assumed d_ff = 4 d_model, the paper's ratio (8/3 d_model); equal parameters come "
            "from the ReLU block's own d_ff: 3 d_model width = 2 d_model d_ff, so width = 2/3 "
            "d_ff.",
            partial(_swiglu_width, base=lambda d: 4 * d),
        ),
        Mistake(
            "that is Meta's Llama rule, 8/3 d_model rounded up to a multiple: it assumes d_ff = 4 "
            "d_model and rounds up. Here equal parameters come from the ReLU block's own d_ff (3 "
            "d_model width = 2 d_model d_ff, so width = 2/3 d_ff), and the closer multiple wins.",
            partial(_swiglu_width, base=lambda d: 4 * d, rounding="up"),
        ),
        Mistake(
            "a width of 0 cannot be built: when the nearest multiple is 0, return multiple_of.",
            partial(_swiglu_width, minimum=False),
        ),
        Mistake(
            "the width must be a multiple of multiple_of: round 2/3 d_ff to the nearest multiple, "
            "not to the nearest integer.",
            lambda d, d_ff, m: _swiglu_width(d, d_ff, 1),
        ),
        Mistake(
            "you returned how many multiples, not the width: multiply by multiple_of.",
            lambda d, d_ff, m: _swiglu_width(d, d_ff, m) // m,
        ),
        Mistake(
            "you returned the SwiGLU block's parameter count; return its hidden width.",
            lambda d, d_ff, m: 3 * d * _swiglu_width(d, d_ff, m),
        ),
    ],
    "Hint: a bias-free ReLU block has 2 d_model d_ff parameters and a SwiGLU block 3 d_model "
    "width; d_model cancels. Of the multiples of multiple_of just below and just above 2 d_ff / 3, "
    "take the closer (the smaller on a tie), and never less than multiple_of.",
    "the multiple of multiple_of whose SwiGLU block comes closest to the ReLU block's parameters: "
    "sometimes Llama's round-up, sometimes the multiple below.",
    pick=one_number("width"),
    atol=0.0,
    rtol=0.0,
)


def check_swiglu_width(swiglu_width: Callable) -> CheckResult:
    """Check ``swiglu_width(d_model, d_ff, multiple_of) -> width``: the multiple of
    ``multiple_of`` (at least ``multiple_of``) whose bias-free SwiGLU block (``3 d_model width``
    parameters) is closest to the bias-free ReLU block's ``2 d_model d_ff``, the smaller on a tie.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(SWIGLU_WIDTH, swiglu_width)


ENTRIES += (SWIGLU_WIDTH,)
__all__ += ["check_swiglu_width"]
