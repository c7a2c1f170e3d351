import pytest
import torch
import torch.nn.functional as F
from helpers import max_abs_diff
from torch import nn

import transformer_lib as tl

B, T, D, H = 2, 5, 16, 4


def random_qkv(*lead, t_q=T, t_k=T, d_k=8, d_v=8):
    return torch.randn(*lead, t_q, d_k), torch.randn(*lead, t_k, d_k), torch.randn(*lead, t_k, d_v)


# --- scaled dot-product attention -----------------------------------------------------------------


def test_sdpa_equals_pytorch_without_and_with_mask():
    q, k, v = random_qkv(B, H)
    mask = tl.causal_mask(T) & tl.padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), 0)
    for m in (None, mask):
        out, _ = tl.scaled_dot_product_attention(q, k, v, m)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=m))


def test_sdpa_works_on_any_leading_dims_and_d_k_differs_from_d_v():
    q, k, v = random_qkv(2, 3, 4, t_q=5, t_k=7, d_k=6, d_v=3)
    out, weights = tl.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 5, 3)
    assert weights.shape == (2, 3, 4, 5, 7)


def test_sdpa_weights_rows_sum_to_one():
    _, weights = tl.scaled_dot_product_attention(*random_qkv(B, H))
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))


def test_sdpa_causal_weights_above_the_diagonal_are_zero():
    _, weights = tl.scaled_dot_product_attention(*random_qkv(B, H), mask=tl.causal_mask(T))
    above = ~torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.all(weights[..., above] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T))


def test_sdpa_fully_masked_row_gives_zero_weights_and_finite_gradients():
    q, k, v = (t.requires_grad_() for t in random_qkv(1))
    mask = torch.ones(1, T, T, dtype=torch.bool)  # one dim per score axis: (1, T_q, T_k)
    mask[:, 2] = False  # query 2 may attend to nothing
    out, weights = tl.scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[:, 2] == 0) and torch.all(out[:, 2] == 0)
    assert torch.isfinite(out).all()
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_sdpa_permuting_keys_and_values_together_leaves_output_unchanged():
    q, k, v = random_qkv(B, H)
    perm = torch.randperm(T)
    out, _ = tl.scaled_dot_product_attention(q, k, v)
    out_perm, _ = tl.scaled_dot_product_attention(q, k[..., perm, :], v[..., perm, :])
    torch.testing.assert_close(out, out_perm)


def test_sdpa_applies_dropout_to_the_weights():
    dropout = nn.Dropout(0.5).train()
    _, weights = tl.scaled_dot_product_attention(*random_qkv(B, H, t_q=50, t_k=50), dropout=dropout)
    assert (weights == 0).float().mean() > 0.3  # about half of the weights were dropped


# --- split and combine heads ----------------------------------------------------------------------


def test_split_heads_gives_each_head_a_consecutive_slice():
    x = torch.arange(2 * 3 * 8.0).view(2, 3, 8)  # (B, T, h * d)
    heads = tl.split_heads(x, num_heads=4)
    assert heads.shape == (2, 4, 3, 2)  # (B, h, T, d)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 4:6])  # head 2, token 0 = features 4..5 of token 0


def test_combine_heads_inverts_split_heads():
    x = torch.randn(B, T, D)
    assert torch.equal(tl.combine_heads(tl.split_heads(x, H)), x)


def test_split_heads_rejects_indivisible_width():
    with pytest.raises(ValueError, match="10 is not divisible by num_heads=3"):
        tl.split_heads(torch.randn(1, 2, 10), 3)


# --- multi-head attention -------------------------------------------------------------------------


