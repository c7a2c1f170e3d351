"""The checks of notebook 02: splitting and combining heads, the fused projection and multi-head
attention.
"""

import pytest
import torch
from checks_students import mha_variant
from torch import nn

import transformer_lib as tl


class BiasFreeMHA(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.mha = tl.MultiHeadAttention(d_model, num_heads, bias=False)
        self.w_q, self.w_k, self.w_v, self.w_o = (
            self.mha.w_q,
            self.mha.w_k,
            self.mha.w_v,
            self.mha.w_o,
        )

    def forward(self, query, key, value, mask=None):
        return self.mha(query, key, value, mask)


class HalfBiasedMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_o = self.mha.w_o = nn.Linear(d_model, d_model)  # the only projection with a bias


class NarrowMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_q = self.mha.w_q = nn.Linear(d_model, d_model // 2, bias=False)
        self.extra = nn.Linear(d_model // 2, 1, bias=False)


def test_multi_head_attention_accepts_bias_free_projections_and_names_parameter_problems():
    assert tl.checks.check_multi_head_attention(BiasFreeMHA)
    assert "only ['w_o'] have a bias" in tl.checks.check_multi_head_attention(HalfBiasedMHA).message
    assert "w_q maps 16 -> 8 features" in tl.checks.check_multi_head_attention(NarrowMHA).message


class OppositePolarityMHA(BiasFreeMHA):
    def forward(self, query, key, value, mask=None):
        return self.mha(query, key, value, None if mask is None else ~mask)


def test_multi_head_attention_check_names_the_opposite_polarity():
    result = tl.checks.check_multi_head_attention(OppositePolarityMHA)
    assert not result and "opposite polarity" in result.message


class ExtraParameterMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.temperature = nn.Parameter(torch.ones(1))


def test_multi_head_attention_names_extra_parameters():
    result = tl.checks.check_multi_head_attention(ExtraParameterMHA)
    assert not result and "['temperature']" in result.message


class FrozenOutputMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_o.weight.requires_grad_(False)


def test_multi_head_attention_check_names_a_frozen_parameter():
    result = tl.checks.check_multi_head_attention(FrozenOutputMHA)
    assert not result and "w_o.weight'] have requires_grad=False" in result.message, result.message


def test_forgotten_output_projection_and_shared_key_projection_get_their_hints():
    def no_output_projection(self, query, key, value, mask=None):
        heads = tl.scaled_dot_product_attention(
            *(
                tl.split_heads(w(t), self.num_heads)
                for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
            ),
            mask,
        )[0]
        return tl.combine_heads(heads)

    def query_projection_for_keys(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_q, key), (self.w_v, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))

    assert (
        "w_o was not applied"
        in tl.checks.check_multi_head_attention(mha_variant(no_output_projection)).message
    )
    assert (
        "projected with w_q"
        in tl.checks.check_multi_head_attention(mha_variant(query_projection_for_keys)).message
    )


def test_multi_head_attention_compares_the_weights_it_returns():
    """Issue #29, 2: returned weights are compared, per head or averaged over the heads."""

    class WithWeights(nn.Module):
        def __init__(self, d_model, num_heads, average=False, wrong=False):
            super().__init__()
            self.attn, self.average, self.wrong = (
                tl.MultiHeadAttention(d_model, num_heads),
                average,
                wrong,
            )
            self.w_q, self.w_k, self.w_v, self.w_o = (
                self.attn.w_q,
                self.attn.w_k,
                self.attn.w_v,
                self.attn.w_o,
            )

        def forward(self, query, key, value, mask=None):
            out, weights = self.attn(query, key, value, mask, need_weights=True)
            weights = torch.zeros_like(weights) + 7 if self.wrong else weights
            return out, weights.mean(1) if self.average else weights

    class Averaged(WithWeights):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads, average=True)

    class Sevens(WithWeights):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads, wrong=True)

    assert tl.checks.check_multi_head_attention(WithWeights)
    assert tl.checks.check_multi_head_attention(Averaged)
    wrong = tl.checks.check_multi_head_attention(Sevens)
    assert not wrong and "your weights" in wrong.message and "got 7" in wrong.message, wrong.message


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
