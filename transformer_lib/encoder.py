"""The encoder: ``N`` identical layers of self-attention and feed-forward, each wrapped in a residual sublayer."""

import torch
from torch import nn

from .attention import DecoderCache, KVCache, MultiHeadAttention
from .layers import LayerStack, PositionwiseFeedForward, ResidualSublayer

__all__ = ["EncoderLayer", "Encoder"]


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network; each inside a :class:`ResidualSublayer`.

    Args:
        d_model, num_heads, d_ff: widths and head count (notation: NOTATION.md).
        dropout: ``P_drop`` on each sublayer's output.
        attention_dropout: dropout on the attention weights (not in the paper; 0 by default).
        norm_first: pre-LN instead of the paper's post-LN.
        activation: the feed-forward nonlinearity, a name from :data:`~transformer_lib.layers.FFN_ACTIVATIONS`
            ("swiglu": a gated feed-forward).
        layer_norm_eps: ``eps`` of both norms.
        norm: "layernorm" (the paper) or "rmsnorm" (Llama), for both residual sublayers.
        bias: whether every projection (attention and feed-forward) has a bias; Llama's have none.
        num_kv_heads: key/value heads of the self-attention (grouped-query; ``None``: ``num_heads``).
        rope_theta: rotary positions in the self-attention with this ``theta`` (``None``: none).
        d_k, d_v: per-head widths of queries/keys and of values (``None``: ``d_model // num_heads``).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        norm: str = "layernorm",
        bias: bool = True,
        num_kv_heads: int | None = None,
        rope_theta: float | None = None,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        attention = dict(dropout=attention_dropout, bias=bias, num_kv_heads=num_kv_heads, d_k=d_k, d_v=d_v)
        self.self_attn = MultiHeadAttention(d_model, num_heads, rope_theta=rope_theta, **attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, bias)
        self.residual_attn = ResidualSublayer(d_model, dropout, norm_first, layer_norm_eps, norm)
        self.residual_ff = ResidualSublayer(d_model, dropout, norm_first, layer_norm_eps, norm)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: KVCache | None = None) -> torch.Tensor:
        """``x (B, T, d_model)``; ``mask`` bool, True = may attend, e.g. a padding mask ``(B, 1, 1, T)``.

        ``cache``: a :class:`KVCache` when the layer serves as a GPT block generating one token at a time
        (notebook 11); ``x`` then holds only the new tokens, and ``mask`` must be causal over cache + new.
        """
        x = self.residual_attn(x, lambda y: self.self_attn(y, y, y, mask, cache=cache)[0])  # (B, T, d_model)
        return self.residual_ff(x, self.feed_forward)  # (B, T, d_model)


class Encoder(LayerStack):
    """The encoder: ``num_layers`` :class:`EncoderLayer` (and a final LayerNorm with pre-LN)."""

    layer_class = EncoderLayer

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: DecoderCache | None = None
    ) -> torch.Tensor:
        """``x (B, T, d_model)``; ``mask`` bool, True = may attend, e.g. a padding mask
        ``(B, 1, 1, T)``. ``cache``: when the stack is a decoder-only language model generating one
        token at a time (:class:`~transformer_lib.lm.DecoderOnlyLM`); ``x`` then holds only the new
        tokens, ``mask`` must be causal over cached + new, and their keys and values join the cache.
        """
        if cache is not None:
            cache.check_fits("encoder", len(self.layers), cross_attention=False)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if cache is None else cache.layers[i])  # (B, T, d_model)
        if cache is not None:
            cache.length += x.size(1)
        return self.final_norm(x)
