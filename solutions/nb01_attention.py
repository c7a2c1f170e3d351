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
        "With Q = K = V = X the score of query i for key j is the dot product x_i . x_j = |x_i| |x_j| cos(angle). "
        "Its own key scores |x_i|^2; another key scores more when |x_j| cos(angle) > |x_i|, i.e. when x_j is longer "
        "and points roughly the same way. In step 3, x0 . x0 equals x0 . x2, so the two keys tie (0.4223 each): a dot "
        "product is not a cosine, and length counts. With learned projections the score is x_i W^Q (x_j W^K)^T = "
        "x_i W^Q W^K^T x_j^T; with W^Q != W^K the matrix W^Q W^K^T need not be symmetric or positive definite, so "
        "nothing favours a token's own key: a head can learn to attend to the previous token, say, or to a "
        "particular kind of token, and the scores of i for j and of j for i can differ."
    ),
}
