"""Small helpers shared by the unit tests."""

import torch
from torch import nn

import transformer_lib as tl


def copy_mha_from_torch(ours: tl.MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Copy ``nn.MultiheadAttention``'s weights into ours: its fused ``in_proj`` is W_q, W_k, W_v stacked."""
    w_q, w_k, w_v = theirs.in_proj_weight.chunk(3, dim=0)
    b_q, b_k, b_v = theirs.in_proj_bias.chunk(3, dim=0)
    with torch.no_grad():
        for linear, w, b in ((ours.w_q, w_q, b_q), (ours.w_k, w_k, b_k), (ours.w_v, w_v, b_v)):
            linear.weight.copy_(w)
            linear.bias.copy_(b)
        ours.w_o.weight.copy_(theirs.out_proj.weight)
        ours.w_o.bias.copy_(theirs.out_proj.bias)


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()
