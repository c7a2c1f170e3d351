"""The checks of notebook 04: LayerNorm, the feed-forward networks, the encoder layer and the
encoder stack.
"""

import copy

import pytest
import torch
import torch.nn.functional as F
from checks_students import solution
from torch import nn

import transformer_lib as tl
from solutions.nb04_encoder import MyEncoderLayer


class LayerNormUnbiased(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.weight, self.bias = (
            nn.Parameter(torch.ones(d_model)),
            nn.Parameter(torch.zeros(d_model)),
        )

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
            x.var(-1, keepdim=True) + 1e-5
        ) * self.weight + self.bias


class FeedForwardNoRelu(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x))


def test_layer_norm_and_feed_forward_mistakes_are_named():
    assert "unbiased variance" in tl.checks.check_layer_norm(LayerNormUnbiased).message
    assert "without the ReLU" in tl.checks.check_feed_forward(FeedForwardNoRelu).message


class GainShiftNorm(nn.Module):
    """A correct LayerNorm whose parameters are named ``gain`` and ``shift``, not nn.LayerNorm's
    names."""

    def __init__(self, d_model):
        super().__init__()
        self.gain, self.shift = (
            nn.Parameter(torch.ones(d_model)),
            nn.Parameter(torch.zeros(d_model)),
        )

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:]) * self.gain + self.shift


class EncoderLayerWithGainShiftNorms(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.self_attn, self.feed_forward = self.layer.self_attn, self.layer.feed_forward
        self.norm1, self.norm2 = GainShiftNorm(d_model), GainShiftNorm(d_model)

    def forward(self, x, mask=None):
        return self.layer(x, mask)


def test_layer_checks_name_layer_norm_parameters_they_cannot_read():
    """Issue #29, 3: the exercise names the gain and shift `weight` and `bias`; the LayerNorm check
    says so at once (it used to compare other names with a fresh LayerNorm, where a misplaced gain
    or shift passed)."""
    result = tl.checks.check_layer_norm(GainShiftNorm)
    assert (
        not result and "`weight` and `bias`" in result.message and "`gain` (8,)" in result.message
    ), result.message
    result = tl.checks.check_encoder_layer(EncoderLayerWithGainShiftNorms)
    assert not result and "`weight` and `bias`" in result.message


class ZeroGainNorm(nn.Module):
    """A LayerNorm whose gain starts at 0 (and shift at 1): every output is the shift, whatever the
    input."""

    def __init__(self, d_model):
        super().__init__()
        self.weight, self.bias = (
            nn.Parameter(torch.zeros(d_model)),
            nn.Parameter(torch.ones(d_model)),
        )

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


# it used to pass: the check set them itself
def test_layer_norm_check_names_a_gain_that_does_not_start_at_one():
    result = tl.checks.check_layer_norm(ZeroGainNorm)
    assert not result and "gain `weight` starts at 1 and its shift `bias` at 0" in result.message, (
        result.message
    )


def _layer_norm(forward) -> type:
    class Norm(nn.Module):
        def __init__(self, d_model):
            super().__init__()
            self.weight, self.bias = (
                nn.Parameter(torch.ones(d_model)),
                nn.Parameter(torch.zeros(d_model)),
            )

        def normalised(self, x, eps=1e-5):
            return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
                x.var(-1, unbiased=False, keepdim=True) + eps
            )

    Norm.forward = forward
    return Norm


@pytest.mark.parametrize(
    ("forward", "words"),
    [
        (lambda self, x: self.normalised(x, 0.0) * self.weight + self.bias, "no eps"),
        (
            lambda self, x: (
                (x - x.mean(-1, keepdim=True))
                / (x.std(-1, unbiased=False, keepdim=True) + 1e-5)
                * self.weight
                + self.bias
            ),
            "outside the square root",
        ),
        (
            lambda self, x: self.normalised(x) * self.weight * self.weight + self.bias,
            "gain was applied twice",
        ),
        (
            lambda self, x: (self.normalised(x) + self.bias) * self.weight,
            "shift was added before the gain",
        ),
        (lambda self, x: self.normalised(x * self.weight) + self.bias, "before normalising"),
    ],
)
def test_layer_norm_mistakes_that_passed_are_named(forward, words):
    """Issue #29, 3: no eps (every case had variance >= 1.59), and a gain or shift misplaced."""
    result = tl.checks.check_layer_norm(_layer_norm(forward))
    assert not result and words in result.message, result.message


