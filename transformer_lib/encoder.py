"""The encoder: ``N`` identical layers of self-attention and feed-forward, each wrapped in a residual sublayer."""

import torch
from torch import nn

from ._arguments import check_positive_ints
from .attention import KVCache, MultiHeadAttention
from .layers import PositionwiseFeedForward, ResidualSublayer, make_norm

__all__ = ["EncoderLayer", "Encoder", "LayerStack"]


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
    ):
        super().__init__()
        attention = dict(dropout=attention_dropout, bias=bias, num_kv_heads=num_kv_heads)
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


class LayerStack(nn.Module):
    """``num_layers`` copies of ``layer_class``; with pre-LN, a final norm of the kind ``norm`` (the residual
    stream is never normalised otherwise). The other arguments are those of :class:`EncoderLayer` and
    ``DecoderLayer``."""

    layer_class: type[nn.Module]

    def __init__(
        self,
        num_layers: int,
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
    ):
        super().__init__()
        check_positive_ints(num_layers=num_layers)
        options = dict(
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            norm=norm,
            bias=bias,
            num_kv_heads=num_kv_heads,
            rope_theta=rope_theta,
        )
        self.layers = nn.ModuleList(
            self.layer_class(d_model, num_heads, d_ff, dropout, attention_dropout, norm_first, **options)
            for _ in range(num_layers)
        )
        self.final_norm = make_norm(norm, d_model, layer_norm_eps) if norm_first else nn.Identity()


class Encoder(LayerStack):
    """The encoder: ``num_layers`` :class:`EncoderLayer` (and a final LayerNorm with pre-LN)."""

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x (B, T, d_model)``; ``mask`` bool, True = may attend, e.g. a padding mask ``(B, 1, 1, T)``."""
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d_model)
        return self.final_norm(x)
