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
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 10\), got min=0, max=12"):
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
        # sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b, for row vectors:
        rotation = torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
        pair = pe[:, 2 * i : 2 * i + 2]  # (positions, 2): (sin, cos) of pos * w
        shifted = pair[:-k] @ rotation  # the same map for every position
        torch.testing.assert_close(shifted, pair[k:], atol=1e-4, rtol=0)


def test_positional_encoding_handles_odd_widths_and_names_max_len():
    assert tl.sinusoidal_encoding(7, 5).shape == (5, 7)  # (max_len, d_model)
    with pytest.raises(ValueError, match="exceed max_len=4"):
        tl.PositionalEncoding(8, max_len=4)(torch.zeros(1, 5, 8))
