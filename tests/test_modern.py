"""The options that took the paper's block to today's decoders (issue #28; notebook 13): RMSNorm,
rotary positions, SwiGLU, grouped-query attention, projections without biases, and the KV cache's
size per token.

Each option is tested where its branch lives (the layer or attention module), then through a config;
the Hugging Face Llama that uses them all is in tests/test_huggingface.py.
"""

import pytest
import torch
import torch.nn.functional as F
from helpers import max_abs_diff
from torch import nn

import transformer_lib as tl
from transformer_lib.model.attention import apply_rope, kv_cache_bytes_per_token
from transformer_lib.model.layers import RMSNorm
from transformer_lib.model.lm import LMConfig

D, H, FF = 32, 4, 48  # d_model, h, d_ff; d_k = 8


def lm_config(**options) -> LMConfig:
    sizes = dict(
        vocab_size=29, d_model=D, num_heads=H, d_ff=FF, num_layers=2, dropout=0.0, max_len=40
    )
    return LMConfig(**{**sizes, **options})


# --- RMSNorm --------------------------------------------------------------------------------------


def test_rmsnorm_divides_by_the_root_mean_square_and_scales():
    torch.manual_seed(0)
    norm = RMSNorm(D, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(2, 5, D) + 3.0  # a mean far from 0: LayerNorm would remove it, RMSNorm keeps it
    expected = x / x.pow(2).mean(dim=-1, keepdim=True).add(1e-6).sqrt() * norm.weight
    assert max_abs_diff(norm(x), expected) <= 1e-6
    # PyTorch's own
    assert max_abs_diff(norm(x), nn.functional.rms_norm(x, (D,), norm.weight, 1e-6)) <= 1e-6
    assert max_abs_diff(norm(5.0 * x), norm(x)) <= 1e-5  # invariant to rescaling, as LayerNorm is
    # but not to shifting
    assert max_abs_diff(norm(x), tl.LayerNorm(D, 1e-6)(x) * norm.weight) > 0.1
    assert [name for name, _ in norm.named_parameters()] == ["weight"]  # no shift


def test_rmsnorm_in_half_precision_normalises_in_float32():
    x = torch.full((1, 2, D), 300.0, dtype=torch.float16)  # 300^2 overflows fp16's 65504
    y = RMSNorm(D).half()(x)
    assert (
        y.dtype == torch.float16
        and torch.isfinite(y).all()
        and max_abs_diff(y.float(), torch.ones(1, 2, D)) < 1e-3
    )


def test_norm_option_reaches_every_sublayer_and_the_final_norm():
    model = tl.DecoderOnlyLM(lm_config(norm="rmsnorm"))
    norms = [m for name, m in model.blocks.named_modules() if name.endswith("norm")]
    # 2 layers x 2, plus final
    assert len(norms) == 2 * 2 + 1 and all(isinstance(m, RMSNorm) for m in norms)
    paper = tl.DecoderOnlyLM(lm_config())
    assert all(
        type(m) is tl.LayerNorm for name, m in paper.blocks.named_modules() if name.endswith("norm")
    )
    # an RMSNorm has a gain and no shift: D fewer parameters per norm
    assert tl.count_parameters(paper)["total"] - tl.count_parameters(model)["total"] == 5 * D
    encoder_decoder = tl.Transformer(
        tl.TransformerConfig(20, 20, d_model=D, num_heads=H, norm="rmsnorm")
    )
    assert all(not isinstance(m, tl.LayerNorm) for m in encoder_decoder.modules())


# --- rotary positions -----------------------------------------------------------------------------


def test_rope_score_depends_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 1, 16), torch.randn(1, 2, 1, 16)  # (B, h, 1, d_k): one query, one key

    def score(m: int, n: int) -> torch.Tensor:  # q at position m, k at position n: (B, h)
        return (
            apply_rope(q, torch.tensor([m]), 100.0) * apply_rope(k, torch.tensor([n]), 100.0)
        ).sum(-1)[..., 0]

    for m, n in [(3, 1), (7, 2), (0, 5)]:
        for shift in (1, 10, 250):
            torch.testing.assert_close(
                score(m + shift, n + shift), score(m, n), atol=1e-4, rtol=1e-5
            )
    assert max_abs_diff(score(3, 1), score(3, 2)) > 1e-2  # and it does depend on the offset


