"""Copy weights from PyTorch's own Transformer modules into ours, so that both compute the same function.

``copy_from_torch(ours, theirs)`` is the one place that knows how PyTorch lays out its weights: its
``nn.MultiheadAttention`` stacks ``W_Q``, ``W_K``, ``W_V`` in one fused ``in_proj_weight`` ``(3 d_model, d_model)``,
and its layers name their norms ``norm1``, ``norm2`` (``norm3``). Notebook 02 shows the copy by hand once;
notebooks 04 and 05, the tests and ``bench`` call this function.
"""

import torch
from torch import nn

from .attention import MultiHeadAttention
from .decoder import DecoderLayer
from .encoder import EncoderLayer

__all__ = ["copy_from_torch"]


def copy_from_torch(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Copy the weights of PyTorch's ``theirs`` into ``ours`` and return ``ours``.

    Supported pairs: :class:`MultiHeadAttention` <- ``nn.MultiheadAttention``, :class:`EncoderLayer` <-
    ``nn.TransformerEncoderLayer`` and :class:`DecoderLayer` <- ``nn.TransformerDecoderLayer`` (post-LN or
    pre-LN, the same ``norm_first`` on both sides; ReLU feed-forward). After the copy, ours in eval mode equals
    theirs in eval mode (``batch_first=True``; their masks use True = blocked, ours True = may attend).

    Raises:
        TypeError: for any other pair, or when sizes, biases, ``norm_first``, activation or LayerNorm ``eps``
            differ, naming what differs. Nothing is copied then.
    """
    copies = []  # (destination, source) pairs, all checked before the first copy
    if isinstance(ours, MultiHeadAttention) and isinstance(theirs, nn.MultiheadAttention):
        copies += _attention_pairs(ours, theirs, "")
    elif isinstance(ours, EncoderLayer) and isinstance(theirs, nn.TransformerEncoderLayer):
        copies += _layer_pairs(ours, theirs, [("self_attn", "self_attn")], ["residual_attn", "residual_ff"])
    elif isinstance(ours, DecoderLayer) and isinstance(theirs, nn.TransformerDecoderLayer):
        attentions = [("self_attn", "self_attn"), ("cross_attn", "multihead_attn")]
        copies += _layer_pairs(ours, theirs, attentions, ["residual_self", "residual_cross", "residual_ff"])
    else:
        raise TypeError(
            "copy_from_torch copies MultiHeadAttention <- nn.MultiheadAttention, EncoderLayer <- "
            "nn.TransformerEncoderLayer or DecoderLayer <- nn.TransformerDecoderLayer; "
            f"got {type(ours).__name__} <- {type(theirs).__name__}"
        )
    with torch.no_grad():
        for destination, source in copies:
            destination.copy_(source)
    return ours


def _tensor_pair(name: str, destination: torch.Tensor | None, source: torch.Tensor | None) -> list:
    """One checked (destination, source) pair; both absent (e.g. no bias on either side) gives none."""
    if destination is None and source is None:
        return []
    if destination is None or source is None:
        missing, present = ("ours", "PyTorch's") if destination is None else ("PyTorch's", "ours")
        raise TypeError(f"{name}: {present} has it and {missing} does not (bias=True on one side only?)")
    if destination.shape != source.shape:
        raise TypeError(f"{name}: shapes differ, ours {tuple(destination.shape)} vs PyTorch's {tuple(source.shape)}")
    return [(destination, source)]


def _attention_pairs(ours: MultiHeadAttention, theirs: nn.MultiheadAttention, prefix: str) -> list:
    if ours.num_heads != theirs.num_heads:
        raise TypeError(f"{prefix}num_heads differ: ours {ours.num_heads}, PyTorch's {theirs.num_heads}")
    if theirs.bias_k is not None:
        raise TypeError(f"{prefix}PyTorch's module has add_bias_kv=True, which ours does not implement")
    if theirs.in_proj_weight is not None:  # fused: W_Q, W_K, W_V stacked along the output axis
        weights = theirs.in_proj_weight.chunk(3, dim=0)  # 3 x (d_model, d_model)
    else:  # kdim or vdim != embed_dim: three separate matrices
        weights = (theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight)
    biases = theirs.in_proj_bias.chunk(3, dim=0) if theirs.in_proj_bias is not None else (None, None, None)
    pairs = []
    for name, linear, weight, bias in zip(
        ("w_q", "w_k", "w_v"), (ours.w_q, ours.w_k, ours.w_v), weights, biases, strict=True
    ):
        pairs += _tensor_pair(f"{prefix}{name}.weight", linear.weight, weight)
        pairs += _tensor_pair(f"{prefix}{name}.bias", linear.bias, bias)
    pairs += _tensor_pair(f"{prefix}w_o.weight", ours.w_o.weight, theirs.out_proj.weight)
    pairs += _tensor_pair(f"{prefix}w_o.bias", ours.w_o.bias, theirs.out_proj.bias)
    return pairs


def _layer_pairs(ours: nn.Module, theirs: nn.Module, attentions: list, residuals: list) -> list:
    """Attention(s), feed-forward and the norms of an encoder or decoder layer; PyTorch's norms are numbered
    in the order of our residual sublayers."""
    ours_norm_first = getattr(ours, residuals[0]).norm_first
    if ours_norm_first != theirs.norm_first:
        raise TypeError(f"norm_first differs: ours {ours_norm_first}, PyTorch's {theirs.norm_first}")
    if theirs.activation not in (torch.relu, nn.functional.relu) and not isinstance(theirs.activation, nn.ReLU):
        raise TypeError(f"our feed-forward uses ReLU; PyTorch's layer uses {theirs.activation}")
    pairs = []
    for our_name, their_name in attentions:
        pairs += _attention_pairs(getattr(ours, our_name), getattr(theirs, their_name), f"{our_name}.")
    for name in ("linear1", "linear2"):
        ours_linear, theirs_linear = getattr(ours.feed_forward, name), getattr(theirs, name)
        pairs += _tensor_pair(f"feed_forward.{name}.weight", ours_linear.weight, theirs_linear.weight)
        pairs += _tensor_pair(f"feed_forward.{name}.bias", ours_linear.bias, theirs_linear.bias)
    for number, residual in enumerate(residuals, start=1):
        ours_norm, theirs_norm = getattr(ours, residual).norm, getattr(theirs, f"norm{number}")
        if ours_norm.eps != theirs_norm.eps:
            raise TypeError(f"{residual}.norm eps differs: ours {ours_norm.eps}, PyTorch's {theirs_norm.eps}")
        pairs += _tensor_pair(f"{residual}.norm.weight", ours_norm.weight, theirs_norm.weight)
        pairs += _tensor_pair(f"{residual}.norm.bias", ours_norm.bias, theirs_norm.bias)
    return pairs
