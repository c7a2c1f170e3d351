"""Notebook 13 · the modern decoder: RMSNorm, rotary attention, SwiGLU's hidden width, grouped-query
heads, a cache budget."""

import math

import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib as tl


class MyRMSNorm(nn.Module):
    """Divide each token by its root mean square over the features (no mean subtracted), then scale;
    no shift."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gain

    def forward(self, x):
        mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x / torch.sqrt(mean_square + self.eps) * self.weight


def my_rotary_attention(q, k, v, start, theta):
    """Rotate the queries (positions start..start+T_q-1) and the keys (0..T_k-1), not the values;
    then causal attention of the new queries over every key."""
    t_q, t_k = q.size(2), k.size(2)
    q = tl.apply_rope(q, torch.arange(start, start + t_q), theta)  # (B, h, T_q, d_k)
    k = tl.apply_rope(k, torch.arange(t_k), theta)  # (B, h, T_k, d_k)
    return tl.scaled_dot_product_attention(q, k, v, tl.causal_mask(t_q, t_k))[0]  # (B, h, T_q, d_k)


class MySwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))``: three bias-free matrices. (No longer an exercise: section 3
    builds it; ``tl.checks.check_swiglu`` and its tests still use it.)"""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))  # (B, T, d_model)


def my_swiglu_width(d_model, d_ff, multiple_of):
    """The multiple of ``multiple_of`` (at least ``multiple_of``) whose bias-free SwiGLU block,
    ``3 d_model width`` parameters, is closest to the bias-free ReLU block's ``2 d_model d_ff``:
    of the multiples just below and just above ``2 d_ff / 3``, the closer; the smaller on a tie."""
    relu = 2 * d_model * d_ff
    below = max(multiple_of, (2 * d_ff // 3) // multiple_of * multiple_of)
    return min((below, below + multiple_of), key=lambda w: (abs(3 * d_model * w - relu), w))


def my_repeat_kv(x, num_heads):
    """``(B, h_kv, T, d) -> (B, num_heads, T, d)``: each key/value head serves num_heads // h_kv
    consecutive query heads: a new axis of g = num_heads // h_kv copies after h_kv (before it, the
    heads would tile 0, 1, 0, 1), merged with h_kv by one reshape."""
    batch, h_kv, length, d = x.shape
    g = num_heads // h_kv
    # (B, h_kv, g, T, d): a view, no copy until the reshape
    grouped = x[:, :, None].expand(batch, h_kv, g, length, d)
    return grouped.reshape(batch, num_heads, length, d)  # (B, num_heads, T, d)


def my_kv_heads_for_budget(config, budget_bytes, dtype):
    """The most key/value heads that divide ``num_heads`` and whose cache grows by at most
    ``budget_bytes`` per token."""
    fits = [
        k
        for k in range(1, config.num_heads + 1)
        if config.num_heads % k == 0
        and tl.kv_cache_bytes_per_token(config.replace(n_kv_heads=k), dtype) <= budget_bytes
    ]
    if not fits:
        one_head = tl.kv_cache_bytes_per_token(config.replace(n_kv_heads=1), dtype)
        raise ValueError(
            f"expected a budget of at least {one_head} bytes per token (one key/value head), "
            f"got {budget_bytes}"
        )
    return max(fits)


ANSWERS = {
    "6": (
        "Section 6 changes six things at once (the norm, its place with the modern block's final "
        "norm, the positions, the feed-forward, the biases, and the scaling of the embeddings), so "
        "its difference belongs to the bundle. To attribute it, run an ablation: start from the "
        "modern block and switch back one piece at a time (RMSNorm -> LayerNorm, pre-norm -> "
        "post-norm, rotary -> sinusoidal, SwiGLU -> ReLU at equal parameters, no biases -> biases, "
        "unscaled -> scaled embeddings), and also the other way, from the paper's block switching "
        "one piece forward, because the pieces interact (post-LN without warm-up behaves "
        "differently from pre-norm, so the effect of a piece can depend on the others). That is 2 "
        "x 6 = 12 variants plus the two ends, each at 3 seeds at least: 42 runs, with the same "
        "data, steps and optimizer. Section 2 already is one such ablation (positions alone, "
        "inside the modern block); a factorial design (2^6 = 64 combinations) would measure the "
        "interactions too. Report each difference with its spread and a test that fits the design "
        "(runs paired by seed: a paired test), and keep the tuned "
        "hyperparameters fixed or tune each variant equally, else the ablation measures the tuning."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _MeanSubtracted(MyRMSNorm):
    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _values_rotated(q, k, v, start, theta):
    t_q, t_k = q.size(2), k.size(2)
    q = tl.apply_rope(q, torch.arange(start, start + t_q), theta)
    k, v = (tl.apply_rope(t, torch.arange(t_k), theta) for t in (k, v))
    return tl.scaled_dot_product_attention(q, k, v, tl.causal_mask(t_q, t_k))[0]


def _tiled(x, num_heads):
    return x.repeat(1, num_heads // x.size(1), 1, 1)


def _not_a_divisor(config, budget_bytes, dtype):
    per_head = tl.kv_cache_bytes_per_token(config.replace(n_kv_heads=1), dtype)
    return min(config.num_heads, budget_bytes // per_head)


WRONG_ANSWERS = {
    "MyRMSNorm": (_MeanSubtracted, "you subtracted the mean"),
    "my_rotary_attention": (_values_rotated, "the values were rotated too"),
    "my_swiglu_width": (lambda d, d_ff, m: m * math.ceil(8 / 3 * d / m), "Llama rule"),
    "my_repeat_kv": (_tiled, "the order 0, 1, 0, 1"),
    "my_kv_heads_for_budget": (_not_a_divisor, "does not divide num_heads"),
}
