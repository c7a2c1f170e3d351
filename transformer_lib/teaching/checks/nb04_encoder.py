"""Notebook 04 · encoder: the checks of LayerNorm, the feed-forward network and the encoder layer.

Each builds the learner's class and compares it with the library's module holding the same weights
(:mod:`.references`), post-LN and pre-LN. ``LAYER_BUGS`` are the layer mistakes that the decoder
layer (notebook 05) meets as well.
"""

import copy
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from ...model.encoder import Encoder, EncoderLayer
from ...model.layers import LayerNorm, PositionwiseFeedForward
from . import inputs as draw
from . import references, variants
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, judge, knob_mistakes
from .references import copy_weights
from .registry import Exercise, Question

__all__ = [
    "check_layer_norm",
    "check_feed_forward",
    "check_conv_feed_forward",
    "check_encoder_layer",
    "check_encoder",
]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _layer_norm_cases() -> list[Case]:
    """``MyLayerNorm(8)`` on random tokens (the first with gradients), then on a constant token
    (variance 0) and near-constant ones (variance 1e-6 and 1e-4), where eps decides the output."""
    cases = draw.floats([(3, 4, 8), (5, 8)], ((8,), {}))
    gen = draw.generator()
    # token 0 constant; tokens 1 and 2 almost, near 0 so that float32 rounding stays far below the
    # tolerance in every correct way of writing the variance (E[x^2] - E[x]^2 too)
    flat = torch.tensor([2.0, 0.0, 0.0])[:, None].repeat(1, 8)  # (3, d_model)
    flat[1] += 1e-3 * torch.randn(8, generator=gen)
    flat[2] += 1e-2 * torch.randn(8, generator=gen)
    return [
        *cases,
        Case(
            (flat,),
            "for a constant token and two near-constant ones (variance 0, ~1e-6, ~1e-4), "
            "where eps matters",
            ((8,), {}),
        ),
    ]


def _layer_norm_reference(student: nn.Module, d_model: int) -> LayerNorm:
    """``tl.LayerNorm(d_model)`` (eps 1e-5) with the student's gain ``weight`` and shift ``bias``,
    both set first to values other than 1 and 0, so that a gain or shift forgotten, applied twice or
    in the wrong order shows. They carry nn.LayerNorm's names, which the encoder and decoder layers'
    checks read too: other names fail here, so that the learner hears it at once."""
    found = sum(p.numel() for p in student.parameters())
    if found != 2 * d_model:
        raise Failure(
            f"LayerNorm({d_model}) should learn {2 * d_model} numbers (a gain and a shift per "
            f"feature); it registers {found}. Hint: `nn.Parameter(torch.ones(d_model))` and "
            "`torch.zeros`."
        )
    named = dict(student.named_parameters())
    if not {"weight", "bias"} <= set(named) or any(
        named[n].shape != (d_model,) for n in ("weight", "bias")
    ):
        shapes = ", ".join(f"`{name}` {tuple(p.shape)}" for name, p in named.items())
        raise Failure(
            "this check reads the gain and the shift by nn.LayerNorm's names, `weight` and "
            f"`bias`, each of shape ({d_model},) (the encoder layer's check reads them too); "
            f"found {shapes}. Hint: `self.weight = nn.Parameter(torch.ones(d_model))`, "
            "`self.bias = nn.Parameter(torch.zeros(d_model))`."
        )
    if not (torch.all(named["weight"] == 1) and torch.all(named["bias"] == 0)):
        raise Failure(
            "a fresh LayerNorm should only normalise: its gain `weight` starts at 1 and "
            "its shift `bias` at 0, as in nn.LayerNorm. Hint: `torch.ones(d_model)` and "
            "`torch.zeros(d_model)`."
        )
    with torch.no_grad():
        named["weight"].copy_(torch.linspace(0.5, 2.0, d_model))
        named["bias"].copy_(torch.linspace(-1.0, 1.0, d_model))
    return copy_weights(LayerNorm(d_model), student, {"": ""})


def _feed_forward_reference(student: nn.Module, d_model: int, d_ff: int) -> PositionwiseFeedForward:
    return copy_weights(
        PositionwiseFeedForward(d_model, d_ff),
        student,
        {"linear1": "linear1", "linear2": "linear2"},
    )


