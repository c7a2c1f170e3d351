"""Notebook 05 · the decoder: the decoder layer, and the model's parameters counted by hand."""

from torch import nn

import transformer_lib as tl


class MyDecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the memory, feed-forward; each with residual and
    LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = tl.MultiHeadAttention(d_model, num_heads)
        self.cross_attn = tl.MultiHeadAttention(d_model, num_heads)
        self.feed_forward = tl.PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        sublayers = [
            # causal (and padding) mask
            (self.norm1, lambda y: self.self_attn(y, y, y, tgt_mask)[0]),
            # queries from the decoder, keys and values from the memory, as it comes
            (self.norm2, lambda y: self.cross_attn(y, memory, memory, memory_mask)[0]),
            (self.norm3, self.feed_forward),
        ]
        for norm, sublayer in sublayers:
            # (B, T_tgt, d_model)
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


def my_count_parameters(config):
    """``tl.Transformer(config)``'s parameters, by hand. Per layer: attention 4 d^2 (four
    projections; heads add nothing) plus 4 d biases, feed-forward 2 d d_ff plus d_ff + d biases
    (bias=False drops those biases, not the LayerNorms'), LayerNorm 2 d; the encoder layer has one
    attention and two norms, the decoder layer two attentions and three norms; pre-LN adds a final
    norm to each stack. Shared embeddings are one V x d matrix, counted once; untied, the source
    embedding, the target embedding and the output projection (no bias) each count. The sinusoidal
    table is a buffer, not a parameter; a learned one is one max_len x d table, shared by both
    stacks."""
    d, d_ff, n = config.d_model, config.d_ff, config.num_layers
    attention, ffn, norm = 4 * d * d, 2 * d * d_ff, 2 * d
    if config.bias:
        attention, ffn = attention + 4 * d, ffn + d_ff + d
    stacks = n * (attention + ffn + 2 * norm) + n * (2 * attention + ffn + 3 * norm)
    if config.norm_first:
        stacks += 2 * norm
    positions = config.max_len * d if config.positional == "learned" else 0
    if config.share_embeddings:
        return stacks + positions + config.src_vocab_size * d
    return stacks + positions + config.src_vocab_size * d + 2 * config.tgt_vocab_size * d


ANSWERS = {
    "3": (
        "Inside a decoder layer, position t's output is built from three sublayers. The "
        "feed-forward acts on each position alone. In cross-attention the query at position t is "
        "position t's own vector, and the keys and values are the encoder's memory, which is "
        "computed from the source only: no target token enters the keys or values, so "
        "cross-attention gives position t nothing from other target positions, earlier or later. "
        "The only sublayer that mixes target positions is the self-attention, and the causal mask "
        "limits it to positions <= t. By induction over the layers, position t depends only on "
        "target tokens <= t (and on the source). The whole source is known before decoding starts, "
        "so cross-attention may read all of it; its only mask hides the source's padding."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _NoMemoryMask(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = MyDecoderLayer(d_model, num_heads, d_ff, norm_first)
        for name in ("self_attn", "cross_attn", "feed_forward", "norm1", "norm2", "norm3"):
            setattr(self, name, getattr(self.layer, name))

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self.layer(x, memory, tgt_mask, None)


WRONG_ANSWERS = {
    "MyDecoderLayer": (_NoMemoryMask, "ignored memory_mask"),
    "my_count_parameters": (
        lambda config: my_count_parameters(config.replace(norm_first=False)),
        "final LayerNorm",
    ),
}
