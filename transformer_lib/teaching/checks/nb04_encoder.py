"""Notebook 04 · encoder: the checks of LayerNorm, the feed-forward network and the encoder layer.

Each builds the learner's class and compares it with the library's module holding the same weights
(:mod:`.references`), post-LN and pre-LN. ``LAYER_BUGS`` are the layer mistakes that the decoder
layer (notebook 05) meets as well.
"""

from functools import partial

import torch
import torch.nn.functional as F

from ..checks import inputs as draw
from ..checks import references, variants
from .engine import CheckResult, Entry, Mistake, judge, knob_mistakes
from .registry import Exercise, Question

__all__ = ["check_layer_norm", "check_feed_forward", "check_encoder_layer"]


LAYER_BUGS = [  # (hint, the knobs of variants.encoder_layer / variants.decoder_layer)
    (
        "post-LN and pre-LN are swapped. norm_first=False (the paper) normalises after the "
        "residual sum, `norm(x + sublayer(x))`; norm_first=True normalises the sublayer's input, "
        "`x + sublayer(norm(x))`.",
        {"swap": True},
    ),
    (
        "the residual connection around the attention is missing. Hint: add the sublayer's input "
        "back, `x + ...`.",
        {"skip": {"self"}},
    ),
    (
        "the residual connection around the cross-attention is missing. Hint: `x + "
        "cross_attn(...)`.",
        {"skip": {"cross"}},
    ),
    (
        "the residual connection around the feed-forward network is missing. Hint: `x + "
        "feed_forward(...)`.",
        {"skip": {"feed-forward"}},
    ),
    (
        "your attention returns the output alone (as notebook 02's module may), not `(output, "
        "weights)`, so `self.self_attn(...)[0]` took batch element 0 of the output, and the "
        "residual sum broadcast it over the whole batch. Hint: with such a module write "
        "`self.self_attn(y, y, y, mask)` without `[0]`; `[0]` is for modules that return "
        "`(output, weights)`, such as tl.MultiHeadAttention.",
        {"bare": True},
    ),
    (
        "the attention splits into d_k heads of h features each: the two numbers are swapped (with "
        "d_model=16, h=4 they are equal; the case with h=3, d_k=8 shows it). Hint: num_heads heads "
        "of d_k = d_model // num_heads features: `x.view(B, T, num_heads, d_model // num_heads)`.",
        {"heads_of_width_h": True},
    ),
]
_ENCODER_BUGS = [
    (
        "the self-attention ignored its mask. Hint: pass it on: `self.self_attn(x, x, x, mask)`.",
        {"use_mask": False},
    ),
    (
        "the feed-forward sublayer used norm1, the attention's LayerNorm: each sublayer has its "
        "own, with its own gain and shift. Hint: `norm2` around the feed-forward.",
        {"one_norm": True},
    ),
]


def _normalised(x, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, unbiased=False, keepdim=True) + eps
    )


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

LAYER_NORM = Entry(
    "check_layer_norm",
    "your LayerNorm",
    references.layer_norm,
    draw.layer_norms,
    [
        Mistake(
            "there is no eps: a constant token has variance 0, so you divided 0 by 0 (NaN), and "
            "a near-constant one by almost 0. Hint: `torch.sqrt(var + self.eps)` with eps = "
            "1e-5, inside the square root.",
            lambda ref, x: _normalised(x, 0.0) * ref.weight + ref.bias,
        ),
        Mistake(
            "eps was added outside the square root, `/ (std + eps)`; nn.LayerNorm adds it to the "
            "variance: `/ torch.sqrt(var + eps)` (a near-constant token shows the difference).",
            lambda ref, x: (
                (x - x.mean(-1, keepdim=True))
                / (x.var(-1, unbiased=False, keepdim=True).sqrt() + ref.eps)
                * ref.weight
                + ref.bias
            ),
        ),
        Mistake(
            "the shift was added before the gain multiplied: `(x_hat + bias) * weight`. Hint: "
            "`x_hat * self.weight + self.bias`.",
            lambda ref, x: (_normalised(x, ref.eps) + ref.bias) * ref.weight,
        ),
        Mistake(
            "the gain was applied twice. Hint: `x_hat * self.weight + self.bias`, once.",
            lambda ref, x: _normalised(x, ref.eps) * ref.weight * ref.weight + ref.bias,
        ),
        Mistake(
            "the gain multiplied x before normalising, where normalising undoes it. Hint: "
            "normalise first, then `* self.weight + self.bias`.",
            lambda ref, x: _normalised(x * ref.weight, ref.eps) + ref.bias,
        ),
        Mistake(
            "you used the unbiased variance (dividing by d_model - 1). Hint: `x.var(-1, "
            "unbiased=False, keepdim=True)`, as nn.LayerNorm does.",
            lambda ref, x: (
                (x - x.mean(-1, keepdim=True))
                / torch.sqrt(x.var(-1, keepdim=True) + ref.eps)
                * ref.weight
                + ref.bias
            ),
        ),
        Mistake(
            "the gain and shift are not applied. Hint: `... * self.weight + self.bias`.",
            lambda ref, x: F.layer_norm(x, x.shape[-1:], eps=ref.eps),
        ),
        Mistake(
            "you normalised over the tokens, not over each token's features. Hint: mean and "
            "variance over dim=-1 with keepdim=True.",
            lambda ref, x: (
                (x - x.mean(-2, keepdim=True))
                / torch.sqrt(x.var(-2, unbiased=False, keepdim=True) + ref.eps)
                * ref.weight
                + ref.bias
            ),
        ),
    ],
    "Hint: (x - mean) / sqrt(var + eps) * gain + shift, over the last axis.",
    "normalises each token over its features like nn.LayerNorm, constant tokens too (eps); gain "
    "and shift in their places; gradients match.",
    builds=True,
)


