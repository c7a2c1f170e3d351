"""The decoder: ``N`` layers of masked self-attention, cross-attention over the encoder's memory,
and feed-forward. Its :class:`~transformer_lib.model.attention.DecoderCache` (in ``attention.py``,
beside ``KVCache``, as the language models use it too) lets it decode one token at a time without
recomputing the past."""

import torch
from torch import nn

from .attention import DecoderCache, KVCache, MultiHeadAttention
from .layers import BlockOptions, LayerStack

__all__ = ["DecoderLayer", "Decoder", "DecoderCache"]


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (queries from the decoder, keys and values from the
    encoder's memory), feed-forward; each in a :class:`ResidualSublayer`. Arguments as
    :class:`EncoderLayer`; with ``rope_theta``, only the self-attention rotates (a target position
    and a source position are on two different axes, so their offset means nothing)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        options: BlockOptions | None = None,
        **changes,
    ):
        super().__init__()
        o = BlockOptions.of(options, **changes)
        self.self_attn = MultiHeadAttention(
            d_model, num_heads, rope_theta=o.rope_theta, **o.attention()
        )
        self.cross_attn = MultiHeadAttention(d_model, num_heads, **o.attention())
        self.feed_forward = o.feed_forward(d_model, d_ff)
        self.residual_self = o.residual(d_model)
        self.residual_cross = o.residual(d_model)
        self.residual_ff = o.residual(d_model)

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

        ``tgt_mask``: bool, True = may attend, ``(B or 1, 1, T_tgt, T_tgt)``: causal, and padding if
        any. ``memory_mask``: bool, ``(B, 1, 1, T_src)``: the source's padding mask.
        """
        x = self.residual_self(x, lambda y: self.self_attn(y, y, y, tgt_mask, cache=self_cache)[0])
        x = self.residual_cross(
            x, lambda y: self.cross_attn(y, memory, memory, memory_mask, cache=cross_cache)[0]
        )
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
        """With a ``cache``, ``x`` holds only the new tokens; their keys and values join the cache.
        """
        if cache is not None:
            cache.check_fits("decoder", len(self.layers), cross_attention=True)
        for i, layer in enumerate(self.layers):
            caches = (None, None) if cache is None else (cache.layers[i], cache.cross[i])
            x = layer(x, memory, tgt_mask, memory_mask, *caches)  # (B, T_tgt, d_model)
        if cache is not None:
            cache.length += x.size(1)
        return self.final_norm(x)
