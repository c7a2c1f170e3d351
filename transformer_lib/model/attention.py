"""Scaled dot-product attention, splitting and combining heads, and multi-head attention.

Shapes (notation: NOTATION.md): tokens are ``(B, T, d_model)``, one head's tensors are
``(B, h, T, d_k)``, the attention scores and weights are ``(B, h, T_q, T_k)``. Masks are bool, True
= may attend, with one dim per score axis (see :mod:`transformer_lib.model.masks`).

What happens when (the rules every function here keeps; tests/test_bad_inputs.py holds them):

- a mask of the wrong rank, dtype, shape or device raises before any arithmetic (a ``(B, T_k)``
  padding mask can never be mistaken for ``(T_q, T_k)``);
- a key or value that the mask hides never reaches the output, not even as NaN (``0 * NaN`` is NaN,
  so hidden rows are replaced by zeros before the products); a query that may attend to nothing
  outputs zeros;
- NaN or infinity in a visible input propagates to the output, as in PyTorch: it is the caller's
  data;
- integer or mixed dtypes raise a TypeError that names them; fp16/bf16 scores are scaled before the
  product and normalised in fp32, so they overflow only where PyTorch's own kernel does.
"""

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .._arguments import (
    UNSET,
    check_attention_inputs,
    check_heads,
    check_positive_ints,
    check_qkv,
    renamed,
)