def _encoder_layer_variant(
    ref: EncoderLayer,
    x,
    mask=None,
    *,
    swap=False,
    skip=(),
    use_mask=True,
    one_norm=False,
    **attention,
) -> torch.Tensor:
    """``skip``: the sublayers ("self", "feed-forward") whose residual ``x +`` is forgotten;
    ``one_norm``: the attention's LayerNorm used in both sublayers; ``attention``: the knobs of
    :func:`variants.attend`."""
    pre = ref.residual_attn.norm_first != swap
    x = variants.sublayer(
        x,
        lambda y: variants.attend(ref.self_attn, y, y, y, mask if use_mask else None, **attention),
        ref.residual_attn.norm,
        pre,
        "self" not in skip,
    )
    norm = ref.residual_attn.norm if one_norm else ref.residual_ff.norm
    return variants.sublayer(x, ref.feed_forward, norm, pre, "feed-forward" not in skip)


# fmt: off
LAYER_BUGS = [  # (hint, knobs of _encoder_layer_variant here and nb05's _decoder_layer_variant)
    ("post-LN and pre-LN are swapped. norm_first=False (the paper) normalises after the "
     "residual sum, `norm(x + sublayer(x))`; norm_first=True normalises the sublayer's input, "
     "`x + sublayer(norm(x))`.",
     {"swap": True}),
    ("the residual connection around the attention is missing. Hint: add the sublayer's input "
     "back, `x + ...`.",
     {"skip": {"self"}}),
    ("the residual connection around the cross-attention is missing. Hint: `x + "
     "cross_attn(...)`.",
     {"skip": {"cross"}}),
    ("the residual connection around the feed-forward network is missing. Hint: `x + "
     "feed_forward(...)`.",
     {"skip": {"feed-forward"}}),
    ("your attention returns the output alone (as notebook 02's module may), not `(output, "
     "weights)`, so `self.self_attn(...)[0]` took batch element 0 of the output, and the "
     "residual sum broadcast it over the whole batch. Hint: with such a module write "
     "`self.self_attn(y, y, y, mask)` without `[0]`; `[0]` is for modules that return "
     "`(output, weights)`, such as tl.MultiHeadAttention.",
     {"bare": True}),
    ("the attention splits into d_k heads of h features each: the two numbers are swapped (with "
     "d_model=16, h=4 they are equal; the case with h=3, d_k=8 shows it). Hint: num_heads heads "
     "of d_k = d_model // num_heads features: `x.view(B, T, num_heads, d_model // num_heads)`.",
     {"heads_of_width_h": True}),
]
# fmt: on
# fmt: off
_ENCODER_BUGS = [
    ("the self-attention ignored its mask. Hint: pass it on: `self.self_attn(x, x, x, mask)`.",
     {"use_mask": False}),
    ("the feed-forward sublayer used norm1, the attention's LayerNorm: each sublayer has its "
     "own, with its own gain and shift. Hint: `norm2` around the feed-forward.",
     {"one_norm": True}),
]
# fmt: on


def _normalised(x, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, unbiased=False, keepdim=True) + eps
    )


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