FEED_FORWARD = Entry(
    "check_feed_forward",
    "your feed-forward",
    references.feed_forward,
    partial(draw.floats, [(2, 5, 8), (7, 8)], ((8, 32), {})),
    [
        Mistake(
            "without the ReLU, two linear layers are just one linear layer. Hint: torch.relu "
            "between.",
            lambda ref, x: ref.linear2(ref.linear1(x)),
        )
    ],
    "Hint: linear2(relu(linear1(x))).",
    "two linear layers around a ReLU, the same at every position.",
    builds=True,
)


ENCODER_LAYER = Entry(
    "check_encoder_layer",
    "your encoder layer",
    references.encoder_layer,
    partial(draw.layers, decoder=False),
    knob_mistakes(variants.encoder_layer, LAYER_BUGS + _ENCODER_BUGS),
    "Hint: self-attention then feed-forward, each `norm(x + sublayer(x))` (or `x + "
    "sublayer(norm(x))` with norm_first=True).",
    "equals tl.EncoderLayer with the same weights, post-LN and pre-LN, h = d_k and h != "
    "d_k, with per-sequence padding; each sublayer has its own LayerNorm; gradients match.",
    builds=True,
)

ENTRIES = (LAYER_NORM, FEED_FORWARD, ENCODER_LAYER)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_layer_norm(module_class: type) -> CheckResult:
    """Check the class ``MyLayerNorm(d_model)``, with a learned gain ``weight`` and shift ``bias``
    (those names, shape ``(d_model,)``, starting at 1 and 0), against ``tl.LayerNorm`` (as
    nn.LayerNorm, eps = 1e-5): the biased variance over each token's features, constant and
    near-constant tokens too; gradients match. Returns a CheckResult: truthy when it passed; it
    prints as one friendly paragraph."""
    return judge(LAYER_NORM, module_class)


def check_feed_forward(module_class: type) -> CheckResult:
    """Check the class ``MyFeedForward(d_model, d_ff)``, with ``linear1`` and ``linear2``, against
    the library's position-wise feed-forward network holding the same weights. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(FEED_FORWARD, module_class)


def check_encoder_layer(module_class: type) -> CheckResult:
    """Check the class ``MyEncoderLayer(d_model, num_heads, d_ff, norm_first=False)`` with
    ``forward(x, mask=None)`` against ``tl.EncoderLayer`` holding the same weights (``self_attn``,
    ``feed_forward``, ``norm1``, ``norm2``, two distinct LayerNorms), post-LN and pre-LN, for ``(16,
    4, 32)`` and ``(24, 3, 40)`` (h != d_k), with per-sequence padding. ``self_attn`` may return
    ``(output, weights)`` or the output alone. Returns a CheckResult: truthy when it passed; it
    prints as one friendly paragraph."""
    return judge(ENCODER_LAYER, module_class)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise("04", "1", "MyLayerNorm", "LayerNorm from scratch", "check_layer_norm"),
    Exercise(
        "04", "2", "MyFeedForward", "the position-wise feed-forward network", "check_feed_forward"
    ),
    Exercise(
        "04", "3", "MyEncoderLayer", "an encoder layer, post-LN or pre-LN", "check_encoder_layer"
    ),
]

QUESTIONS = [Question("04", "4", "what attention alone, without feed-forwards, cannot compute")]