__all__ = [
    "scaled_dot_product_attention",
    "split_heads",
    "combine_heads",
    "apply_rope",
    "MultiHeadAttention",
    "KVCache",
    "DecoderCache",
    "kv_cache_bytes_per_token",
]


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
        mask: optional bool tensor, True = may attend, with the scores' rank and broadcastable to
            them ``(..., T_q, T_k)``: for 4-D scores a padding mask is ``(B, 1, 1, T_k)`` and a
            causal mask ``(1, 1, T_q, T_k)``. A query whose every key is masked gets all-zero
            weights and a zero output; a key that no query may see cannot reach the output, even if
            it holds NaN.
        dropout: optional module applied to the weights (the paper's attention dropout).

    Returns:
        ``output (..., T_q, d_v)`` and ``weights (..., T_q, T_k)``; each row of weights sums to 1
        (or is 0).

    ``q`` is multiplied by ``1/sqrt(d_k)`` *before* the product: the same scores, but in fp16 they
    stay in range wherever the scaled scores do (``q k^T`` itself can pass fp16's 65504 when the
    scores do not). The softmax runs in at least fp32 for the same reason.
    """
    check_qkv(q, k, v, mask)
    if mask is not None:
        q, k, v = _zero_hidden(q, k, v, mask)
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)  # at least fp32
    weights = scores.softmax(dim=-1, dtype=softmax_dtype).to(q.dtype)  # (..., T_q, T_k)
    if mask is not None:
        # softmax of an all -inf row is NaN; a query that may attend to nothing gets zero weights
        no_key = ~mask.any(dim=-1, keepdim=True)  # (..., T_q, 1)
        weights = weights.masked_fill(no_key, 0.0)  # (..., T_q, T_k): rows sum to 1 or 0
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def _zero_hidden(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, keys: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The library's one NaN guard: zero the queries that may attend to nothing and (with ``keys``)
    the keys and values that no query may attend to.

    Their weights are 0 anyway, but ``0 * NaN = NaN``: without this, a NaN in a padded position
    would reach every output and gradient of its sequence. Elementwise: no extra matmul, no sync.

    Args:
        q: ``(..., T_q, d)`` per-head queries, or the token vectors ``(B, T, d_model)`` before the
            projections (then ``mask`` is reduced over the heads).
        k: ``(..., T_k, d)`` keys, in the same form as ``q``.
        v: ``(..., T_k, d_v)`` values, in the same form as ``q``.
        mask: bool, True = may attend, ``(..., T_q, T_k)`` with the tensors' rank.
        keys: False when ``k``, ``v`` hold only the newest keys of a longer, cached sequence.

    Returns:
        ``q``, ``k``, ``v`` with the hidden rows zeroed (``k`` and ``v`` unchanged when ``keys`` is
        False).
    """
    q = torch.where(mask.any(dim=-1, keepdim=True), q, 0.0)  # (..., T_q, d)
    if not keys:
        return q, k, v
    key_is_seen = mask.any(dim=-2)[..., None]  # (..., T_k, 1)
    return q, torch.where(key_is_seen, k, 0.0), torch.where(key_is_seen, v, 0.0)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, h * d)`` -> ``(B, h, T, d)``: give each head its own slice of the features.

    The reshape cuts the last axis into ``h`` consecutive chunks; the transpose brings the head axis
    next to the batch so every head attends independently over ``T``.
    """
    check_positive_ints(num_heads=num_heads)
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"split_heads expects x of shape (B, T, h * d), got {got}")
    batch, length, width = x.shape
    if width % num_heads:
        raise ValueError(f"last dimension {width} is not divisible by num_heads={num_heads}")
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)  # (B, h, T, d)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, d)`` -> ``(B, T, h * d)``: the inverse of :func:`split_heads`.

    The transpose back to ``(B, T, h, d)`` must come *before* the reshape: reshaping
    ``(B, h, T, d)`` directly mixes different tokens into one vector (a classic silent bug, notebook
    08).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"combine_heads expects x of shape (B, h, T, d), got {got}")
    batch, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * width)  # (B, T, h * d)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021, "RoFormer"): rotate each pair of features of
    ``x (B, h, T, d_k)`` by an angle proportional to the token's position; ``positions (T,)`` holds
    those positions (integers).

    Pair ``i`` is the features ``(2i, 2i+1)`` (the interleaved layout of RoFormer and Meta's Llama,
    the same pairs as the paper's sinusoids) and turns at frequency ``w_i = theta^(-2i/d_k)``::

        feature 2i+1  ^                      x'_2i   = x_2i cos(m w_i) - x_2i+1 sin(m w_i)
                      |     * x' (position m) x'_2i+1 = x_2i sin(m w_i) + x_2i+1 cos(m w_i)
                      |    /
                      |   /  m w_i
                      |  /______ * x (as projected)
                      +------------------> feature 2i

    Rotating a query at position ``m`` and a key at position ``n`` turns their dot product, pair by
    pair, into a function of ``(m - n) w_i``: the attention score sees only the offset, never the
    absolute positions, and the values are left alone. ``d_k`` must be even. Hugging Face's Llama
    pairs feature ``i`` with ``i + d_k/2`` instead ("rotate half"); ``interop`` permutes its query
    and key rows when copying (see ``_rope_rows``).
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.size(-1) % 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(
            f"apply_rope expects x of shape (B, h, T, d_k) with an even d_k, got {got}"
        )
    if not isinstance(positions, torch.Tensor) or positions.shape != (x.size(2),):
        got = (
            tuple(positions.shape)
            if isinstance(positions, torch.Tensor)
            else type(positions).__name__
        )
        raise ValueError(
            f"positions must be a (T,) tensor, T={x.size(2)} as in x {tuple(x.shape)}, got {got}"
        )
    d_k = x.size(-1)
    exponents = torch.arange(0, d_k, 2, device=x.device, dtype=torch.float32) / d_k  # (d_k/2,)
    frequency = 1.0 / (theta**exponents)  # (d_k/2,)
    angles = positions.to(x.device, torch.float32)[:, None] * frequency  # (T, d_k/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (T, d_k/2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (B, h, T, d_k/2) each: a pair's two coordinates
    rotated = torch.stack(  # (B, h, T, d_k/2, 2)
        [even * cos - odd * sin, even * sin + odd * cos], dim=-1
    )
    return rotated.flatten(-2)  # (B, h, T, d_k): pairs back in place


@dataclass
class KVCache:
    """One attention layer's keys and values ``(B, h_kv, T_past, d_k)``, kept between decoding
    steps.

    ``static=False`` (self-attention): each call appends the new tokens' keys and values.
    ``static=True`` (cross-attention): the encoder memory's keys and values are computed once and
    reused. It holds the ``h_kv`` key/value heads (fewer than ``h`` with grouped-query attention),
    and with rotary positions the keys already rotated, so nothing stored is recomputed.
    :func:`kv_cache_bytes_per_token` gives its size.
    """

    static: bool = False
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` (beam search reorders its hypotheses each step)."""
        if self.k is not None:
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)