def test_a_difference_always_shows_in_the_numbers_printed():
    """Issue #29, 3: "expected 2.106, got 2.106" for a difference of 1.3e-4."""
    from transformer_lib.teaching.checks import engine

    assert engine._pair(2.1061, 2.10623) == ("2.1061", "2.1062")
    assert engine._pair(1.0, 1.0 + 1e-12) == ("1", "1.000000000001")
    result = tl.checks.check_layer_norm(
        _layer_norm(lambda self, x: self.normalised(x) * self.weight + self.bias + 1.3e-4)
    )
    shown = result.message.split("expected ")[1].split(". Hint")[0]
    want, have = shown.split(", got ")
    assert not result and want != have, result.message


def test_one_layer_norm_shared_by_two_sublayers_is_named():
    """Issue #29, 4: with fresh norms (gain 1, shift 0) a shared LayerNorm computed the same
    thing."""

    class Shared(solution("04", "MyEncoderLayer")):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.norm2 = self.norm1

    result = tl.checks.check_encoder_layer(Shared)
    assert not result and "`norm1` and `norm2` are one LayerNorm" in result.message, result.message

    class SecondNormUnused(solution("04", "MyEncoderLayer")):
        def forward(self, x, mask=None):
            # the feed-forward gets norm1 (the attribute norm2 is set back below)
            self.norm2 = self.norm1
            try:
                return super().forward(x, mask)
            finally:
                del self.norm2

    assert not tl.checks.check_encoder_layer(SecondNormUnused)


@pytest.mark.parametrize(
    "forward",
    [
        lambda self, x: F.layer_norm(x, x.shape[-1:], self.weight, self.bias, 1e-5),
        lambda self, x: (
            (x - x.mean(-1, keepdim=True))
            * torch.rsqrt((x * x).mean(-1, keepdim=True) - x.mean(-1, keepdim=True) ** 2 + 1e-5)
            * self.weight
            + self.bias
        ),
    ],
)
def test_every_correct_way_of_writing_layer_norm_passes_the_near_constant_tokens(forward):
    """The near-constant tokens sit near 0, so float32 rounding (even E[x^2] - E[x]^2) stays far
    inside the tolerance."""
    result = tl.checks.check_layer_norm(_layer_norm(forward))
    assert result, result.message


def test_layer_norm_with_the_annotated_transformers_eps_is_named():
    class Eps6(tl.LayerNorm):
        def forward(self, x):
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, eps=1e-6)

    result = tl.checks.check_layer_norm(Eps6)
    assert not result and "1e-6" in result.message, result.message


class _Conv(nn.Module):
    def __init__(self, d_model, d_ff, bias=True):
        super().__init__()
        self.conv1 = nn.Conv1d(d_model, d_ff, kernel_size=1, bias=bias)
        self.conv2 = nn.Conv1d(d_ff, d_model, 1, bias=bias)

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x.transpose(1, 2)))).transpose(1, 2)


class _ConvPermute(_Conv):
    def forward(self, x):
        y = F.relu(self.conv1(x.permute(0, 2, 1)))
        return self.conv2(y).permute(0, 2, 1)


class _ConvNoBias(_Conv):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff, bias=False)


class _ConvFunctional(_Conv):
    def forward(self, x):
        y = F.conv1d(x.mT, self.conv1.weight, self.conv1.bias).clamp(min=0)
        return F.conv1d(y, self.conv2.weight, self.conv2.bias).mT


class _ConvSame(_Conv):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)
        self.conv1 = nn.Conv1d(d_model, d_ff, kernel_size=1, padding="same")


@pytest.mark.parametrize("module", [_Conv, _ConvPermute, _ConvNoBias, _ConvFunctional, _ConvSame])
def test_every_correct_convolutional_feed_forward_passes(module):
    result = tl.checks.check_conv_feed_forward(module)
    assert result, result.message


class _ConvNoTransposeBack(_Conv):
    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x.transpose(1, 2))))


class _ConvKernel3(_Conv):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)
        self.conv1 = nn.Conv1d(d_model, d_ff, kernel_size=3, padding=1)


class _ConvNoRelu(_Conv):
    def forward(self, x):
        return self.conv2(self.conv1(x.transpose(1, 2))).transpose(1, 2)


class _ConvReluOut(_Conv):
    def forward(self, x):
        return torch.relu(super().forward(x))


class _Linears(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class _ConvPadded(_Conv):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)
        self.conv2 = nn.Conv1d(d_ff, d_model, kernel_size=1, padding=1)