def test_rope_rotates_neighbouring_pairs_and_keeps_lengths():
    x = torch.zeros(1, 1, 3, 4)  # (B, h, T, d_k): pairs (0, 1) and (2, 3)
    x[..., 0] = 1.0  # the unit vector of feature 0
    rotated = apply_rope(x, torch.tensor([0, 1, 2]), theta=10000.0)
    # pair 0 turns at w_0 = 1 radian per position, into feature 1 (its neighbour)
    for m in range(3):
        angle = torch.tensor(float(m))
        torch.testing.assert_close(
            rotated[0, 0, m], torch.stack([angle.cos(), angle.sin(), *torch.zeros(2)])
        )
    y = torch.randn(2, 3, 5, 8)
    turned = apply_rope(y, torch.arange(5), 10000.0)
    torch.testing.assert_close(turned.norm(dim=-1), y.norm(dim=-1))  # a rotation: lengths unchanged
    torch.testing.assert_close(turned[:, :, 0], y[:, :, 0])  # position 0 is not turned


def test_rope_refuses_odd_widths_and_wrong_positions():
    with pytest.raises(ValueError, match=r"\(B, h, T, d_k\) with an even d_k, got \(1, 1, 2, 3\)"):
        apply_rope(torch.zeros(1, 1, 2, 3), torch.arange(2))
    with pytest.raises(ValueError, match=r"positions must be a \(T,\) tensor, T=2"):
        apply_rope(torch.zeros(1, 1, 2, 4), torch.arange(3))
    with pytest.raises(ValueError, match="d_k must be even, got d_k=3"):
        tl.MultiHeadAttention(12, 4, rope_theta=10000.0)


