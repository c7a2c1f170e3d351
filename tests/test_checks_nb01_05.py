"""The checks of notebooks 01-05 that issue 36 added or sharpened: each accepts the correct forms a
learner may write, and names the typical mistakes (not only the generic hint)."""

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib as tl
from solutions.nb04_encoder import MyEncoderLayer

# --- 01: attention, the Annotated Transformer's -1e9 -------------------------------------------


def _annotated_attention(q, k, v, mask=None):
    """The Annotated Transformer's attention: masked scores -1e9, no care for a row with no key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def test_the_annotated_transformers_attention_gets_its_own_hint():
    result = tl.checks.check_attention(_annotated_attention)
    assert not result and "-1e9" in result.message and "uniform" in result.message, result.message


def test_minus_1e9_then_zeroed_empty_rows_is_correct():
    def attention(q, k, v, mask=None):
        out, weights = _annotated_attention(q, k, v, mask)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v, weights

    assert tl.checks.check_attention(attention)


def test_design_a_submitted_to_the_module_check_is_named():
    class DesignA(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            d_k = d_model // num_heads
            self.w_q, self.w_k, self.w_v = (
                nn.ModuleList(nn.Linear(d_model, d_k) for _ in range(num_heads)) for _ in range(3)
            )
            self.w_o = nn.Linear(d_model, d_model)

        def forward(self, query, key, value, mask=None):
            return query

    result = tl.checks.check_multi_head_attention(DesignA)
    assert not result and "design A" in result.message and "found weight" not in result.message


# --- 02: a fused projection laid out per head (GPT-NeoX) -----------------------------------------


def _neox_permute(qkv, h):
    batch, length, width = qkv.shape
    per_head = qkv.view(batch, length, h, 3, width // (3 * h)).permute(3, 0, 2, 1, 4)
    return per_head[0], per_head[1], per_head[2]


def _neox_slices(qkv, h):  # as Hugging Face's GPTNeoXAttention writes it
    batch, length, width = qkv.shape
    d = width // (3 * h)
    per_head = qkv.view(batch, length, h, 3 * d)
    return [per_head[..., i * d : (i + 1) * d].permute(0, 2, 1, 3) for i in range(3)]


def _neox_stacked(qkv, h):  # one tensor (3, B, h, T, d_k)
    return torch.stack(_neox_permute(qkv, h))


def _neox_split_then_chunk(qkv, h):  # heads first, then each head's block into three
    return tl.split_heads(qkv, h).chunk(3, dim=-1)


def _neox_loops(qkv, h):
    d = qkv.size(-1) // (3 * h)
    parts = []
    for j in range(3):
        heads = [qkv[..., (i * 3 + j) * d : (i * 3 + j + 1) * d] for i in range(h)]
        parts.append(torch.stack(heads, dim=1))  # (B, h, T, d_k)
    return tuple(parts)


@pytest.mark.parametrize(
    "split", [_neox_permute, _neox_slices, _neox_stacked, _neox_split_then_chunk, _neox_loops]
)
def test_every_correct_way_to_split_a_per_head_fused_projection_passes(split):
    result = tl.checks.check_split_fused_qkv(split)
    assert result, result.message


@pytest.mark.parametrize(
    ("split", "words"),
    [
        (lambda x, h: [tl.split_heads(t, h) for t in x.chunk(3, dim=-1)], "section 4's layout"),
        (
            lambda x, h: x.view(x.size(0), x.size(1), h, -1, 3).permute(4, 0, 2, 1, 3).unbind(0),
            "feature by feature",
        ),
        (lambda x, h: x.view(x.size(0), x.size(1), h, 3, -1).unbind(3), "heads axis"),
        (
            lambda x, h: tuple(
                t.reshape(x.size(0), h, x.size(1), -1)
                for t in x.view(x.size(0), x.size(1), h, 3, -1).unbind(3)
            ),
            "tokens are scrambled",
        ),
        (lambda x, h: (lambda q, k, v: (k, q, v))(*_neox_permute(x, h)), "swapped"),
        (lambda x, h: _neox_permute(x, h)[0], "three tensors"),
        (lambda x, h: _neox_permute(x, h)[:2], "three tensors"),
    ],
)
def test_typical_mistakes_in_splitting_a_per_head_fused_projection_are_named(split, words):
    result = tl.checks.check_split_fused_qkv(split)
    assert not result and words in result.message, result.message


# --- 03: the halves layout, the i-for-2i exponent, the frozen parameter --------------------------


def _halves_from_angles(d_model, max_len):
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange(0, d_model, 2) / d_model * math.log(10000.0)
    )
    return torch.cat([angles.sin(), angles.cos()], dim=-1)[:, :d_model]


def _halves_by_permutation(d_model, max_len):
    table = tl.sinusoidal_encoding(d_model, max_len)
    order = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])
    return table[:, order]


def _halves_loops(d_model, max_len):
    sines = (d_model + 1) // 2
    rows = []
    for pos in range(max_len):
        row = [math.sin(pos / 10000 ** (2 * i / d_model)) for i in range(sines)]
        row += [math.cos(pos / 10000 ** (2 * i / d_model)) for i in range(d_model // 2)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("table", [_halves_from_angles, _halves_by_permutation, _halves_loops])
def test_every_correct_halves_table_passes(table):
    result = tl.checks.check_sinusoidal_halves(table)
    assert result, result.message


def _halves_floor(d_model, max_len):
    """Odd widths: floor(d/2) sines, then ceil(d/2) cosines (the extra column to the cosines)."""
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange(0, d_model, 2) / d_model * math.log(10000.0)
    )
    return torch.cat([angles.sin()[:, : d_model // 2], angles.cos()], dim=-1)


def _with_exponent_i(d_model, max_len, halves):
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange((d_model + 1) // 2) / d_model * math.log(10000.0)
    )
    if halves:
        return torch.cat([angles.sin(), angles.cos()[:, : d_model // 2]], dim=-1)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :d_model]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (lambda d, n: tl.sinusoidal_encoding(d, n), "interleaved layout"),
        (lambda d, n: _halves_from_angles(d, n).roll(d // 2, dims=1), "cosines came first"),
        (_halves_floor, "one more sine than cosine"),
        (lambda d, n: _with_exponent_i(d, n, halves=True), "2i/d_model"),
        (lambda d, n: _halves_from_angles(n, d), "swapped the arguments"),
        (lambda d, n: _halves_from_angles(d, n).T, "transposed"),
    ],
)
def test_typical_mistakes_in_the_halves_table_are_named(table, words):
    result = tl.checks.check_sinusoidal_halves(table)
    assert not result and words in result.message, result.message


def test_the_interleaved_table_check_names_the_i_exponent_and_the_halves_layout():
    exponent = tl.checks.check_positional_encoding(
        lambda d, n: _with_exponent_i(d, n, halves=False)
    )
    assert not exponent and "2i/d_model" in exponent.message, exponent.message
    halves = tl.checks.check_positional_encoding(_halves_from_angles)
    assert not halves and "halves layout" in halves.message, halves.message


def test_a_frozen_parameter_table_is_refused_for_the_true_reason():
    class Frozen(nn.Module):
        def __init__(self, d_model, max_len):
            super().__init__()
            table = tl.sinusoidal_encoding(d_model, max_len)[None]
            self.pe = nn.Parameter(table, requires_grad=False)

        def forward(self, x):
            return x + self.pe[:, : x.size(1)]

    result = tl.checks.check_positional_encoding(Frozen)
    assert not result and ".parameters()" in result.message, result.message
    assert "optimizer would change it" not in result.message


# --- 04: LayerNorm's eps, the feed-forward as convolutions, the stack ----------------------------


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


# --- 05: a pre-LN decoder that normalises the memory; the parameter count ------------------------


def test_a_pre_ln_decoder_layer_that_normalises_the_memory_is_named():
    import solutions

    class NormalisedMemory(solutions.solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            if self.norm_first:
                memory = self.norm2(memory)
            return super().forward(x, memory, tgt_mask, memory_mask)

    result = tl.checks.check_decoder_layer(NormalisedMemory)
    assert not result and "norm2(memory)" in result.message, result.message


def _count(config):
    d, f, n, b = config.d_model, config.d_ff, config.num_layers, config.bias
    attention, ffn, norm = 4 * d * d + 4 * d * b, 2 * d * f + (f + d) * b, 2 * d
    total = n * (attention + ffn + 2 * norm) + n * (2 * attention + ffn + 3 * norm)
    total += 2 * norm if config.norm_first else 0
    vocab = config.src_vocab_size + (0 if config.share_embeddings else 2 * config.tgt_vocab_size)
    positions = config.max_len if config.positional == "learned" else 0
    return total + (vocab + positions) * d


def _count_by_building(config):
    with torch.device("meta"):
        return tl.count_parameters(tl.Transformer(config))["total"]


@pytest.mark.parametrize(
    "count", [_count, lambda c: np.int64(_count(c)), lambda c: float(_count(c)), _count_by_building]
)
def test_every_correct_parameter_count_passes(count):
    result = tl.checks.check_transformer_parameter_count(count)
    assert result, result.message


def _replaced(**changes):
    return lambda config: _count(config.replace(**changes))


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (_replaced(norm_first=False), "final LayerNorm"),
        (lambda c: _count(c) + (4 * c.d_model if not c.norm_first else 0), "post-LN stack"),
        (
            lambda c: _count(c) + (2 * c.src_vocab_size * c.d_model if c.share_embeddings else 0),
            "count it once",
        ),
        (lambda c: _count(c) + 2 * c.max_len * c.d_model, "buffer"),
        (
            lambda c: _count(c) + (0 if c.positional == "learned" else c.max_len * c.d_model),
            "buffer",
        ),
        (_replaced(positional="sinusoidal"), "learned table"),
        (
            lambda c: _count(c) + (c.max_len * c.d_model if c.positional == "learned" else 0),
            "share one learned",
        ),
        (_replaced(bias=True), "still counted"),
        (
            lambda c: (
                _count(c) - (0 if c.bias else (5 * c.num_layers + 2 * c.norm_first) * c.d_model)
            ),
            "keeps its shift",
        ),
        (
            lambda c: _count(c) - (0 if c.share_embeddings else c.tgt_vocab_size * c.d_model),
            "third matrix",
        ),
        (
            lambda c: _count(c) - c.num_layers * (4 * c.d_model**2 + 4 * c.d_model),
            "cross-attention",
        ),
        (lambda c: _count(c) - c.num_layers * 2 * c.d_model, "three LayerNorms"),
        (
            lambda c: (
                _count(c)
                - 3 * c.num_layers * 4 * c.d_model
                - 2 * c.num_layers * (c.d_ff + c.d_model)
            ),
            "biases",
        ),
        (
            lambda c: (
                _count(c)
                + 3 * c.num_layers * (c.num_heads - 1) * (4 * c.d_model**2 + 4 * c.d_model)
            ),
            "once per head",
        ),
        (
            lambda c: _count(c) + (0 if c.share_embeddings else c.tgt_vocab_size),
            "no bias",
        ),
        (_replaced(tgt_vocab_size=1000), "target side"),
        (lambda c: _count(c) + 1, "expected"),
    ],
)
def test_typical_mistakes_in_the_parameter_count_are_named(count, words):
    result = tl.checks.check_transformer_parameter_count(count)
    assert not result and words in result.message, result.message


def test_the_parameter_count_check_survives_odd_answers():
    for answer in (None, "63M", [1, 2], torch.zeros(2)):
        result = tl.checks.check_transformer_parameter_count(lambda c, a=answer: a)
        assert isinstance(result, tl.checks.CheckResult) and not result, result.message
