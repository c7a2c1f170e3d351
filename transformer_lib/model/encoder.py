"""The encoder: ``N`` identical layers of self-attention and feed-forward, each wrapped in a
residual sublayer."""

import torch
from torch import nn

from .attention import DecoderCache, KVCache, MultiHeadAttention
from .layers import BlockOptions, LayerStack

__all__ = ["EncoderLayer", "Encoder"]


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network; each inside a :class:`ResidualSublayer`.

    Args:
        d_model, num_heads, d_ff: widths and head count (notation: NOTATION.md).
        options: a :class:`~transformer_lib.model.layers.BlockOptions` (default: the paper's block):
            dropout, norm placement and kind, activation, biases, key/value heads, rotary
            positions, per-head widths.
        **changes: fields of ``options`` to change, by keyword:
            ``EncoderLayer(32, 4, 64, dropout=0.0)``.
    """

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
        self.feed_forward = o.feed_forward(d_model, d_ff)
        self.residual_attn = o.residual(d_model)
        self.residual_ff = o.residual(d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """``x (B, T, d_model)``; ``mask`` bool, True = may attend, e.g. a padding mask
        ``(B, 1, 1, T)``.

        ``cache``: a :class:`KVCache` when the layer serves as a GPT block generating one token at a
        time (notebook 11); ``x`` then holds only the new tokens, and ``mask`` must be causal over
        cache + new.
        """
        x = self.residual_attn(  # (B, T, d_model)
            x, lambda y: self.self_attn(y, y, y, mask, cache=cache)[0]
        )
        return self.residual_ff(x, self.feed_forward)  # (B, T, d_model)


class Encoder(LayerStack):
    """The encoder: ``num_layers`` :class:`EncoderLayer` (and a final LayerNorm with pre-LN)."""

    layer_class = EncoderLayer

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: DecoderCache | None = None
    ) -> torch.Tensor:
        """``x (B, T, d_model)``; ``mask`` bool, True = may attend, e.g. a padding mask
        ``(B, 1, 1, T)``. ``cache``: when the stack is a decoder-only language model generating one
        token at a time (:class:`~transformer_lib.model.lm.DecoderOnlyLM`); ``x`` then holds only
        the new tokens, ``mask`` must be causal over cached + new, and their keys and values join
        the cache.
        """
        if cache is not None:
            cache.check_fits("encoder", len(self.layers), cross_attention=False)
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if cache is None else cache.layers[i])  # (B, T, d_model)
        if cache is not None:
            cache.length += x.size(1)
        return self.final_norm(x)
