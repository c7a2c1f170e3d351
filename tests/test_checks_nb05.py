"""The checks of notebook 05: the decoder layer (with the encoder layer's shared mistakes),
cross-attention and the Transformer's parameter count.
"""

import numpy as np
import pytest
import torch
from checks_students import mha_variant, solution
from torch import nn

import transformer_lib as tl


class EncoderLayerNoAttentionResidual(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.self_attn, self.feed_forward = (
            tl.MultiHeadAttention(d_model, num_heads),
            tl.PositionwiseFeedForward(d_model, d_ff),
        )
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        x = self.norm1(self.self_attn(x, x, x, mask)[0])  # no `x +`
        return self.norm2(x + self.feed_forward(x))


class DecoderLayerCrossWithTargetMask(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = tl.DecoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.self_attn, self.cross_attn = self.layer.self_attn, self.layer.cross_attn
        self.feed_forward = self.layer.feed_forward
        self.norm1, self.norm2, self.norm3 = (
            getattr(self.layer, n).norm for n in ("residual_self", "residual_cross", "residual_ff")
        )

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self.layer(x, memory, tgt_mask, tgt_mask)  # the target's mask in cross-attention


def test_layer_checks_name_missing_residuals_and_wrong_cross_attention_masks():
    assert (
        "residual connection around the attention"
        in tl.checks.check_encoder_layer(EncoderLayerNoAttentionResidual).message
    )
    result = tl.checks.check_decoder_layer(DecoderLayerCrossWithTargetMask)
    assert "cross-attention got the wrong mask" in result.message


def buggy_layer(decoder: bool, bug: str) -> type:
    """A learner's encoder or decoder layer (nn.LayerNorm, tl.MultiHeadAttention) with one named
    bug."""

    class Layer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__()
            self.norm_first = norm_first != (bug == "swapped")
            self.self_attn = tl.MultiHeadAttention(d_model, num_heads)
            self.cross_attn = tl.MultiHeadAttention(d_model, num_heads) if decoder else None
            self.feed_forward = tl.PositionwiseFeedForward(d_model, d_ff)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.norm3 = nn.LayerNorm(d_model) if decoder else None

        # encoder: (mask); decoder: (memory, tgt_mask, memory_mask)
        def forward(self, x, *arguments):
            padded = (*arguments, None, None) if decoder else (None, *arguments, None, None)
            memory, tgt_mask, memory_mask = padded[:3]
            self_mask = None if bug == "self mask" else tgt_mask
            cross_mask = {"cross mask": None, "cross gets the target mask": tgt_mask}.get(
                bug, memory_mask
            )
            sublayers = [
                ("self residual", self.norm1, lambda y: self.self_attn(y, y, y, self_mask)[0])
            ]
            if decoder:
                cross = self.cross_attn
                sublayers.append(
                    (
                        "cross residual",
                        self.norm2,
                        lambda y: cross(y, memory, memory, cross_mask)[0],
                    )
                )
            sublayers.append(
                ("ffn residual", self.norm3 if decoder else self.norm2, self.feed_forward)
            )
            for name, norm, sublayer in sublayers:
                y = sublayer(norm(x) if self.norm_first else x)
                y = y if bug == name else x + y
                x = y if self.norm_first else norm(y)
            return x

    return Layer


@pytest.mark.parametrize(
    ("decoder", "bug", "words"),
    [
        (False, "swapped", "post-LN and pre-LN are swapped"),
        (False, "self residual", "residual connection around the attention"),
        (False, "ffn residual", "residual connection around the feed-forward"),
        (False, "self mask", "ignored its mask"),
        (True, "swapped", "post-LN and pre-LN are swapped"),
        (True, "self residual", "residual connection around the attention"),
        (True, "cross residual", "residual connection around the cross-attention"),
        (True, "ffn residual", "residual connection around the feed-forward"),
        (True, "self mask", "ignored the target mask"),
        (True, "cross mask", "ignored memory_mask"),
        (True, "cross gets the target mask", "cross-attention got the wrong mask"),
    ],
)
def test_layer_checks_name_each_diagnosed_mistake(decoder, bug, words):
    check = tl.checks.check_decoder_layer if decoder else tl.checks.check_encoder_layer
    assert check(buggy_layer(decoder, "none"))
    result = check(buggy_layer(decoder, bug))
    assert not result and words in result.message, result.message


def test_cross_attention_with_queries_from_the_memory_gets_its_hint():
    import solutions

    class Swapped(solutions.solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            x = self.norm1(x + self.self_attn(x, x, x, tgt_mask)[0])
            x = self.norm2(x + self.cross_attn(memory, x, x, memory_mask)[0])
            return self.norm3(x + self.feed_forward(x))

    result = tl.checks.check_decoder_layer(Swapped)
    assert not result and "queries came from the memory" in result.message, result.message


def test_values_through_w_k_and_swapped_decoder_masks_get_their_hints():
    import solutions

    def values_through_keys(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_k, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))

    assert (
        "projected with w_k"
        in tl.checks.check_multi_head_attention(mha_variant(values_through_keys)).message
    )

    class SwappedMasks(solutions.solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            x = self.norm1(x + self.self_attn(x, x, x, memory_mask)[0])
            x = self.norm2(x + self.cross_attn(x, memory, memory, tgt_mask)[0])
            return self.norm3(x + self.feed_forward(x))

    result = tl.checks.check_decoder_layer(SwappedMasks)
    assert not result and "two masks were swapped" in result.message, result.message


class HeadsOfWidthH(nn.Module):
    """Multi-head attention that splits into d_k heads of h features: equal to the right one when h
    == d_k."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.width = num_heads  # the bug: num_heads used as the width of a head
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        heads = self.w_q.out_features // self.width
        q, k, v = (
            tl.split_heads(w(t), heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))


def layer_with(decoder: bool, attention: type, index_zero: bool) -> type:
    """The reference layer with the learner's ``attention`` class; ``index_zero``: its result is
    read with ``[0]``."""
    base = solution("05", "MyDecoderLayer") if decoder else solution("04", "MyEncoderLayer")

    class Layer(base):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.self_attn = attention(d_model, num_heads)
            if decoder:
                self.cross_attn = attention(d_model, num_heads)

    class Bare(nn.Module):  # the learner's attention seen through `[0]` (or not)
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.w_q, self.w_k, self.w_v, self.w_o = inner.w_q, inner.w_k, inner.w_v, inner.w_o

        def forward(self, *args):
            out = self.inner(*args)
            # the layer takes [0]: batch element 0, or the output
            return out if index_zero else (out, None)

    class Wrapped(Layer):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.self_attn = Bare(self.self_attn)
            if decoder:
                self.cross_attn = Bare(self.cross_attn)

    return Wrapped


@pytest.mark.parametrize(
    "check", ["check_multi_head_attention", "check_encoder_layer", "check_decoder_layer"]
)
def test_d_k_heads_of_width_h_are_named_where_h_differs_from_d_k(check):
    """Issue #29, 1: with d_model=16, h=4 (h == d_k) a module with the two swapped passed every
    check."""
    code = {"check_multi_head_attention": HeadsOfWidthH}.get(check) or layer_with(
        check == "check_decoder_layer", HeadsOfWidthH, index_zero=False
    )
    result = getattr(tl.checks, check)(code)
    assert not result and "d_k heads of h features" in result.message and "h=3" in result.message, (
        result.message
    )


def test_a_decoder_layer_with_a_causal_mask_of_its_own_is_named():
    """Issue #29, 7: ignoring tgt_mask for a causal mask of its own drops the target's padding."""

    class OwnCausalMask(solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            return super().forward(x, memory, tl.causal_mask(x.size(1)), memory_mask)

    result = tl.checks.check_decoder_layer(OwnCausalMask)
    assert (
        not result
        and "causal mask of its own" in result.message
        and "left padding" in result.message
    )


@pytest.mark.parametrize("decoder", [False, True])
def test_an_attention_returning_the_output_alone_read_with_index_zero_is_named(decoder):
    """Issue #29, 12: `self.self_attn(...)[0]` on notebook 02's module (which may return the output
    alone) takes batch element 0; without `[0]` the same module is right."""
    mha = solution("02", "MyMultiHeadAttention")
    check = tl.checks.check_decoder_layer if decoder else tl.checks.check_encoder_layer
    result = check(layer_with(decoder, mha, index_zero=True))
    assert (
        not result
        and "returns the output alone" in result.message
        and "batch element 0" in result.message
    )
    assert check(layer_with(decoder, mha, index_zero=False))


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
