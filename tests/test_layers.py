import math

import pytest
import torch
from torch import nn

import transformer_lib as tl


def test_layer_norm_from_scratch_equals_nn_layernorm():
    theirs = nn.LayerNorm(16)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = tl.LayerNorm(16)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 5, 16) * 4 + 2
    torch.testing.assert_close(ours(x), theirs(x))


def test_layer_norm_equals_the_textbook_form_and_its_gradients():
    ln = tl.LayerNorm(16)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    x = (torch.randn(3, 5, 16, dtype=torch.float64) * 4 + 2).requires_grad_()
    ln = ln.double()
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    textbook = (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias
    ours = ln(x)
    torch.testing.assert_close(ours, textbook, rtol=0, atol=1e-6)
    upstream = torch.randn_like(ours)
    expected = torch.autograd.grad(textbook, [x, ln.weight, ln.bias], upstream)
    got = torch.autograd.grad(ours, [x, ln.weight, ln.bias], upstream)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6)
    # and in float32, the dtype the models train in
    x32 = torch.randn(4, 7, 16) * 3 - 1
    ln32 = ln.float()
    mean, var = x32.mean(-1, keepdim=True), x32.var(-1, unbiased=False, keepdim=True)
    textbook32 = (x32 - mean) / torch.sqrt(var + ln32.eps) * ln32.weight + ln32.bias
    torch.testing.assert_close(ln32(x32), textbook32, rtol=0, atol=1e-5)


def test_feed_forward_is_two_linears_around_a_relu():
    ffn = tl.PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 3, 8)
    expected = ffn.linear2(torch.relu(ffn.linear1(x)))
    torch.testing.assert_close(ffn(x), expected)
    # position-wise: each position is transformed on its own
    torch.testing.assert_close(ffn(x)[:, 1:2], ffn(x[:, 1:2]))


@pytest.mark.parametrize("norm_first", [False, True])
def test_residual_sublayer_post_and_pre_ln(norm_first):
    block = tl.ResidualSublayer(8, dropout=0.0, norm_first=norm_first)
    linear = nn.Linear(8, 8)
    x = torch.randn(2, 3, 8)
    expected = x + linear(block.norm(x)) if norm_first else block.norm(x + linear(x))
    torch.testing.assert_close(block(x, linear), expected)


def test_token_embedding_scales_by_sqrt_d_model():
    embed = tl.TokenEmbedding(10, 16)
    tokens = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(embed(tokens), embed.weight[tokens] * 4.0)


def test_token_embedding_names_the_valid_id_range():
    with pytest.raises(ValueError, match=r"tokens must lie in \[0, 10\), got min=0, max=12"):
        tl.TokenEmbedding(10, 16)(torch.tensor([[0, 12]]))


def test_positional_encoding_differs_along_sequence_and_is_identical_across_batch():
    pe = tl.PositionalEncoding(16, max_len=50, dropout=0.0)
    out = pe(torch.zeros(3, 10, 16))  # (B, T, d_model): just the encodings
    assert not torch.allclose(out[:, 0], out[:, 1])
    for t in range(10):
        for s in range(t):
            assert not torch.allclose(out[0, t], out[0, s])
    assert torch.equal(out[0], out[1]) and torch.equal(out[0], out[2])


def test_positional_encoding_values_match_the_paper_formula():
    pe = tl.sinusoidal_encoding(8, 20)
    pos, i = 7, 2  # feature pair (4, 5)
    angle = pos / 10000 ** (2 * i / 8)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_positional_encoding_shift_is_a_fixed_rotation_per_frequency_pair():
    d_model, k = 16, 5
    pe = tl.sinusoidal_encoding(d_model, 100)
    for i in range(d_model // 2):
        w = 10000 ** (-2 * i / d_model)
        # sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b, for row
        # vectors:
        rotation = torch.tensor(
            [[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]]
        )
        pair = pe[:, 2 * i : 2 * i + 2]  # (positions, 2): (sin, cos) of pos * w
        shifted = pair[:-k] @ rotation  # the same map for every position
        torch.testing.assert_close(shifted, pair[k:], atol=1e-4, rtol=0)


def test_positional_encoding_handles_odd_widths_and_names_max_len():
    assert tl.sinusoidal_encoding(7, 5).shape == (5, 7)  # (max_len, d_model)
    with pytest.raises(ValueError, match="exceed max_len=4"):
        tl.PositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8))


# --- options for GPT-2, BERT and MarianMT (defaults: the paper) -----------------------------------