@pytest.mark.parametrize(
    ("module", "words"),
    [
        (_ConvNoTransposeBack, "transpose"),
        (_ConvKernel3, "kernel_size=3"),
        (_ConvNoRelu, "without the ReLU"),
        (_ConvReluOut, "output too"),
        (_Linears, "`conv1`, an nn.Conv1d"),
        (_ConvPadded, "padding"),
    ],
)
def test_typical_mistakes_in_the_convolutional_feed_forward_are_named(module, words):
    result = tl.checks.check_conv_feed_forward(module)
    assert not result and words in result.message, result.message


class _Encoder(nn.Module):
    def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList(
            tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
            for _ in range(num_layers)
        )
        self.final_norm = tl.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x)


class _EncoderDeepcopies(_Encoder):  # copies of one layer: distinct objects, distinct weights
    def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
        nn.Module.__init__(self)
        layer = tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(num_layers))
        self.norm_first = norm_first
        if norm_first:
            self.final_norm = nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x) if self.norm_first else x


class _EncoderOfOwnLayers(_Encoder):  # exercise 2's layer, the learner's own, stacked
    def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
        nn.Module.__init__(self)
        self.layers = nn.ModuleList(
            MyEncoderLayer(d_model, num_heads, d_ff, norm_first) for _ in range(num_layers)
        )
        self.norm_first = norm_first
        self.final_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)
        return self.final_norm(x)


@pytest.mark.parametrize("module", [_Encoder, _EncoderDeepcopies, _EncoderOfOwnLayers])
def test_every_correct_encoder_stack_passes(module):
    result = tl.checks.check_encoder(module)
    assert result, result.message


def _encoder_variant(forward=None, **init):
    """A subclass of the correct stack with ``forward`` replaced, or its ``__init__`` changed by
    ``init``: "shared", "post_final", "no_final", "plain_list", "post_layers"."""

    class Variant(_Encoder):
        def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(num_layers, d_model, num_heads, d_ff, norm_first)
            kind = init.get("kind")
            if kind == "shared":
                self.layers = nn.ModuleList([self.layers[0]] * num_layers)
            if kind == "post_final":
                self.final_norm = nn.LayerNorm(d_model)
            if kind == "no_final":
                self.final_norm = nn.Identity()
            if kind == "plain_list":
                layers = list(self.layers)
                del self.layers  # a registered submodule cannot be overwritten with a list
                self.layers = layers
            if kind == "own_layers":
                self.layers = nn.ModuleList(nn.Identity() for _ in range(num_layers))
            if kind == "post_layers":
                self.layers = nn.ModuleList(
                    tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0)
                    for _ in range(num_layers)
                )

    if forward is not None:
        Variant.forward = forward
    return Variant


def _no_mask(self, x, mask=None):
    for layer in self.layers:
        x = layer(x)
    return self.final_norm(x)


def _not_chained(self, x, mask=None):
    out = x
    for layer in self.layers:
        out = layer(x, mask)
    return self.final_norm(out)


def _final_every_layer(self, x, mask=None):
    for layer in self.layers:
        x = self.final_norm(layer(x, mask))
    return x


def _final_never(self, x, mask=None):
    for layer in self.layers:
        x = layer(x, mask)
    return x


@pytest.mark.parametrize(
    ("module", "words"),
    [
        (_encoder_variant(kind="shared"), "one layer object"),
        (_encoder_variant(kind="post_final"), "post-LN stack has a final LayerNorm"),
        (_encoder_variant(kind="no_final"), "needs a final LayerNorm"),
        (_encoder_variant(kind="plain_list"), "nn.ModuleList"),
        (_encoder_variant(kind="post_layers"), "norm_first"),
        (_encoder_variant(kind="own_layers"), "tl.EncoderLayer"),
        (_encoder_variant(_no_mask), "padding mask"),
        (type("OwnNoMask", (_EncoderOfOwnLayers,), {"forward": _no_mask}), "padding mask"),
        (
            type("OwnNotChained", (_EncoderOfOwnLayers,), {"forward": _not_chained}),
            "previous layer's output",
        ),
        (_encoder_variant(_not_chained), "previous layer's output"),
        (_encoder_variant(_final_every_layer), "after every layer"),
        (_encoder_variant(_final_never), "never applied"),
    ],
)
def test_typical_mistakes_in_the_encoder_stack_are_named(module, words):
    result = tl.checks.check_encoder(module)
    assert not result and words in result.message, result.message
