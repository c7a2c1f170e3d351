"""Notebook 02 · multi-head attention: the checks of split_heads, combine_heads and the multi-head
module.

The module's check builds the learner's class and compares it with the library's
``MultiHeadAttention`` holding the same weights (``_attention_reference``); attention's own
mistakes (notebook 01's ``ATTENTION_BUGS``) are diagnosed inside the heads too.
"""

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from ...model.attention import MultiHeadAttention, combine_heads, split_heads
from ...model.masks import causal_mask
from . import inputs as draw
from . import variants
from .engine import (
    Case,
    CheckResult,
    Entry,
    Failure,
    Mistake,
    describe,
    judge,
    knob_mistakes,
    output_and_weights,
)
from .nb01_attention import ATTENTION_BUGS
from .references import PROJECTIONS, copy_weights
from .registry import Exercise, Question

__all__ = [
    "check_split_heads",
    "check_combine_heads",
    "check_split_fused_qkv",
    "check_multi_head_attention",
]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _attention_cases() -> list[Case]:
    """Self-attention (no mask, causal, per-sequence padding) and cross-attention, for
    ``MyMHA(16, 4)``, and a module with h != d_k, ``MyMHA(24, 3)`` (d_k = 8): splitting into d_k
    heads of h features shows there."""
    gen, build, wide = draw.generator(), ((16, 4), {}), ((24, 3), {})
    x, memory = draw.randn(gen, 3, 5, 16, grad=True), draw.randn(gen, 3, 7, 16, grad=True)
    x24, memory24 = draw.randn(gen, 3, 5, 24, grad=True), draw.randn(gen, 3, 7, 24)
    return [
        Case((x, x, x), "self-attention, x (3, 5, 16), no mask", build, {"x": x}),
        Case((x, x, x, causal_mask(5)), "causal self-attention", build),
        Case(
            (x, x, x, draw.padded([3, 5, 1], 5)),
            "self-attention with a padding mask that differs per sequence",
            build,
        ),
        Case(
            (x, memory, memory, draw.padded([4, 7, 2], 7)),
            "cross-attention to memory (3, 7, 16) with a per-sequence padding mask",
            build,
            {"x": x, "memory": memory},
        ),
        Case(
            (x24, x24, x24, causal_mask(5)),
            "MyMHA(24, 3): h=3 heads of d_k=8, causal self-attention",
            wide,
            {"x": x24},
        ),
        Case(
            (x24, memory24, memory24, draw.padded([4, 7, 2], 7)),
            "MyMHA(24, 3): cross-attention to memory (3, 7, 24) with a per-sequence padding mask",
            wide,
        ),
    ]


def _numbered_cases(shapes_and_args) -> list[Case]:
    """Inputs numbered 0, 1, 2, ... (a feature in the wrong place shows), the first with
    gradients."""
    cases = []
    for i, (shape, rest) in enumerate(shapes_and_args):
        x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape).requires_grad_(i == 0)
        cases.append(
            Case(
                (x, *rest),
                f"for x {shape}" + "".join(f", num_heads={r}" for r in rest),
                inputs={"x": x} if i == 0 else {},
            )
        )
    return cases


def _head_split_cases() -> list[Case]:
    """``split_heads``'s inputs: heads of width 4 (h = 2 and 3), then of widths 6 and 2 (h = 2 and
    5), so that a head width written as a number, not read from the input, shows."""
    return _numbered_cases(
        [((2, 3, 8), (2,)), ((1, 5, 12), (3,)), ((2, 4, 12), (2,)), ((1, 3, 10), (5,))]
    )


class _WithWeights(MultiHeadAttention):
    """The library's module, asked for its weights on every call: a learner's module that returns
    ``(output, weights)`` has its weights compared too."""

    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask, need_weights=True)