@dataclass
class DecoderCache:
    """What a decoder keeps between generation steps, so that each step runs only the new tokens.

    ``layers``: per layer, the self-attention's :class:`KVCache` of the tokens so far. ``cross``:
    per layer, the cross-attention's static :class:`KVCache` of the encoder's memory (none in a
    decoder-only language model). ``length``: the tokens held, so the next ones start at that
    position. One type for the encoder-decoder and the language models, so that one generation loop
    and one beam-search reorder serve both (:mod:`transformer_lib.applications.decode`). Make it
    with ``model.new_cache()``.
    """

    layers: list[KVCache] = field(default_factory=list)
    cross: list[KVCache] = field(default_factory=list)
    length: int = 0

    @classmethod
    def empty(cls, num_layers: int, cross_attention: bool = True) -> "DecoderCache":
        """An empty cache of ``num_layers`` layers (no cross-attention for a decoder-only LM)."""
        cross = [KVCache(static=True) for _ in range(num_layers)] if cross_attention else []
        return cls([KVCache() for _ in range(num_layers)], cross)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` in every layer (beam search follows its chosen prefixes)."""
        for cache in self.layers + self.cross:
            cache.reorder(index)

    def check_fits(self, stack: str, num_layers: int, cross_attention: bool) -> None:
        """Raise unless the cache has a :class:`KVCache` per attention of the ``num_layers`` layers
        of ``stack`` (named in the error), with a cross-attention in each if ``cross_attention``."""
        cross, held = (num_layers if cross_attention else 0), len(self.cross)
        if len(self.layers) != num_layers:
            wrong = f"the cache holds {len(self.layers)} layers but the {stack} has {num_layers}"
        elif held != cross:
            wrong = f"the cache holds {held} cross-attention layers but the {stack} has {cross}"
        else:
            return
        raise ValueError(f"{wrong}: make the cache with model.new_cache() of the model it serves")


def kv_cache_bytes_per_token(config, dtype: torch.dtype = torch.float32) -> int:
    """Bytes the decoding cache grows by per generated token:
    ``layers * h_kv * (d_k + d_v) * bytes(dtype)``.

    ``config`` is an ``LMConfig`` (its ``num_layers``) or a ``TransformerConfig`` (its decoder's
    layers; the cross-attention cache is per *source* token and is left out). ``h_kv`` is
    ``n_kv_heads`` (``num_heads`` when unset); ``d_k`` and ``d_v`` are the config's
    (``d_model // num_heads`` unless set). GPT-2 small's numbers: NOTATION.md.
    """
    layers = getattr(config, "decoder_layers", config.num_layers)
    kv_heads = config.n_kv_heads if config.n_kv_heads is not None else config.num_heads
    widths = sum(
        w if w is not None else config.d_model // config.num_heads for w in (config.d_k, config.d_v)
    )
    return layers * kv_heads * widths * torch.empty((), dtype=dtype).element_size()


class MultiHeadAttention(nn.Module):
    r"""``MultiHead(Q, K, V) = Concat(head_1..head_h) W_O`` with
    ``head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i)``.

    The ``h`` per-head projections are stored as one ``nn.Linear`` each for queries, keys and values
    (their weights are the per-head matrices stacked), which is the same function and one matmul
    instead of ``h``.

    Args:
        d_model: width of the token vectors.
        num_heads: ``h``.
        d_k, d_v: per-head widths of queries/keys and of values; default ``d_model // h``.
        dropout: dropout on the attention weights.
        bias: whether the four projections have a bias.
        n_kv_heads: ``h_kv``, the key/value heads (grouped-query attention, Ainslie et al. 2023,
            "GQA"); ``None``: ``h``, the paper's. Each group of ``h / h_kv`` query heads shares one
            key/value head::

                h=4, h_kv=4 (multi-head)   h=4, h_kv=2 (grouped-query)   h=4, h_kv=1 (multi-query)
                q: 0  1  2  3              q: 0  1  2  3                 q: 0  1  2  3
                   |  |  |  |                 \ /   \ /                    \  \ /  /
                k,v: 0  1  2  3            k,v: 0     1                  k,v:    0

            ``w_k`` and ``w_v`` (and the cache) shrink by ``h / h_kv``; the heads are repeated just
            before the scores. ``num_kv_heads``, its old name, still works and warns
            (DeprecationWarning).
        rope_theta: ``None`` (default): no rotation. A number: rotary positions (:func:`apply_rope`
            with this ``theta``) on the queries and keys after the head split; with a cache, the new
            tokens' positions start at the cached length.

    ``forward`` returns ``(output, weights)``. With ``need_weights=False`` it takes PyTorch's fused
    ``F.scaled_dot_product_attention`` and returns ``weights=None``; with ``need_weights=True`` (or
    inside :func:`transformer_lib.capture_attention`) it runs the explicit path and returns
    ``(B, h, T_q, T_k)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_k: int | None = None,
        d_v: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        n_kv_heads: int | None = None,
        rope_theta: float | None = None,
        *,
        num_kv_heads: int | None = UNSET,
    ):
        super().__init__()
        old, new = "num_kv_heads", "n_kv_heads"
        n_kv_heads = renamed("MultiHeadAttention", old, new, num_kv_heads, n_kv_heads)
        rope = rope_theta is not None
        check_heads(d_model, num_heads, n_kv_heads, d_k, d_v, rope)
        n_kv_heads = num_heads if n_kv_heads is None else n_kv_heads
        self.d_model, self.num_heads, self.n_kv_heads = d_model, num_heads, n_kv_heads
        self.d_k = d_k if d_k is not None else d_model // num_heads
        self.d_v = d_v if d_v is not None else d_model // num_heads
        self.rope_theta = rope_theta
        self.w_q = nn.Linear(d_model, num_heads * self.d_k, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_v, bias=bias)
        self.w_o = nn.Linear(num_heads * self.d_v, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        # Set by capture_attention: when not None, forward takes the explicit path and appends its
        # weights here.
        self.recorded_weights: list[torch.Tensor] | None = None

    @property
    def num_kv_heads(self) -> int:
        """The old name of :attr:`n_kv_heads` (deprecated; warns)."""
        renamed("MultiHeadAttention", "num_kv_heads", "n_kv_heads", self.n_kv_heads, None)
        return self.n_kv_heads

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

        Inputs must be floating point, of one dtype, that of the weights (or any, under
        ``torch.autocast``), with one batch size; see the module docstring for masks and NaN.

        Args:
            query: ``(B, T_q, d_model)``.
            key: ``(B, T_k, d_model)``.
            value: ``(B, T_k, d_model)``.
            mask: bool, True = may attend, 4-D and broadcastable to ``(B, h, T_q, T_k)``: a padding
                mask ``(B, 1, 1, T_k)`` (:func:`~transformer_lib.model.masks.padding_mask`), a
                causal mask ``(1, 1, T_q, T_k)`` (:func:`~transformer_lib.model.masks.causal_mask`),
                or both combined with ``&``.
            need_weights: return the attention weights (the explicit path, not the fused kernel).
            cache: a :class:`KVCache` for step-by-step decoding (``T_k`` then counts the cached
                positions).

        Returns:
            ``output (B, T_q, d_model)`` and ``weights (B, h, T_q, T_k)`` or ``None``.
        """
        # Keys held only in a self-attention cache: the new tokens come after them (and so do their
        # positions).
        start = 0 if cache is None or cache.static or cache.k is None else cache.k.size(2)
        check_attention_inputs(
            query,
            key,
            value,
            mask,
            d_model=self.d_model,
            num_heads=self.num_heads,
            cached=start,
            weight_dtype=self.w_q.weight.dtype,
        )
        if mask is not None:  # tokens hidden from every head are zeroed before the projections
            query, key, value = _zero_hidden(query, key, value, mask.any(dim=1), keys=start == 0)
        q = split_heads(self.w_q(query), self.num_heads)  # (B, h, T_q, d_k)
        if self.rope_theta is not None:
            q = apply_rope(
                q, torch.arange(start, start + q.size(2), device=q.device), self.rope_theta
            )
        k, v = self._keys_and_values(key, value, cache, start)  # (B, h, T_k, d_k), (B, h, T_k, d_v)
        out, weights = self._attend(  # (B, h, T_q, d_v), (B, h, T_q, T_k) or None
            q, k, v, mask, need_weights
        )
        return self.w_o(combine_heads(out)), weights  # (B, T_q, d_model)

    def _keys_and_values(
        self, key: torch.Tensor, value: torch.Tensor, cache: KVCache | None, start: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Project keys and values into their ``h_kv`` heads (rotated from position ``start``, with
        rotary positions), reuse or extend ``cache``, which stores them before any repetition, then
        repeat each key/value head for its ``h / h_kv`` query heads. Returns ``(B, h, T_k, d_k)``,
        ``(B, h, T_k, d_v)``."""
        if cache is not None and cache.static and cache.k is not None:
            k, v = cache.k, cache.v  # (B, h_kv, T_k, d_k), (B, h_kv, T_k, d_v)
        else:
            k = split_heads(self.w_k(key), self.n_kv_heads)  # (B, h_kv, T_new, d_k)
            v = split_heads(self.w_v(value), self.n_kv_heads)  # (B, h_kv, T_new, d_v)
            if self.rope_theta is not None:
                k = apply_rope(
                    k, torch.arange(start, start + k.size(2), device=k.device), self.rope_theta
                )
            if cache is not None:
                if cache.k is not None:
                    k = torch.cat([cache.k, k], dim=2)  # (B, h_kv, T_past + T_new, d_k)
                    v = torch.cat([cache.v, v], dim=2)  # (B, h_kv, T_past + T_new, d_v)
                cache.k, cache.v = k, v
        group = self.num_heads // self.n_kv_heads
        if group > 1:  # each key/value head serves h / h_kv query heads
            k = k.repeat_interleave(group, dim=1)  # (B, h, T_k, d_k)
            v = v.repeat_interleave(group, dim=1)  # (B, h, T_k, d_v)
        return k, v

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(out (B, h, T_q, d_v), weights (B, h, T_q, T_k) or None)``: the explicit path when the
        weights are asked for or recorded (:func:`~transformer_lib.capture_attention`), else
        PyTorch's fused kernel, the same function without materialising the weights. The inputs are
        checked and the hidden tokens zeroed."""
        if need_weights or self.recorded_weights is not None:
            out, weights = scaled_dot_product_attention(  # (B, h, T_q, d_v), (B, h, T_q, T_k)
                q, k, v, mask, self.dropout
            )
            if self.recorded_weights is not None:
                self.recorded_weights.append(weights.detach())
            return out, (weights if need_weights else None)
        p = self.dropout.p if self.training else 0.0
        out = F.scaled_dot_product_attention(  # (B, h, T_q, d_v)
            q, k, v, attn_mask=mask, dropout_p=p
        )
        if mask is not None:
            # Same rule as the explicit path on every backend: a query with no allowed key outputs
            # zeros.
            out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return out, None