LAYER_NORM = Entry(
    "check_layer_norm",
    "your LayerNorm",
    _layer_norm_reference,
    _layer_norm_cases,
    [
        Mistake(
            "there is no eps: a constant token has variance 0, so you divided 0 by 0 (NaN), and "
            "a near-constant one by almost 0. Hint: `torch.sqrt(var + self.eps)` with eps = "
            "1e-5, inside the square root.",
            lambda ref, x: _normalised(x, 0.0) * ref.weight + ref.bias,
        ),
        Mistake(
            "you used eps = 1e-6 (the Annotated Transformer's value); nn.LayerNorm and this "
            "course use 1e-5, and a near-constant token shows the difference. Hint: `self.eps = "
            "1e-5`, inside the square root.",
            lambda ref, x: _normalised(x, 1e-6) * ref.weight + ref.bias,
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
    _feed_forward_reference,
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
    partial(references.layer, EncoderLayer, ("self_attn",)),
    partial(draw.layers, decoder=False),
    knob_mistakes(_encoder_layer_variant, LAYER_BUGS + _ENCODER_BUGS),
    "Hint: self-attention then feed-forward, each `norm(x + sublayer(x))` (or `x + "
    "sublayer(norm(x))` with norm_first=True).",
    "equals tl.EncoderLayer with the same weights, post-LN and pre-LN, h = d_k and h != "
    "d_k, with per-sequence padding; each sublayer has its own LayerNorm; gradients match.",
    builds=True,
)


def _conv_feed_forward(student: nn.Module, d_model: int, d_ff: int) -> PositionwiseFeedForward:
    """The library's feed-forward network holding the weights of the student's ``conv1`` and
    ``conv2`` (nn.Conv1d, kernel size 1), after checking their structure; a missing bias counts as
    zeros."""
    reference = PositionwiseFeedForward(d_model, d_ff)
    for name, linear in (("conv1", reference.linear1), ("conv2", reference.linear2)):
        conv, want = getattr(student, name, None), (linear.out_features, linear.in_features)
        if not isinstance(conv, nn.Conv1d):
            raise Failure(
                f"this check reads `{name}`, an nn.Conv1d({want[1]}, {want[0]}, ...); found "
                f"{describe(conv)}."
            )
        if (conv.out_channels, conv.in_channels) != want:
            raise Failure(
                f"`{name}` maps {conv.in_channels} -> {conv.out_channels} channels; the "
                f"feed-forward's {name} maps {want[1]} -> {want[0]} (d_model -> d_ff -> d_model)."
            )
        if conv.kernel_size != (1,):
            raise Failure(
                f"`{name}` has kernel_size={conv.kernel_size[0]}: each output position would mix "
                "its neighbours, so the network is no longer position-wise. Hint: "
                "`kernel_size=1`, one position at a time (the paper: 'two convolutions with "
                "kernel size 1')."
            )
        if conv.padding not in ((0,), "valid", "same") or conv.groups != 1:
            raise Failure(
                f"`{name}` has padding={conv.padding} and groups={conv.groups}: a kernel of size "
                "1 needs no padding (it would add positions), and groups would cut the channels "
                "apart. Hint: `nn.Conv1d(in_channels, out_channels, kernel_size=1)`."
            )
        with torch.no_grad():
            linear.weight.copy_(conv.weight[..., 0])  # (out, in, 1) -> (out, in)
            bias = conv.bias if conv.bias is not None else torch.zeros(want[0])
            linear.bias.copy_(bias)
    return reference


CONV_FEED_FORWARD = Entry(
    "check_conv_feed_forward",
    "your feed-forward",
    _conv_feed_forward,
    partial(draw.floats, [(2, 5, 8), (3, 11, 8)], ((8, 32), {})),
    [
        Mistake(
            "the output is (B, d_model, T), the layout nn.Conv1d works in. Hint: Conv1d reads and "
            "writes (B, channels, T): transpose the input to it and the output back, "
            "`.transpose(1, 2)`.",
            lambda ref, x: ref(x).transpose(1, 2),
        ),
        Mistake(
            "without the ReLU, two linear maps (kernel-size-1 convolutions are linear maps) are "
            "just one. Hint: `torch.relu` between conv1 and conv2.",
            lambda ref, x: ref.linear2(ref.linear1(x)),
        ),
        Mistake(
            "a ReLU was applied to the output too: the network ends with the second linear map, "
            "`conv2(relu(conv1(x)))`, so its outputs can be negative.",
            lambda ref, x: torch.relu(ref(x)),
        ),
    ],
    "Hint: conv2(relu(conv1(x))), with x in nn.Conv1d's layout (B, d_model, T) and the result "
    "back in (B, T, d_model).",
    "two kernel-size-1 convolutions around a ReLU compute the position-wise feed-forward network "
    "(the same weights as two nn.Linear); gradients match.",
    builds=True,
)


def _norm_first(layer: nn.Module) -> bool | None:
    """The placement a layer was built with: ``tl.EncoderLayer``'s, or a ``norm_first`` attribute
    of the student's own layer (None: it does not say)."""
    if isinstance(layer, EncoderLayer):
        return layer.residual_attn.norm_first
    flag = getattr(layer, "norm_first", None)
    return flag if isinstance(flag, bool) else None


class _OwnLayer(nn.Module):
    """A copy of the student's own encoder layer (exercise 2's ``MyEncoderLayer``, say) that
    ``tl.Encoder`` can call as it calls its layers, ``layer(x, mask, cache)``: the stack's check
    grades the stack, whatever layer it stacks."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = copy.deepcopy(layer)

    def forward(self, x, mask=None, cache=None):
        return self.layer(x, mask)  # (B, T, d_model)


def _stacked_layers(student: nn.Module, num_layers: int, norm_first: bool) -> nn.ModuleList:
    """The stack's ``self.layers``, after checking it: an nn.ModuleList of N distinct layers with
    weights, built with the stack's ``norm_first``."""
    layers = getattr(student, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise Failure(
            f"this check reads the layers from `self.layers`, an nn.ModuleList; found "
            f"{describe(layers)}. A plain Python list hides its layers from `.parameters()`, "
            "so the optimizer would never train them. Hint: `self.layers = nn.ModuleList(...)`."
        )
    if len(layers) != num_layers:
        raise Failure(
            f"expected {num_layers} layers in `self.layers`, found {len(layers)}. Hint: "
            "`nn.ModuleList(tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, "
            "norm_first=norm_first) for _ in range(num_layers))`."
        )
    weightless = [
        i
        for i, la in enumerate(layers)
        if not isinstance(la, EncoderLayer) and not any(True for _ in la.parameters())
    ]
    if weightless:
        raise Failure(
            f"layers {weightless} of `self.layers` have no weights "
            f"({describe(layers[weightless[0]])}): an encoder layer learns its attention, "
            "feed-forward and LayerNorms. Hint: stack `tl.EncoderLayer(d_model, num_heads, d_ff, "
            "dropout=0.0, norm_first=norm_first)` (or your own encoder layer of exercise 2)."
        )
    seen: dict[int, int] = {}
    for i, layer in enumerate(layers):
        for tensor in (layer, *layer.parameters()):
            if seen.get(id(tensor), i) != i:
                raise Failure(
                    f"layers {seen[id(tensor)]} and {i} are one layer object (or share weights): "
                    "`[layer] * N` repeats one object N times, so the stack has one layer's "
                    "weights, applied N times, and training updates that one set. Hint: build a "
                    "new layer in each step, `nn.ModuleList(tl.EncoderLayer(...) for _ in "
                    "range(num_layers))`."
                )
            seen[id(tensor)] = i
    wrong = [i for i, la in enumerate(layers) if _norm_first(la) not in (None, norm_first)]
    if wrong:
        raise Failure(
            f"the stack was built with norm_first={norm_first}, but layers {wrong} were built "
            f"with norm_first={not norm_first}. Hint: pass it on, `tl.EncoderLayer(d_model, "
            "num_heads, d_ff, dropout=0.0, norm_first=norm_first)`."
        )
    return layers


def _encoder(student: nn.Module, num_layers, d_model, num_heads, d_ff, norm_first=False):
    """``tl.Encoder`` holding the student's weights, after checking the stack's structure: N
    distinct layers in ``self.layers`` (an nn.ModuleList), built with the stack's ``norm_first``,
    and a LayerNorm ``final_norm`` in pre-LN only. A ``tl.EncoderLayer`` lends its weights to the
    library's layer; any other layer (the student's own) is copied into the stack as it is."""
    layers = _stacked_layers(student, num_layers, norm_first)
    final = getattr(student, "final_norm", None)
    has_final = isinstance(final, nn.Module) and any(True for _ in final.parameters())
    if norm_first and not has_final:
        raise Failure(
            "a pre-LN stack needs a final LayerNorm, `self.final_norm = nn.LayerNorm(d_model)` "
            "(this check reads it by that name), applied once after the last layer: in pre-LN "
            "each sublayer only adds to the residual stream, which no layer normalises (section "
            "3)."
        )
    if not norm_first and has_final:
        raise Failure(
            "this post-LN stack has a final LayerNorm with weights: every post-LN layer already "
            "ends with a LayerNorm, so tl.Encoder, like the paper, has none. Hint: build it only "
            "when norm_first is True (`nn.Identity()` otherwise)."
        )
    reference = Encoder(num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
    with torch.no_grad():
        for i, (mine, theirs) in enumerate(zip(reference.layers, layers, strict=True)):
            if isinstance(theirs, EncoderLayer):
                mine.load_state_dict(theirs.state_dict())
            else:  # a layer of the student's own: the stack is graded, the layer used as it is
                reference.layers[i] = _OwnLayer(theirs)
    if norm_first:
        references.copy_weight(reference.final_norm, student, "final_norm")
    return reference


def _encoder_cases() -> list[Case]:
    """Post-LN and pre-LN stacks of 2 layers (16, 4, 32) and 3 layers (24, 3, 40), padding that
    differs per sequence."""
    gen, cases = torch.Generator().manual_seed(0), []
    lengths = torch.tensor([5, 3, 1])
    padding = (torch.arange(5) < lengths[:, None]).view(3, 1, 1, 5)  # (B, 1, 1, T)
    for norm_first in (False, True):
        x = torch.randn(3, 5, 16, generator=gen).requires_grad_()  # (B, T, d_model)
        x24 = torch.randn(3, 5, 24, generator=gen)  # (B, T, d_model)
        name = f"norm_first={norm_first}"
        cases += [
            Case(
                (x,),
                f"2 layers, {name}, x (3, 5, 16), no mask",
                ((2, 16, 4, 32), {"norm_first": norm_first}),
                {"x": x},
            ),
            Case(
                (x, padding),
                f"2 layers, {name}, per-sequence padding",
                ((2, 16, 4, 32), {"norm_first": norm_first}),
            ),
            Case(
                (x24, padding),
                f"3 layers of (24, 3, 40), {name}, per-sequence padding",
                ((3, 24, 3, 40), {"norm_first": norm_first}),
            ),
        ]
    return cases


def _stack(ref: Encoder, x, mask=None, *, use_mask=True, chain=True, final="after"):
    """The stack with a knob per typical mistake: ``use_mask=False`` forgets the mask;
    ``chain=False`` gives every layer the stack's input; ``final``: the final norm "after" the last
    layer, "never", or after "every" layer."""
    out = x
    for layer in ref.layers:
        out = layer(out if chain else x, mask if use_mask else None)  # (B, T, d_model)
        out = ref.final_norm(out) if final == "every" else out
    return ref.final_norm(out) if final == "after" else out


ENCODER = Entry(
    "check_encoder",
    "your encoder",
    _encoder,
    _encoder_cases,
    [
        Mistake(
            "the layers did not get the padding mask, so real tokens attend to <pad>. Hint: pass "
            "it to every layer, `x = layer(x, mask)`.",
            partial(_stack, use_mask=False),
        ),
        Mistake(
            "every layer read the stack's input, not the previous layer's output, so only the "
            "last layer counts. Hint: `x = layer(x, mask)` inside the loop.",
            partial(_stack, chain=False),
        ),
        Mistake(
            "the final LayerNorm was never applied. Hint: `return self.final_norm(x)` after the "
            "loop.",
            partial(_stack, final="never"),
        ),
        Mistake(
            "the final LayerNorm was applied after every layer: it belongs once, after the last "
            "one (each pre-LN layer normalises its own sublayers' inputs). Hint: move "
            "`self.final_norm` out of the loop.",
            partial(_stack, final="every"),
        ),
    ],
    "Hint: `for layer in self.layers: x = layer(x, mask)`, then the final LayerNorm in pre-LN "
    "only.",
    "equals tl.Encoder with the same weights: N distinct layers in a chain, the mask reaching "
    "each, a final LayerNorm in pre-LN only; gradients match.",
    builds=True,
)

ENTRIES = (LAYER_NORM, FEED_FORWARD, CONV_FEED_FORWARD, ENCODER_LAYER, ENCODER)


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


def check_conv_feed_forward(module_class: type) -> CheckResult:
    """Check the class ``MyConvFeedForward(d_model, d_ff)``, the feed-forward network written as
    two ``nn.Conv1d`` attributes ``conv1 (d_model -> d_ff)`` and ``conv2 (d_ff -> d_model)`` with
    ``forward(x (B, T, d_model)) -> (B, T, d_model)``, against the library's
    ``PositionwiseFeedForward`` holding the same weights. Returns a CheckResult: truthy when it
    passed; it prints as one friendly paragraph."""
    return judge(CONV_FEED_FORWARD, module_class)


def check_encoder(module_class: type) -> CheckResult:
    """Check the class ``MyEncoder(num_layers, d_model, num_heads, d_ff, norm_first=False)``: its
    ``layers``, an nn.ModuleList of ``num_layers`` distinct ``tl.EncoderLayer``, and in pre-LN a
    LayerNorm ``final_norm``; ``forward(x, mask=None)`` against ``tl.Encoder`` holding the same
    weights, post-LN and pre-LN, with per-sequence padding. Returns a CheckResult: truthy when it
    passed; it prints as one friendly paragraph."""
    return judge(ENCODER, module_class)


def check_encoder_layer(module_class: type) -> CheckResult:
    """Check the class ``MyEncoderLayer(d_model, num_heads, d_ff, norm_first=False)`` with
    ``forward(x, mask=None)`` against ``tl.EncoderLayer`` holding the same weights (``self_attn``,
    ``feed_forward``, ``norm1``, ``norm2``, two distinct LayerNorms), post-LN and pre-LN, for
    ``(16, 4, 32)`` and ``(24, 3, 40)`` (h != d_k), with per-sequence padding. ``self_attn`` may
    return ``(output, weights)`` or the output alone. Returns a CheckResult: truthy when it passed;
    it prints as one friendly paragraph."""
    return judge(ENCODER_LAYER, module_class)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "04",
        "1",
        "MyConvFeedForward",
        "the feed-forward network as two convolutions: kernel size, axes",
        "check_conv_feed_forward",
    ),
    Exercise(
        "04", "2", "MyEncoderLayer", "an encoder layer, post-LN or pre-LN", "check_encoder_layer"
    ),
    Exercise(
        "04",
        "3",
        "MyEncoder",
        "the stack: distinct layers, the mask, a final norm in pre-LN only",
        "check_encoder",
    ),
]

QUESTIONS = [Question("04", "4", "what attention alone, without feed-forwards, cannot compute")]