def _attention_reference(student: nn.Module, d_model: int, num_heads: int) -> MultiHeadAttention:
    """The library's module with the student's weights, after checking the parameter count (biases
    optional)."""
    linears = {n: getattr(student, n, None) for n in PROJECTIONS}
    per_head = [n for n, layer in linears.items() if isinstance(layer, nn.ModuleList)]
    if per_head:
        raise Failure(
            f"`{per_head[0]}` is a list of per-head layers (notebook 02's design A); this check "
            "needs design B, one `nn.Linear(d_model, d_model)` per projection, split into heads "
            "after the product (section 3 copies design A's weights into it with `torch.cat`)."
        )
    biased = {
        n for n, layer in linears.items() if isinstance(layer, nn.Linear) and layer.bias is not None
    }
    found = sum(p.numel() for p in student.parameters())
    # w_q, w_k, w_v, w_o; with biases
    counts = {False: 4 * d_model * d_model, True: 4 * d_model * (d_model + 1)}
    if found not in counts.values():
        unregistered = [n for n, layer in linears.items() if not isinstance(layer, nn.Linear)]
        expected = counts[bool(biased)]
        if 0 < len(biased) < 4 and not unregistered:
            raise Failure(
                f"only {sorted(biased)} have a bias: give all four projections a bias, or none "
                "(the paper's equations have none: `nn.Linear(d_model, d_model, bias=False)`)."
            )
        for name, layer in linears.items():
            if isinstance(layer, nn.Linear) and (layer.in_features, layer.out_features) != (
                d_model,
                d_model,
            ):
                raise Failure(
                    f"{name} maps {layer.in_features} -> {layer.out_features} features; "
                    f"with d_model={d_model} every projection is nn.Linear(d_model, "
                    "d_model) (h heads of d_k each)."
                )
        if found < counts[False] or unregistered:
            raise Failure(
                f"the module registers {found} parameters, the library {expected}, and "
                f"{unregistered} are not nn.Linear attributes: layers kept in local variables, "
                "plain lists or tuples are invisible to `.parameters()`, so the optimizer never "
                "trains them. Hint: assign each layer to `self.` (or use nn.ModuleList)."
            )
        known = {
            id(p)
            for layer in linears.values()
            if isinstance(layer, nn.Linear)
            for p in layer.parameters()
        }
        extra = [n for n, p in student.named_parameters() if id(p) not in known]
        raise Failure(
            f"the module registers {found} parameters, the library {expected}; the extra ones are "
            f"{extra}. Hint: multi-head attention needs only w_q, w_k, w_v, w_o."
        )
    reference = _WithWeights(d_model, num_heads, bias=bool(biased))
    return copy_weights(reference, student, {n: n for n in PROJECTIONS})


def _output_and_weights(result, case=None) -> dict:
    """``output`` or ``(output, weights)``; weights per head ``(B, h, T_q, T_k)`` are compared, and
    so are weights averaged over the heads ``(B, T_q, T_k)``, as nn.MultiheadAttention returns them
    by default."""
    parts = output_and_weights(result, case)
    weights = parts.get("weights")
    if isinstance(weights, torch.Tensor) and weights.dim() == 3:
        return {"output": parts["output"], "weights averaged over the heads": weights}
    if isinstance(weights, torch.Tensor) and weights.dim() == 4:
        parts["weights averaged over the heads"] = weights.mean(1)
    return parts


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

SPLIT_HEADS = Entry(
    "check_split_heads",
    "your split_heads",
    split_heads,
    _head_split_cases,
    [
        Mistake(
            "the heads axis must come before T: you returned (B, T, h, d). Hint: `.transpose(1, "
            "2)` after the view.",
            lambda x, h: x.view(x.size(0), x.size(1), h, -1),
        ),
        Mistake(
            "the shape is right but tokens are scrambled: reshaping straight to (B, h, T, d) "
            "cuts *across* tokens. Hint: `x.view(B, T, h, d).transpose(1, 2)`.",
            lambda x, h: x.reshape(x.size(0), h, x.size(1), -1),
        ),
    ],
    "Hint: head i must hold features i*d .. (i+1)*d - 1 of every token.",
    "splits (B, T, h*d) into (B, h, T, d) with every feature in its head.",
)


COMBINE_HEADS = Entry(
    "check_combine_heads",
    "your combine_heads",
    combine_heads,
    partial(_numbered_cases, [((2, 2, 3, 4), ()), ((1, 3, 5, 2), ())]),
    [
        Mistake(
            "the shape is right, but reshaping (B, h, T, d) straight to (B, T, h*d) glues "
            "*different tokens* into one vector: a silent bug, the model still runs. Hint: "
            "`x.transpose(1, 2).reshape(B, T, h * d)`: transpose back first.",
            lambda x: x.reshape(x.size(0), x.size(2), -1),
        )
    ],
    "Hint: combine must undo split_heads exactly.",
    "puts every head's features back next to each other, token by token.",
)