@pytest.fixture
def pair():
    """Our MultiHeadAttention and nn.MultiheadAttention holding the same weights."""
    theirs = nn.MultiheadAttention(D, H, batch_first=True).eval()
    ours = tl.MultiHeadAttention(D, H).eval()
    tl.copy_from_torch(ours, theirs)
    return ours, theirs


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("masking", ["none", "causal", "padding", "both"])
def test_self_attention_equals_nn_multiheadattention(pair, need_weights, masking):
    ours, theirs = pair
    x = torch.randn(B, T, D)
    lengths = torch.tensor([T, 3])
    # (B, T): True at padding (PyTorch's convention)
    pad = torch.arange(T)[None, :] >= lengths[:, None]
    causal = masking in ("causal", "both")
    padded = masking in ("padding", "both")
    mask = None
    if causal:
        mask = tl.causal_mask(T)
    if padded:
        mask = (~pad)[:, None, None, :] if mask is None else mask & (~pad)[:, None, None, :]
    out, weights = ours(x, x, x, mask=mask, need_weights=need_weights)
    ref, ref_weights = theirs(
        x,
        x,
        x,
        key_padding_mask=pad if padded else None,
        attn_mask=~tl.causal_mask(T)[0, 0] if causal else None,
        need_weights=True,
        average_attn_weights=False,
    )
    assert max_abs_diff(out, ref) < 1e-5
    if need_weights:
        assert max_abs_diff(weights, ref_weights) < 1e-5
    else:
        assert weights is None


def test_cross_attention_equals_nn_multiheadattention(pair):
    ours, theirs = pair
    x, memory = torch.randn(B, 3, D), torch.randn(B, 7, D)
    pad = torch.zeros(B, 7, dtype=torch.bool)
    pad[1, 4:] = True
    out, _ = ours(x, memory, memory, mask=(~pad)[:, None, None, :])
    ref, _ = theirs(x, memory, memory, key_padding_mask=pad)
    assert max_abs_diff(out, ref) < 1e-5


def test_fast_and_explicit_paths_agree_with_pytorch_sdpa():
    mha = tl.MultiHeadAttention(D, H).eval()
    x = torch.randn(B, T, D)
    mask = tl.causal_mask(T)
    q, k, v = (tl.split_heads(w(x), H) for w in (mha.w_q, mha.w_k, mha.w_v))
    expected = mha.w_o(tl.combine_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)))
    fast, _ = mha(x, x, x, mask)
    explicit, _ = mha(x, x, x, mask, need_weights=True)
    assert max_abs_diff(fast, expected) < 1e-5
    assert max_abs_diff(explicit, expected) < 1e-5


def test_fully_masked_query_gives_zeros_on_both_paths():
    mha = tl.MultiHeadAttention(D, H).eval()
    x = torch.randn(1, T, D)
    mask = torch.ones(1, 1, T, T, dtype=torch.bool)
    mask[..., 1, :] = False
    fast, _ = mha(x, x, x, mask)
    explicit, _ = mha(x, x, x, mask, need_weights=True)
    torch.testing.assert_close(fast, explicit)
    torch.testing.assert_close(fast[0, 1], mha.w_o.bias)  # zero attention output, then W_O's bias


@pytest.mark.parametrize("need_weights", [False, True])
def test_gradients_reach_every_parameter(need_weights):
    mha = tl.MultiHeadAttention(D, H, d_k=3, d_v=5)
    x = torch.randn(B, T, D)
    out, _ = mha(x, x, x, tl.causal_mask(T), need_weights=need_weights)
    out.square().mean().backward()
    for name, p in mha.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_d_k_and_d_v_can_differ_from_d_model_over_h():
    mha = tl.MultiHeadAttention(d_model=10, num_heads=3, d_k=4, d_v=2)
    x = torch.randn(B, T, 10)
    out, weights = mha(x, x, x, need_weights=True)
    assert out.shape == (B, T, 10)
    assert weights.shape == (B, 3, T, T)
    assert (
        mha.w_q.weight.shape == (12, 10)
        and mha.w_v.weight.shape == (6, 10)
        and mha.w_o.weight.shape == (10, 6)
    )


def test_dropout_is_active_only_in_training():
    mha = tl.MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(B, T, D)
    mha.train()
    assert not torch.allclose(mha(x, x, x)[0], mha(x, x, x)[0])
    mha.eval()
    torch.testing.assert_close(mha(x, x, x)[0], mha(x, x, x)[0])


# --- clear errors for bad input -------------------------------------------------------------------


def test_error_d_model_not_divisible_by_num_heads():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        tl.MultiHeadAttention(10, 3)


