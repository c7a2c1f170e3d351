"""Notebook 04 · the encoder: LayerNorm, the feed-forward network and the encoder layer."""

import torch
from torch import nn

import transformer_lib as tl


class MyLayerNorm(nn.Module):
    """Normalise each token over its features (biased variance, like nn.LayerNorm), then scale and
    shift."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gain
        self.bias = nn.Parameter(torch.zeros(d_model))  # shift

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x.var(dim=-1, unbiased=False, keepdim=True)  # (..., 1)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class MyFeedForward(nn.Module):
    """``linear2(relu(linear1(x)))`` at every position."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))  # (B, T, d_model)


class MyEncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual connection and a LayerNorm (post-LN or
    pre-LN)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = tl.MultiHeadAttention(d_model, num_heads)
        self.feed_forward = MyFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = MyLayerNorm(d_model), MyLayerNorm(d_model)

    def forward(self, x, mask=None):
        def attend(y):
            return self.self_attn(y, y, y, mask)[0]

        if self.norm_first:  # x + f(norm(x))
            x = x + attend(self.norm1(x))
            return x + self.feed_forward(self.norm2(x))
        x = self.norm1(x + attend(x))  # norm(x + f(x))
        return self.norm2(x + self.feed_forward(x))  # (B, T, d_model)


ANSWERS = {
    "4": (
        "For fixed attention weights, a position's attention output is a weighted average of the "
        "values, projected "
        "by W_V and W_O: linear in the token vectors. The softmax only decides the mixing weights, "
        "and LayerNorm "
        "only recentres and rescales each token with a fixed formula. So an attention-only "
        "Transformer can move "
        "and mix information between positions, but has no learned nonlinear function of one "
        "token's own features: "
        "no feature detector such as ReLU(x w + b), no XOR of two features of a token, none of the "
        "key-value "
        "lookups that FFN layers have been found to store (Geva, Schuster, Berant & Levy 2021, "
        "'Transformer "
        "Feed-Forward Layers Are Key-Value Memories'). Dong, Cordonnier & Loukas 2021 ('Attention "
        "is Not All You "
        "Need: Pure Attention Loses Rank Doubly Exponentially with Depth') show that stacked "
        "self-attention without "
        "skip connections and MLPs collapses towards a rank-1 output (every token the same) as "
        "depth grows."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _UnbiasedVariance(MyLayerNorm):
    def forward(self, x):  # var() divides by d_model - 1 by default
        return (x - x.mean(-1, keepdim=True)) / (
            x.var(-1, keepdim=True) + self.eps
        ).sqrt() * self.weight + self.bias


class _NoRelu(MyFeedForward):
    def forward(self, x):
        return self.linear2(self.linear1(x))


class _PostLNAlways(nn.Module):  # norm_first ignored: always post-LN
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = MyEncoderLayer(d_model, num_heads, d_ff, norm_first=False)
        self.self_attn, self.feed_forward = self.layer.self_attn, self.layer.feed_forward
        self.norm1, self.norm2 = self.layer.norm1, self.layer.norm2

    def forward(self, x, mask=None):
        return self.layer(x, mask)


WRONG_ANSWERS = {
    "MyLayerNorm": (_UnbiasedVariance, "unbiased variance"),
    "MyFeedForward": (_NoRelu, "without the ReLU"),
    "MyEncoderLayer": (_PostLNAlways, "post-LN and pre-LN are swapped"),
}