def _fused_qkv(qkv, num_heads, *, order=("head", "qkv", "feature"), transpose=True):
    """Split a fused projection's output ``(B, T, 3 * h * d_k)`` into ``(q, k, v)``, each
    ``(B, h, T, d_k)``. ``order``: how each token's features are laid out, slowest axis first;
    GPT-NeoX's ``query_key_value`` layer (the default): per head, that head's query, key and value,
    ``(h, 3, d_k)``. ``("qkv", "head", "feature")`` is section 4's layout, ``[Q | K | V]``;
    ``transpose=False`` forgets to move the heads before T, ``transpose="reshape"`` reshapes
    ``(B, T, h, d_k)`` straight to ``(B, h, T, d_k)`` (the mistakes' knobs)."""
    batch, length, width = qkv.shape
    sizes = {"head": num_heads, "qkv": 3, "feature": width // (3 * num_heads)}
    parts = qkv.reshape(batch, length, *(sizes[a] for a in order))  # (B, T, ...)
    axes = [2 + order.index(a) for a in ("qkv", "head", "feature")]
    parts = parts.permute(0, 1, *axes)  # (B, T, 3, h, d_k)
    if transpose == "reshape":  # the right shape, but tokens and heads cut across
        parts = parts.permute(2, 0, 1, 3, 4).reshape(3, batch, num_heads, length, -1)
        return tuple(parts.unbind(0))  # 3 x (B, h, T, d_k), scrambled
    parts = parts.permute(2, 0, 3, 1, 4) if transpose else parts.permute(2, 0, 1, 3, 4)
    return tuple(parts.unbind(0))  # 3 x (B, h, T, d_k), or (B, T, h, d_k) without the transpose


def _three_tensors(result, case=None) -> dict:
    """``(q, k, v)`` as a tuple or list, or one tensor with a leading axis of 3."""
    if isinstance(result, torch.Tensor) and result.dim() == 5 and result.size(0) == 3:
        result = tuple(result.unbind(0))
    if not (isinstance(result, tuple | list) and len(result) == 3):
        raise Failure(
            f"expected the three tensors `(q, k, v)`, each (B, h, T, d_k), got {describe(result)}."
        )
    return dict(zip(("q", "k", "v"), result, strict=True))


def _fused_qkv_cases() -> list[Case]:
    """Features numbered 0, 1, 2, ... (one in the wrong place shows), h = 2, 3 and 4 with d_k
    different from h, T different from h (a missing transpose changes the shape)."""
    cases = []
    for i, (batch, length, heads, d_k) in enumerate([(2, 3, 2, 4), (1, 5, 3, 2), (2, 6, 4, 3)]):
        x = torch.arange(batch * length * 3 * heads * d_k, dtype=torch.float32)
        x = x.view(batch, length, 3 * heads * d_k).requires_grad_(i == 0)  # (B, T, 3 * h * d_k)
        about = f"for qkv {tuple(x.shape)}, num_heads={heads} (d_k={d_k})"
        cases.append(Case((x, heads), about, inputs={"qkv": x} if i == 0 else {}))
    return cases


SPLIT_FUSED_QKV = Entry(
    "check_split_fused_qkv",
    "your split",
    _fused_qkv,
    _fused_qkv_cases,
    [
        Mistake(
            "this is section 4's layout, every query, then every key, then every value ([Q | K | "
            "V], `chunk(3, dim=-1)`); this fused layer puts each head's query, key and value side "
            "by side: head 0's [q | k | v], then head 1's. Hint: cut each token's features into h "
            "blocks of 3 * d_k first, then each block into q, k, v.",
            partial(_fused_qkv, order=("qkv", "head", "feature")),
        ),
        Mistake(
            "you took q, k and v feature by feature (q, k, v, q, k, v, ...) inside each head; each "
            "head's block is d_k query features, then d_k key features, then d_k value features. "
            "Hint: view a head's block as (3, d_k), not (d_k, 3).",
            partial(_fused_qkv, order=("head", "feature", "qkv")),
        ),
        Mistake(
            "the values are right but the heads axis must come before T: you returned (B, T, h, "
            "d_k). Hint: move the heads axis to position 1, `.transpose(1, 2)` or `.permute`.",
            partial(_fused_qkv, transpose=False),
        ),
        Mistake(
            "the shape is right but the tokens are scrambled: reshaping (B, T, h, d_k) straight "
            "to (B, h, T, d_k) cuts across tokens (it does not move the heads axis, it refills the "
            "same memory order). Hint: use `.transpose(1, 2)` or `.permute`, not `.reshape`.",
            partial(_fused_qkv, transpose="reshape"),
        ),
        Mistake(
            "q and k are swapped: in each head's block the query comes first, then the key, then "
            "the value.",
            lambda x, h: (lambda q, k, v: (k, q, v))(*_fused_qkv(x, h)),
        ),
    ],
    "Hint: per token, features i * 3 * d_k ... (i + 1) * 3 * d_k - 1 belong to head i: its query "
    "(d_k features), then its key, then its value.",
    "takes each head's query, key and value from that head's own block of 3 * d_k features, the "
    "GPT-NeoX layout.",
    pick=_three_tensors,
)


MULTI_HEAD_ATTENTION = Entry(
    "check_multi_head_attention",
    "your module",
    _attention_reference,
    _attention_cases,
    [
        Mistake(
            "scores were divided by sqrt(d_model); each head works in d_k = d_model / h "
            "dimensions. Hint: divide by sqrt(d_k), the width of one head's queries.",
            partial(
                variants.multi_head_attention, scale=lambda q, v: math.sqrt(q.size(1) * q.size(-1))
            ),
        ),
        Mistake(
            "heads were merged with a reshape that did not transpose back, mixing tokens. Hint: "
            "`out.transpose(1, 2).reshape(B, T, d_model)`.",
            partial(
                variants.multi_head_attention, merge=lambda x: x.reshape(x.size(0), x.size(2), -1)
            ),
        ),
        Mistake(
            "the output projection w_o was not applied: after combining the heads, "
            "`self.w_o(...)` mixes what the heads found.",
            partial(variants.multi_head_attention, output_projection=False),
        ),
        Mistake(
            "the keys were projected with w_q: queries, keys and values each have their own "
            "projection. Hint: `self.w_k(key)`.",
            partial(variants.multi_head_attention, key_projection="w_q"),
        ),
        Mistake(
            "the values were projected with w_k: queries, keys and values each have their own "
            "projection. Hint: `self.w_v(value)`.",
            partial(variants.multi_head_attention, value_projection="w_k"),
        ),
        Mistake(
            "you split into d_k heads of h features each: the two numbers are swapped (with "
            "d_model=16, h=4 they are equal, so only a case with h != d_k shows it). Hint: "
            "`x.view(B, T, num_heads, d_model // num_heads).transpose(1, 2)`: num_heads heads of "
            "d_k = d_model // num_heads features.",
            partial(variants.multi_head_attention, heads_of_width_h=True),
        ),
        *knob_mistakes(variants.multi_head_attention, ATTENTION_BUGS),
    ],
    "Hint: test split, attention and combine alone, each against its check.",
    # the success message is printed in notebook 08's committed outputs: changing it changes them
    "equals the library's MultiHeadAttention (with the same weights) for self-, causal, padded and "
    "cross-attention; gradients match and reach every parameter.",
    builds=True,
    pick=_output_and_weights,
)

ENTRIES = (SPLIT_HEADS, COMBINE_HEADS, SPLIT_FUSED_QKV, MULTI_HEAD_ATTENTION)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_split_heads(split: Callable) -> CheckResult:
    """Check ``split(x (B, T, h * d), num_heads) -> (B, h, T, d)``: the shape, and every feature in
    its head. Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(SPLIT_HEADS, split)


def check_combine_heads(combine: Callable) -> CheckResult:
    """Check ``combine(x (B, h, T, d)) -> (B, T, h * d)``, the exact inverse of ``split_heads``.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(COMBINE_HEADS, combine)


def check_split_fused_qkv(split: Callable) -> CheckResult:
    """Check ``split(qkv (B, T, 3 * h * d_k), num_heads) -> (q, k, v)``, each ``(B, h, T, d_k)``,
    for a fused projection laid out as GPT-NeoX's ``query_key_value``: per token, h blocks of 3 *
    d_k features, head i's query, key and value. ``(q, k, v)`` may be a tuple, a list or one tensor
    ``(3, B, h, T, d_k)``. Returns a CheckResult: truthy when it passed; it prints as one friendly
    paragraph."""
    return judge(SPLIT_FUSED_QKV, split)


def check_multi_head_attention(module_class: type) -> CheckResult:
    """Check the class ``MyMHA(d_model, num_heads)``, with projections ``w_q, w_k, w_v, w_o``
    (biases optional) and ``forward(query, key, value, mask=None)`` returning the output or
    ``(output, weights)``, against the library's module holding the same weights: self-, causal,
    padded and cross-attention, for ``(16, 4)`` and ``(24, 3)`` (h != d_k); returned weights (per
    head, or averaged over the heads) are compared too; gradients reach every parameter. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(MULTI_HEAD_ATTENTION, module_class)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise("02", "1", "my_split_heads", "(B, T, h*d) -> (B, h, T, d)", "check_split_heads"),
    Exercise(
        "02",
        "2",
        "my_split_fused_qkv",
        "q, k, v from a fused projection laid out per head (GPT-NeoX)",
        "check_split_fused_qkv",
    ),
    Exercise(
        "02",
        "3",
        "MyMultiHeadAttention",
        "the multi-head module, w_q, w_k, w_v, w_o (bias optional)",
        "check_multi_head_attention",
    ),
]

QUESTIONS = [Question("02", "4", "why multi-head attention ends with W_O")]
