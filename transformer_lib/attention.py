"""Scaled dot-product attention, splitting and combining heads, and multi-head attention.

Shapes (GUIDE notation): tokens are ``(B, T, d_model)``, one head's tensors are ``(B, h, T, d_k)``, the
attention scores and weights are ``(B, h, T_q, T_k)``. Masks are bool, True = may attend, broadcastable to
the scores (see :mod:`transformer_lib.masks`).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .masks import check_mask

__all__ = ["scaled_dot_product_attention", "split_heads", "combine_heads", "MultiHeadAttention", "KVCache"]


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d_k)) v``, on any leading dimensions; returns ``(output, weights)``.

    Args:
        q: ``(..., T_q, d_k)`` queries.
        k: ``(..., T_k, d_k)`` keys.
        v: ``(..., T_k, d_v)`` values.
        mask: optional bool tensor, True = may attend, broadcastable to the scores ``(..., T_q, T_k)``.
            A query whose every key is masked gets all-zero weights (and a zero output), never NaN.
        dropout: optional module applied to the weights (the paper's attention dropout).

    Returns:
        ``output (..., T_q, d_v)`` and ``weights (..., T_q, T_k)``; each row of weights sums to 1 (or is 0).
    """
    _check_qkv(q, k, v)
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k): each row sums to 1
    if mask is not None:
        # softmax of an all -inf row is NaN; such a query may attend to nothing, so it gets zero weights.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Clear errors for the shape mistakes that otherwise surface as a matmul error deep in the stack."""
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(f"q, k, v must be at least (T, d); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.size(-1) != k.size(-1):
        raise ValueError(
            f"queries and keys must have the same width d_k: q is {tuple(q.shape)} (d_k={q.size(-1)}), "
            f"k is {tuple(k.shape)} (d_k={k.size(-1)})"
        )
    if k.size(-2) != v.size(-2):
        raise ValueError(f"keys and values must have the same length T_k: k is {tuple(k.shape)}, v is {tuple(v.shape)}")
    if q.size(-2) == 0 or k.size(-2) == 0:
        raise ValueError(f"empty sequence: T_q={q.size(-2)}, T_k={k.size(-2)}; attention needs T >= 1")


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, h * d)`` -> ``(B, h, T, d)``: give each head its own slice of the features.

    The reshape cuts the last axis into ``h`` consecutive chunks; the transpose brings the head axis next to
    the batch so every head attends independently over ``T``.
    """
    batch, length, width = x.shape
    if width % num_heads:
        raise ValueError(f"last dimension {width} is not divisible by num_heads={num_heads}")
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)  # (B, h, T, d)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, d)`` -> ``(B, T, h * d)``: the inverse of :func:`split_heads`.

    The transpose back to ``(B, T, h, d)`` must come *before* the reshape: reshaping ``(B, h, T, d)`` directly
    mixes different tokens into one vector (a classic silent bug, notebook 08).
    """
    batch, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * width)  # (B, T, h * d)


@dataclass
class KVCache:
    """One attention layer's keys and values ``(B, h, T_past, d_k)``, kept between decoding steps.

    ``static=False`` (self-attention): each call appends the new tokens' keys and values.
    ``static=True`` (cross-attention): the encoder memory's keys and values are computed once and reused.
    """

    static: bool = False
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search reorders its hypotheses each step)."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = Concat(head_1..head_h) W_O`` with ``head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)``.

    The ``h`` per-head projections are stored as one ``nn.Linear`` each for queries, keys and values (their
    weights are the per-head matrices stacked), which is the same function and one matmul instead of ``h``.

    Args:
        d_model: width of the token vectors.
        num_heads: ``h``.
        d_k, d_v: per-head widths of queries/keys and of values; default ``d_model // h``.
        dropout: dropout on the attention weights.
        bias: whether the four projections have a bias.

    ``forward`` returns ``(output, weights)``. With ``need_weights=False`` it takes PyTorch's fused
    ``F.scaled_dot_product_attention`` and returns ``weights=None``; with ``need_weights=True`` (or inside
    :func:`transformer_lib.capture_attention`) it runs the explicit path and returns ``(B, h, T_q, T_k)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_k: int | None = None,
        d_v: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        if d_model < 1 or num_heads < 1:
            raise ValueError(f"d_model and num_heads must be positive, got d_model={d_model}, num_heads={num_heads}")
        if (d_k is None or d_v is None) and d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                "choose another num_heads or give d_k and d_v explicitly"
            )
        self.d_model, self.num_heads = d_model, num_heads
        self.d_k = d_k if d_k is not None else d_model // num_heads
        self.d_v = d_v if d_v is not None else d_model // num_heads
        self.w_q = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.w_k = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, num_heads * self.d_v, bias=bias)
        self.w_o = nn.Linear(num_heads * self.d_v, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        # Set by capture_attention: when not None, forward takes the explicit path and appends its weights here.
        self.recorded_weights: list[torch.Tensor] | None = None

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query (B, T_q, d_model)`` to ``key``/``value (B, T_k, d_model)``.

        ``mask``: bool, True = may attend, broadcastable to ``(B, h, T_q, T_k)``.
        ``cache``: a :class:`KVCache` for step-by-step decoding (``T_k`` then counts the cached positions).
        Returns ``output (B, T_q, d_model)`` and ``weights (B, h, T_q, T_k)`` or ``None``.
        """
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.size(-1) != self.d_model:
                raise ValueError(f"{name} must be (B, T, d_model={self.d_model}), got shape {tuple(x.shape)}")
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, T_q, d_k)
        k, v = self._keys_and_values(key, value, cache)  # (B, h, T_k, d_k), (B, h, T_k, d_v)
        explicit = need_weights or self.recorded_weights is not None
        if explicit:
            out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)  # (B, h, T_q, d_v)
            if self.recorded_weights is not None:
                self.recorded_weights.append(weights.detach())
        else:
            out, weights = self._fused_attention(q, k, v, mask), None  # (B, h, T_q, d_v)
        out = self.w_o(combine_heads(out))  # (B, T_q, d_model)
        return out, (weights if need_weights else None)

    def _keys_and_values(
        self, key: torch.Tensor, value: torch.Tensor, cache: KVCache | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Project keys and values into heads, reusing or extending ``cache`` when decoding step by step."""
        if cache is not None and cache.static and cache.k is not None:
            return cache.k, cache.v
        k = split_heads(self.w_k(key), self.num_heads)  # (B, h, T_new, d_k)
        v = split_heads(self.w_v(value), self.num_heads)  # (B, h, T_new, d_v)
        if cache is not None:
            if cache.k is not None:
                k = torch.cat([cache.k, k], dim=2)  # (B, h, T_past + T_new, d_k)
                v = torch.cat([cache.v, v], dim=2)
            cache.k, cache.v = k, v
        return k, v

    def _fused_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """PyTorch's fused kernel; the same function as the explicit path, without materialising weights."""
        _check_qkv(q, k, v)
        if mask is not None:
            check_mask(mask, (*q.shape[:-1], k.size(-2)))
        p = self.dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, h, T_q, d_v)
        if mask is not None:
            # Same rule as the explicit path on every backend: a query with no allowed key outputs zeros.
            out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return out