@pytest.mark.parametrize(
    "activation, formula",
    [
        ("relu", lambda h: h.clamp(min=0)),
        ("gelu", lambda h: 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))),
        (
            "gelu_tanh",
            lambda h: 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3))),
        ),
        ("silu", lambda h: h * torch.sigmoid(h)),
    ],
)
def test_feed_forward_activation_is_the_named_formula(activation, formula):
    ffn = tl.PositionwiseFeedForward(8, 32, activation=activation)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), ffn.linear2(formula(ffn.linear1(x))))


def test_feed_forward_names_the_known_activations():
    known = r"\('relu', 'gelu', 'gelu_tanh', 'silu', 'swiglu'\)"
    with pytest.raises(ValueError, match=rf"activation must be one of {known}, got"):
        tl.PositionwiseFeedForward(8, 32, activation="swish")


def test_token_embedding_without_scale_returns_the_stored_rows():
    embed = tl.TokenEmbedding(10, 16, scale=False)
    tokens = torch.tensor([[1, 2, 3]])
    assert torch.equal(embed(tokens), embed.weight[tokens])


def test_no_padding_index_means_no_zero_row():
    embed = tl.TokenEmbedding(10, 16, padding_idx=None)
    assert embed.embedding.padding_idx is None and embed.weight.abs().sum(dim=1).min() > 0


@pytest.mark.parametrize("d_model", [8, 9])
def test_sinusoid_halves_layout_puts_every_sine_first(d_model):
    interleaved = tl.sinusoidal_encoding(d_model, 20)  # (20, d_model)
    halves = tl.sinusoidal_encoding(d_model, 20, layout="halves")
    sines = (d_model + 1) // 2
    assert torch.equal(halves[:, :sines], interleaved[:, 0::2])  # sin(pos * w_i), i = 0, 1, ...
    assert torch.equal(halves[:, sines:], interleaved[:, 1::2])  # cos(pos * w_i)
    with pytest.raises(
        ValueError, match=r"layout must be one of \('interleaved', 'halves'\), got layout='split'"
    ):
        tl.sinusoidal_encoding(d_model, 20, layout="split")


@pytest.mark.parametrize("learned", [False, True])
def test_embedding_norm_normalises_token_plus_position_before_dropout(learned):
    torch.manual_seed(0)
    kind = tl.layers.LearnedPositionalEncoding if learned else tl.PositionalEncoding
    plain, normed = kind(16, 20, dropout=0.0), kind(16, 20, dropout=0.0, norm=True, eps=1e-12)
    # the same table (learned) plus a fresh norm
    normed.load_state_dict(plain.state_dict(), strict=False)
    assert plain.norm is None and normed.norm.eps == 1e-12
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(normed(x), normed.norm(plain(x)))
    out = normed(x)
    # LayerNorm's gain 1, shift 0
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    normed.train()
    normed.dropout.p = 0.5
    assert (normed(x) == 0).any()  # dropout still comes last


def test_residual_sublayer_takes_its_norms_eps():
    assert tl.ResidualSublayer(8, eps=1e-12).norm.eps == 1e-12
    assert tl.ResidualSublayer(8).norm.eps == 1e-5  # nn.LayerNorm's, the default


def test_block_options_are_one_record_that_layers_take_or_change_by_keyword():
    from transformer_lib.model.layers import BlockOptions

    options = BlockOptions(dropout=0.0, norm_first=True, norm="rmsnorm", activation="gelu")
    by_record = tl.EncoderLayer(16, 4, 32, options)
    by_keyword = tl.EncoderLayer(
        16, 4, 32, dropout=0.0, norm_first=True, norm="rmsnorm", activation="gelu"
    )
    assert repr(by_record) == repr(by_keyword)
    assert by_record.residual_ff.norm_first and isinstance(by_record.residual_ff.norm, tl.RMSNorm)
    stack = tl.Decoder(2, 16, 4, 32, options, bias=False)  # a keyword changes a field of the record
    assert all(m.bias is None for m in stack.modules() if isinstance(m, nn.Linear))
    assert isinstance(stack.final_norm, tl.RMSNorm) and options.bias  # the record is unchanged
    with pytest.raises(TypeError, match="options must be a BlockOptions, got float"):
        tl.EncoderLayer(16, 4, 32, 0.1)  # dropout passed where the record goes
    with pytest.raises(TypeError, match="unexpected keyword argument 'dropuot'"):
        tl.EncoderLayer(16, 4, 32, dropuot=0.0)
