"""Notebook 01 · attention: scaled dot-product attention and the causal mask."""

import math

import torch

import transformer_lib as tl


def my_attention(q, k, v, mask=None):
    """``softmax(q k^T / sqrt(d_k)) v`` over the last axis; ``mask`` bool, True = may attend."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # each query's row sums to 1
    if mask is not None:
        # a query that may see no key: zeros, not softmax's NaN
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def my_causal_mask(size):
    """``(T, T)`` bool, True where query ``i`` may see key ``j <= i``."""
    return torch.ones(size, size, dtype=torch.bool).tril()


ANSWERS = {
    "3": (
        "The score is a dot product, not a cosine: x_i . x_j = |x_i| |x_j| cos(angle), while a "
        "token's score with "
        "itself is |x_i|^2. In the worked example x2 = x0 + x1 and x0 . x1 = 0, so x0 . x2 = x0 . "
        "x0 + x0 . x1 = 2 "
        "= x0 . x0: query 0 scores key 2 exactly as high as its own key, and the softmax gives "
        "both 0.4223 (the "
        "same for query 1). By Cauchy-Schwarz x_i . x_j <= |x_i| |x_j|, so another key ties with "
        "or beats a "
        "token's own key only if it is at least as long and points roughly the same way (at equal "
        "length only "
        "x_j = x_i ties); token 2 is the longest (|x2|^2 = 4), so it wins its own row. With "
        "learned projections "
        "the score is q_i . k_j = x_i W_Q W_K^T x_j^T; with W_Q != W_K the matrix W_Q W_K^T need "
        "be neither "
        "symmetric nor positive definite, so nothing favours j = i: a head can learn to attend to "
        "the previous "
        "token, say, and the score of i with j can differ from that of j with i."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_attention": (
        lambda q, k, v, mask=None: tl.scaled_dot_product_attention(
            q, k, v, ~mask if mask is not None else None
        ),
        "opposite polarity",
    ),
    "my_causal_mask": (lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
}
