"""Notebook 02 · multi-head attention: split heads, split a fused per-head QKV projection, and the
whole module."""

import math

import torch
from torch import nn


def my_split_heads(x, num_heads):
    """``(B, T, h * d) -> (B, h, T, d)``: head i is the slice of features i*d .. (i+1)*d - 1 of
    every token; stacking the h slices on a new dim 1 puts the heads before T."""
    d = x.size(-1) // num_heads
    # (B, h, T, d)
    return torch.stack([x[..., i * d : (i + 1) * d] for i in range(num_heads)], dim=1)


def my_split_fused_qkv(qkv, num_heads):
    """``(B, T, 3 * h * d_k) -> (q, k, v)``, each ``(B, h, T, d_k)``, for GPT-NeoX's layout: per
    token, h blocks of 3 * d_k features, head i's query, key and value. So the features are ``(h, 3,
    d_k)``, head slowest; section 4's ``chunk(3)`` assumes ``(3, h, d_k)`` and would mix heads."""
    batch, length, width = qkv.shape
    d_k = width // (3 * num_heads)
    per_head = qkv.view(batch, length, num_heads, 3, d_k)  # (B, T, h, 3, d_k)
    per_head = per_head.permute(3, 0, 2, 1, 4)  # (3, B, h, T, d_k)
    return per_head[0], per_head[1], per_head[2]  # q, k, v: (B, h, T, d_k) each


class MyMultiHeadAttention(nn.Module):
    """The paper's multi-head attention; projections without bias, as in its equations."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, query, key, value, mask=None):
        q = my_split_heads(self.w_q(query), self.num_heads)  # (B, h, T_q, d_k)
        k = my_split_heads(self.w_k(key), self.num_heads)  # (B, h, T_k, d_k)
        v = my_split_heads(self.w_v(value), self.num_heads)  # (B, h, T_k, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        heads = scores.softmax(dim=-1) @ v  # (B, h, T_q, d_k)
        batch, _, length, _ = heads.shape
        # (B, T_q, d_model): transpose back before merging, so each token keeps its own features
        return self.w_o(heads.transpose(1, 2).reshape(batch, length, -1))


ANSWERS = {
    "4": (
        "Without W_O, output feature j of a token is combine_heads of the heads' outputs: for j in "
        "head 0's block (features 0 .. d_k - 1) it is head 0's weighted average of its own values, "
        "so it depends only on what head 0 attended to and on the d_k value features that W_V put "
        "in that head's block. Each head would own a fixed slice of the output, and no feature "
        "could combine what two heads found (say, the previous word from one head and the subject "
        "from another). W_O, a d_model x d_model matrix applied after the concat, lets every "
        "output feature be any linear mix of all heads' outputs, and lets the layer write its "
        "result in whatever directions the next layer (and the residual stream) reads, instead of "
        "h fixed slices. It also decouples h * d_v from d_model: with d_v != d_model / h (section "
        "4) the concat would not even have d_model features without it. The paper writes it as "
        "MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O (section 3.2.2)."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _OneMaskForTheBatch(MyMultiHeadAttention):
    def forward(self, query, key, value, mask=None):  # one sequence's mask for the whole batch
        return super().forward(query, key, value, None if mask is None else mask[:1])


WRONG_ANSWERS = {
    "my_split_heads": (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
    "my_split_fused_qkv": (
        lambda qkv, h: tuple(my_split_heads(t, h) for t in qkv.chunk(3, dim=-1)),
        "section 4's layout",
    ),
    "MyMultiHeadAttention": (_OneMaskForTheBatch, "first sequence's mask"),
}
