"""Notebook 01 · attention: scaled dot-product attention and the causal mask."""

import math

import torch


def my_attention(q, k, v, mask=None):
    """``softmax(q k^T / sqrt(d_k)) v`` over the last axis; ``mask`` bool, True = may attend."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # each query's row sums to 1
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def my_causal_mask(size):
    """``(T, T)`` bool, True where query ``i`` may see key ``j <= i``."""
    return torch.ones(size, size, dtype=torch.bool).tril()


ANSWERS = {
    "3": (
        "With Q = K = V = X a token's score with itself is |x_i|^2, and its score with token j is x_i . x_j = "
        "|x_i| |x_j| cos(angle): token i attends most to itself only when no other token has a larger projection "
        "onto x_i, i.e. |x_j| cos(angle) < |x_i|. A longer vector pointing roughly the same way wins: that is why "
        "rows of the worked example can tie with, or prefer, another token. Learned projections W_Q and W_K make "
        "the score q_i . k_j = x_i W_Q W_K^T x_j^T, which need not be largest at j = i (W_Q W_K^T is not "
        "positive definite in general): a head can learn to attend to the previous token, say."
    ),
}
