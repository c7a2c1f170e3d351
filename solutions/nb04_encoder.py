"""Notebook 04 · the encoder: the feed-forward network as convolutions, the encoder layer, the
stack."""

import torch
from torch import nn

import transformer_lib as tl


class MyConvFeedForward(nn.Module):
    """The position-wise feed-forward network as the paper's "two convolutions with kernel size 1":
    a kernel of size 1 sees one position at a time, so it is an nn.Linear applied at every
    position. nn.Conv1d reads (B, channels, T), so the features go to axis 1 and back."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.conv1 = nn.Conv1d(d_model, d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(d_ff, d_model, kernel_size=1)

    def forward(self, x):
        y = x.transpose(1, 2)  # (B, d_model, T): channels first, as Conv1d wants
        y = self.conv2(torch.relu(self.conv1(y)))  # (B, d_model, T)
        return y.transpose(1, 2)  # (B, T, d_model)


class MyEncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual connection and a LayerNorm (post-LN or
    pre-LN)."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = tl.MultiHeadAttention(d_model, num_heads)
        self.feed_forward = tl.PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        def attend(y):
            return self.self_attn(y, y, y, mask)[0]

        if self.norm_first:  # x + f(norm(x))
            x = x + attend(self.norm1(x))
            return x + self.feed_forward(self.norm2(x))
        x = self.norm1(x + attend(x))  # norm(x + f(x))
        return self.norm2(x + self.feed_forward(x))  # (B, T, d_model)


class MyEncoder(nn.Module):
    """N encoder layers in a chain, each its own object with its own weights; pre-LN adds one
    LayerNorm after the last layer, because its residual stream is never normalised otherwise."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList(
            tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
            for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d_model)
        return self.final_norm(x)


ANSWERS = {
    "4": (
        "For fixed attention weights, a position's attention output is a weighted average of the "
        "values, projected by W_V and W_O: linear in the token vectors. The softmax only decides "
        "the mixing weights, and LayerNorm only recentres and rescales each token with a fixed "
        "formula. So an attention-only Transformer can move and mix information between positions, "
        "but has no learned nonlinear function of one token's own features: no feature detector "
        "such as ReLU(x w + b), no XOR of two features of a token, none of the key-value lookups "
        "that FFN layers have been found to store (Geva, Schuster, Berant & Levy 2021, "
        "'Transformer Feed-Forward Layers Are Key-Value Memories'). Dong, Cordonnier & Loukas 2021 "
        "('Attention is Not All You Need: Pure Attention Loses Rank Doubly Exponentially with "
        "Depth') show that stacked self-attention without skip connections and MLPs collapses "
        "towards a rank-1 output (every token the same) as depth grows."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _NoTransposeBack(MyConvFeedForward):
    def forward(self, x):  # stays in Conv1d's (B, d_model, T)
        return self.conv2(torch.relu(self.conv1(x.transpose(1, 2))))


class _PostLNAlways(nn.Module):  # norm_first ignored: always post-LN
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = MyEncoderLayer(d_model, num_heads, d_ff, norm_first=False)
        self.self_attn, self.feed_forward = self.layer.self_attn, self.layer.feed_forward
        self.norm1, self.norm2 = self.layer.norm1, self.layer.norm2

    def forward(self, x, mask=None):
        return self.layer(x, mask)


class _OneLayerRepeated(MyEncoder):
    def __init__(self, num_layers, d_model, num_heads, d_ff, norm_first=False):
        super().__init__(num_layers, d_model, num_heads, d_ff, norm_first)
        layer = tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.layers = nn.ModuleList([layer] * num_layers)  # one object, N times


WRONG_ANSWERS = {
    "MyConvFeedForward": (_NoTransposeBack, "transpose"),
    "MyEncoderLayer": (_PostLNAlways, "post-LN and pre-LN are swapped"),
    "MyEncoder": (_OneLayerRepeated, "one layer object"),
}
