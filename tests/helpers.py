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


def copy_linear(ours: nn.Linear, theirs: nn.Linear) -> None:
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
        ours.bias.copy_(theirs.bias)


def copy_encoder_layer_from_torch(ours: tl.EncoderLayer, theirs: nn.TransformerEncoderLayer) -> None:
    copy_mha_from_torch(ours.self_attn, theirs.self_attn)
    copy_linear(ours.feed_forward.linear1, theirs.linear1)
    copy_linear(ours.feed_forward.linear2, theirs.linear2)
    ours.residual_attn.norm.load_state_dict(theirs.norm1.state_dict())
    ours.residual_ff.norm.load_state_dict(theirs.norm2.state_dict())


def copy_decoder_layer_from_torch(ours: tl.DecoderLayer, theirs: nn.TransformerDecoderLayer) -> None:
    copy_mha_from_torch(ours.self_attn, theirs.self_attn)
    copy_mha_from_torch(ours.cross_attn, theirs.multihead_attn)
    copy_linear(ours.feed_forward.linear1, theirs.linear1)
    copy_linear(ours.feed_forward.linear2, theirs.linear2)
    ours.residual_self.norm.load_state_dict(theirs.norm1.state_dict())
    ours.residual_cross.norm.load_state_dict(theirs.norm2.state_dict())
    ours.residual_ff.norm.load_state_dict(theirs.norm3.state_dict())
