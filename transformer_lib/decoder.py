"""The decoder: ``N`` layers of masked self-attention, cross-attention over the encoder's memory,
and feed-forward. Its :class:`~transformer_lib.attention.DecoderCache` (in ``attention.py``, beside
``KVCache``, as the language models use it too) lets it decode one token at a time without
recomputing the past."""
import torch
from torch import nn

from .attention import DecoderCache, KVCache, MultiHeadAttention
from .layers import LayerStack, PositionwiseFeedForward, ResidualSublayer

__all__ = ["DecoderLayer", "Decoder", "DecoderCache"]


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (queries from the decoder, keys and values from the encoder's
    memory), feed-forward; each in a :class:`ResidualSublayer`. Arguments as :class:`EncoderLayer`; with
    ``rope_theta``, only the self-attention rotates (a target position and a source position are on two
    different axes, so their offset means nothing)."""

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
        self.cross_attn = MultiHeadAttention(d_model, num_heads, **attention)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, activation, bias)
        self.residual_self = ResidualSublayer(d_model, dropout, norm_first, layer_norm_eps, norm)
        self.residual_cross = ResidualSublayer(d_model, dropout, norm_first, layer_norm_eps, norm)
        self.residual_ff = ResidualSublayer(d_model, dropout, norm_first, layer_norm_eps, norm)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
    ) -> torch.Tensor:
        """``x (B, T_tgt, d_model)``, ``memory (B, T_src, d_model)``.

        ``tgt_mask``: bool, True = may attend, ``(B or 1, 1, T_tgt, T_tgt)``: causal, and padding if any.
        ``memory_mask``: bool, ``(B, 1, 1, T_src)``: the source's padding mask.
        """
        x = self.residual_self(x, lambda y: self.self_attn(y, y, y, tgt_mask, cache=self_cache)[0])
        x = self.residual_cross(x, lambda y: self.cross_attn(y, memory, memory, memory_mask, cache=cross_cache)[0])
        return self.residual_ff(x, self.feed_forward)  # (B, T_tgt, d_model)


class Decoder(LayerStack):
    """The decoder: ``num_layers`` :class:`DecoderLayer` (and a final LayerNorm with pre-LN)."""

    layer_class = DecoderLayer

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """With a ``cache``, ``x`` holds only the new tokens; their keys and values join the cache."""
        if cache is not None:
            cache.check_fits("decoder", len(self.layers), cross_attention=True)
        for i, layer in enumerate(self.layers):
            caches = (None, None) if cache is None else (cache.layers[i], cache.cross[i])
            x = layer(x, memory, tgt_mask, memory_mask, *caches)  # (B, T_tgt, d_model)
        if cache is not None:
            cache.length += x.size(1)
        return self.final_norm(x)
