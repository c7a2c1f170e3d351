"""The decoder: ``N`` layers of masked self-attention, cross-attention over the encoder's memory, and
feed-forward; plus the cache that lets it decode one token at a time without recomputing the past."""

from dataclasses import dataclass, field

import torch
from torch import nn

from .attention import KVCache, MultiHeadAttention
from .layers import BlockOptions, LayerStack

__all__ = ["DecoderLayer", "Decoder", "DecoderCache"]


@dataclass
class DecoderCache:
    """Everything the decoder keeps between decoding steps: per layer, the self-attention keys and values of
    the tokens decoded so far and the cross-attention keys and values of the encoder memory."""

    self_attn: list[KVCache] = field(default_factory=list)
    cross_attn: list[KVCache] = field(default_factory=list)
    length: int = 0  # how many target tokens the cache holds

    @classmethod
    def empty(cls, num_layers: int) -> "DecoderCache":
        return cls([KVCache() for _ in range(num_layers)], [KVCache(static=True) for _ in range(num_layers)])

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` in every layer (beam search)."""
        for cache in self.self_attn + self.cross_attn:
            cache.reorder(index)


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
        if cache is not None and not len(cache.self_attn) == len(cache.cross_attn) == len(self.layers):
            raise ValueError(
                f"the cache holds {len(cache.self_attn)} layers but the decoder has {len(self.layers)}: "
                "make it with model.new_cache() (or DecoderCache.empty(num_layers))"
            )
        for i, layer in enumerate(self.layers):
            self_cache, cross_cache = (cache.self_attn[i], cache.cross_attn[i]) if cache is not None else (None, None)
            x = layer(x, memory, tgt_mask, memory_mask, self_cache, cross_cache)  # (B, T_tgt, d_model)
        if cache is not None:
            cache.length += x.size(1)
        return self.final_norm(x)