def test_error_wrong_last_dimension():
    mha = tl.MultiHeadAttention(D, H)
    with pytest.raises(
        ValueError, match=r"query must be \(B, T, d_model=16\), got shape \(2, 5, 12\)"
    ):
        mha(torch.randn(B, T, 12), torch.randn(B, T, D), torch.randn(B, T, D))


def test_error_mask_of_wrong_dtype():
    mha = tl.MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    for need_weights in (False, True):
        with pytest.raises(
            TypeError, match="must have dtype torch.bool .True = may attend., got torch.float32"
        ):
            mha(x, x, x, mask=torch.ones(1, 1, T, T), need_weights=need_weights)


def test_error_mask_of_wrong_shape():
    mha = tl.MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    for need_weights in (False, True):
        with pytest.raises(
            ValueError,
            match=r"mask of shape \(2, 1, 1, 7\) cannot broadcast to scores \(2, 4, 5, 5\)",
        ):
            mha(x, x, x, mask=torch.ones(2, 1, 1, 7, dtype=torch.bool), need_weights=need_weights)


def test_error_query_and_key_widths_differ():
    with pytest.raises(
        ValueError, match=r"same width d_k: q is \(2, 5, 8\) \(d_k=8\), k is \(2, 5, 6\)"
    ):
        tl.scaled_dot_product_attention(
            torch.randn(2, 5, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 6)
        )


def test_error_keys_and_values_lengths_differ():
    with pytest.raises(ValueError, match="same length T_k"):
        tl.scaled_dot_product_attention(
            torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 4, 8)
        )


def test_error_empty_sequence():
    mha = tl.MultiHeadAttention(D, H)
    x = torch.randn(B, 0, D)
    for need_weights in (False, True):
        with pytest.raises(ValueError, match="empty sequence: T_q=0"):
            mha(x, x, x, need_weights=need_weights)


# --- the worked example, by hand ------------------------------------------------------------------


def test_worked_example_by_hand():
    """X is 3x4, h=2, d_k=2; W_Q = W_V = W_O = I and W_K = diag(1, 1, -1, -1), no biases.

    Head 1 sees features 0-1 of each token: a1=[1,0], a2=[0,1], a3=[1,1]; head 2 sees features 2-3,
    the same vectors, but its keys are negated. Scores are q.k / sqrt(2): head 1 row 1 is [1, 0,
    1]/1.4142 = [0.7071, 0, 0.7071]; exp gives [2.0281, 1, 2.0281], sum 5.0562, so weights [0.4011,
    0.1978, 0.4011] and output 0.4011*[1,0] + 0.1978*[0,1] + 0.4011*[1,1] = [0.8022, 0.5989]. The
    other rows follow the same way.
    """
    x = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]])[None]  # (1, 3, 4)
    mha = tl.MultiHeadAttention(d_model=4, num_heads=2, bias=False)
    with torch.no_grad():
        for linear in (mha.w_q, mha.w_v, mha.w_o):
            linear.weight.copy_(torch.eye(4))
        mha.w_k.weight.copy_(torch.diag(torch.tensor([1.0, 1, -1, -1])))
    out, weights = mha(x, x, x, need_weights=True)

    head1_weights = [[0.4011, 0.1978, 0.4011], [0.1978, 0.4011, 0.4011], [0.2483, 0.2483, 0.5035]]
    head2_weights = [[0.2483, 0.5035, 0.2483], [0.5035, 0.2483, 0.2483], [0.4011, 0.4011, 0.1978]]
    head1_out = [[0.8022, 0.5989], [0.5989, 0.8022], [0.7517, 0.7517]]
    head2_out = [[0.4965, 0.7517], [0.7517, 0.4965], [0.5989, 0.5989]]
    # concatenate heads; W_O = I
    expected_out = [h1 + h2 for h1, h2 in zip(head1_out, head2_out, strict=True)]

    torch.testing.assert_close(
        weights[0], torch.tensor([head1_weights, head2_weights]), atol=1e-4, rtol=0
    )
    torch.testing.assert_close(out[0], torch.tensor(expected_out), atol=1e-4, rtol=0)