def test_rope_attention_caches_rotated_keys_and_offsets_new_positions():
    torch.manual_seed(0)
    mha = tl.MultiHeadAttention(D, H, rope_theta=500.0).eval()
    x = torch.randn(2, 6, D)
    causal = tl.causal_mask(6)
    full, _ = mha(x, x, x, causal)  # (B, T, d_model)
    cache = tl.KVCache()
    steps = [
        mha(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)[0] for t in range(6)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    # (B, h, T, d_k), rotated
    stored = apply_rope(tl.split_heads(mha.w_k(x), H), torch.arange(6), 500.0)
    torch.testing.assert_close(cache.k, stored, atol=1e-6, rtol=1e-6)
    plain = tl.MultiHeadAttention(D, H).eval()
    plain.load_state_dict(mha.state_dict())  # the same weights, no rotation: a different function
    assert max_abs_diff(plain(x, x, x, causal)[0], full) > 1e-3


def test_rope_models_add_nothing_to_the_embeddings_and_decode_with_a_cache():
    torch.manual_seed(0)
    config = tl.TransformerConfig(
        20, 20, d_model=D, num_heads=H, d_ff=FF, num_layers=2, positional="rope", dropout=0.0
    )
    model = tl.Transformer(config).eval()
    assert isinstance(model.positions, tl.layers.RotaryPositions)
    layer = model.decoder.layers[0]
    # never across sequences
    assert layer.self_attn.rope_theta == 10000.0 and layer.cross_attn.rope_theta is None
    x = torch.randn(2, 5, D)
    torch.testing.assert_close(model.positions(x), x)
    src = torch.randint(4, 20, (2, 7))
    cached = tl.greedy_decode(model, src, 8, bos_id=1, eos_id=2, use_cache=True)
    assert torch.equal(cached, tl.greedy_decode(model, src, 8, bos_id=1, eos_id=2, use_cache=False))
    with pytest.raises(ValueError, match="exceed max_len=40"):
        tl.DecoderOnlyLM(lm_config(positional="rope"))(torch.zeros(1, 41, dtype=torch.long))


# --- SwiGLU ---------------------------------------------------------------------------------------


def test_swiglu_is_a_gated_feed_forward():
    torch.manual_seed(0)
    ffn = tl.PositionwiseFeedForward(D, FF, activation="swiglu")
    x = torch.randn(2, 5, D)
    expected = ffn.linear2(F.silu(ffn.gate(x)) * ffn.linear1(x))  # down(silu(gate(x)) * up(x))
    torch.testing.assert_close(ffn(x), expected)
    # its own hidden width: d_ff
    assert ffn.gate.out_features == FF and ffn.linear2.in_features == FF
    assert sum(p.numel() for p in ffn.parameters()) == 3 * D * FF + 2 * FF + D
    assert tl.PositionwiseFeedForward(D, FF).gate is None  # the paper's FFN has two matrices


def test_swiglu_option_builds_gated_feed_forwards():
    model = tl.DecoderOnlyLM(lm_config(activation="swiglu"))
    assert all(layer.feed_forward.gate is not None for layer in model.blocks.layers)
    assert "activation='swiglu'" in repr(model.config)


# --- grouped-query attention ----------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_attention_is_multi_head_attention_with_shared_key_value_heads(kv_heads):
    torch.manual_seed(0)
    grouped = tl.MultiHeadAttention(D, H, n_kv_heads=kv_heads).eval()
    assert grouped.w_k.out_features == grouped.w_v.out_features == kv_heads * (D // H)
    # The same function as h full heads whose key/value rows are repeated: query head j reads kv
    # head j // (h/h_kv)
    full = tl.MultiHeadAttention(D, H).eval()
    group = H // kv_heads
    with torch.no_grad():
        for name in ("w_q", "w_o"):
            getattr(full, name).load_state_dict(getattr(grouped, name).state_dict())
        for name in ("w_k", "w_v"):
            source, destination = getattr(grouped, name), getattr(full, name)
            destination.weight.copy_(
                source.weight.view(kv_heads, D // H, D).repeat_interleave(group, 0).view(D, D)
            )
            destination.bias.copy_(
                source.bias.view(kv_heads, D // H).repeat_interleave(group, 0).view(D)
            )
    x = torch.randn(2, 6, D)
    mask = tl.causal_mask(6)
    out, weights = grouped(x, x, x, mask, need_weights=True)
    expected, expected_weights = full(x, x, x, mask, need_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights)
    # the fused path agrees
    torch.testing.assert_close(grouped(x, x, x, mask)[0], out, atol=1e-5, rtol=1e-5)
    cache = tl.KVCache()
    for t in range(6):
        grouped(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache)
    # the cache holds h_kv heads, not h
    assert cache.k.shape == cache.v.shape == (2, kv_heads, 6, D // H)


def test_n_kv_heads_reaches_every_attention_and_shrinks_the_cache():
    model = tl.DecoderOnlyLM(lm_config(n_kv_heads=1)).eval()
    assert all(layer.self_attn.n_kv_heads == 1 for layer in model.blocks.layers)
    cache = model.new_cache()
    model(torch.randint(1, 29, (3, 5)), cache=cache)
    assert all(layer.k.shape == (3, 1, 5, D // H) for layer in cache.layers)
    encoder_decoder = tl.Transformer(
        tl.TransformerConfig(20, 20, d_model=D, num_heads=H, n_kv_heads=2)
    )
    assert all(layer.cross_attn.n_kv_heads == 2 for layer in encoder_decoder.decoder.layers)
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by n_kv_heads=3"):
        tl.MultiHeadAttention(D, H, n_kv_heads=3)


def test_num_kv_heads_is_a_deprecated_alias_of_n_kv_heads():
    with pytest.warns(DeprecationWarning, match="num_kv_heads is deprecated, use n_kv_heads"):
        old = tl.MultiHeadAttention(D, H, num_kv_heads=2)
    assert old.n_kv_heads == 2 and old.w_k.out_features == 2 * (D // H)
    with pytest.warns(DeprecationWarning, match="num_kv_heads is deprecated"):
        assert old.num_kv_heads == 2
    with pytest.warns(DeprecationWarning, match="num_kv_heads is deprecated"):
        layer = tl.EncoderLayer(D, H, 2 * D, num_kv_heads=1)
    assert layer.self_attn.n_kv_heads == 1
    with pytest.raises(TypeError, match="got both n_kv_heads=2 and its old name num_kv_heads=1"):
        tl.MultiHeadAttention(D, H, n_kv_heads=2, num_kv_heads=1)


# --- bias -----------------------------------------------------------------------------------------


def test_bias_false_removes_every_projection_bias_and_nothing_else():
    model = tl.DecoderOnlyLM(lm_config(bias=False, activation="swiglu"))
    linears = [m for m in model.blocks.modules() if isinstance(m, nn.Linear)]
    # 4 attention + 3 FFN per layer
    assert len(linears) == 2 * (4 + 3) and all(m.bias is None for m in linears)
    # norms keep theirs
    assert all(m.bias is not None for m in model.blocks.modules() if isinstance(m, tl.LayerNorm))
    with_bias = tl.DecoderOnlyLM(lm_config(activation="swiglu"))
    per_layer = 4 * D + 2 * FF + D  # q, k, v, o; gate and up; down
    assert (
        tl.count_parameters(with_bias)["total"] - tl.count_parameters(model)["total"]
        == 2 * per_layer
    )


# --- all together, and the defaults ---------------------------------------------------------------


def test_llama_like_config_switches_every_option_and_decodes_with_a_cache():
    config = LMConfig.llama_like(29, d_model=D, d_ff=FF, max_len=40)
    assert (config.norm, config.positional, config.activation, config.n_kv_heads, config.bias) == (
        "rmsnorm",
        "rope",
        "swiglu",
        2,
        False,
    )
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(config).eval()
    tokens = torch.randint(0, 29, (2, 9))
    full = model(tokens)
    cache = model.new_cache()
    parts = [
        model(tokens[:, :4], cache=cache),
        model(tokens[:, 4:7], cache=cache),
        model(tokens[:, 7:], cache=cache),
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)


def test_defaults_are_the_papers_block():
    for config in (lm_config(), tl.TransformerConfig(20, 20)):
        assert (config.norm, config.rope_theta, config.n_kv_heads, config.bias) == (
            "layernorm",
            10000.0,
            None,
            True,
        )
        assert not any(
            name in repr(config) for name in ("norm=", "rope_theta", "n_kv_heads", "bias")
        )
    keys = tl.DecoderOnlyLM(lm_config()).state_dict().keys()
    assert not any("gate" in key for key in keys) and any(key.endswith("w_k.bias") for key in keys)


# --- the KV cache's size --------------------------------------------------------------------------


@pytest.mark.parametrize("kv_heads", [H, H // 4, 1])
def test_kv_cache_bytes_per_token_is_what_a_filled_cache_holds(kv_heads):
    config = lm_config(num_layers=3, n_kv_heads=kv_heads)
    expected = 2 * 3 * kv_heads * (D // H) * 4  # k and v, layers, kv heads, d_k, fp32 bytes
    assert kv_cache_bytes_per_token(config) == expected
    assert kv_cache_bytes_per_token(config, torch.bfloat16) == expected // 2
    model = tl.DecoderOnlyLM(config).eval()
    cache = model.new_cache()
    batch, length = 2, 7
    model(torch.randint(1, 29, (batch, length)), cache=cache)
    held = sum(layer.k.nbytes + layer.v.nbytes for layer in cache.layers)
    assert held == expected * batch * length


def test_kv_cache_bytes_of_an_encoder_decoder_count_the_decoders_self_attention():
    config = tl.TransformerConfig(
        20, 20, d_model=D, num_heads=H, num_layers=2, num_decoder_layers=3, n_kv_heads=2
    )
    assert kv_cache_bytes_per_token(config, torch.float16) == 2 * 3 * 2 * (D // H) * 2
    gpt2_small = LMConfig.gpt2_small()
    assert kv_cache_bytes_per_token(gpt2_small) == 73_728  # the docstring's figure
