"""Notebook 05 · decoder: the checks of the decoder layer and of cross-attention.

The decoder layer's check shares the layer mistakes of notebook 04 (``LAYER_BUGS``) and adds the
decoder's own: which mask goes to which attention, and where cross-attention's queries come from.
"""

from collections.abc import Callable
from functools import partial

from ..checks import inputs as draw
from ..checks import references, variants
from .engine import CheckResult, Entry, Mistake, judge, knob_mistakes, output_and_weights
from .nb04_encoder import LAYER_BUGS
from .registry import Exercise, Question

__all__ = ["check_decoder_layer", "check_cross_attention"]


_DECODER_BUGS = [
    (
        "the two masks were swapped: the self-attention needs tgt_mask (causal, over the target) "
        "and the cross-attention memory_mask (the source's padding). Hint: `self.self_attn(x, x, "
        "x, tgt_mask)` and `self.cross_attn(x, memory, memory, memory_mask)`.",
        {"self_mask": "memory", "cross_mask": "tgt"},
    ),
    (
        "the self-attention got memory_mask, the source's padding: over the target it needs "
        "tgt_mask, which is causal. Hint: `self.self_attn(x, x, x, tgt_mask)`.",
        {"self_mask": "memory"},
    ),
    (
        "the cross-attention's queries came from the memory and its keys and values from x: the "
        "decoder asks (queries) and the encoder's memory answers (keys, values). Hint: "
        "`self.cross_attn(x, memory, memory, memory_mask)`.",
        {"queries_from_memory": True},
    ),
    (
        "the self-attention ignored the target mask, so each position sees the future. Hint: "
        "`self.self_attn(x, x, x, tgt_mask)`.",
        {"self_mask": "none"},
    ),
    (
        "the self-attention used a causal mask of its own instead of tgt_mask, which is causal "
        "*and* the target's padding: here only padded queries differ, but with left padding "
        "(`<pad> <pad> <bos> y`) real tokens would attend to <pad>. Hint: use the tgt_mask you "
        "are given, `self.self_attn(x, x, x, tgt_mask)`.",
        {"self_mask": "causal"},
    ),
    (
        "the cross-attention got the wrong mask: it needs memory_mask, the source's padding (its "
        "keys come from the memory). Hint: `self.cross_attn(x, memory, memory, memory_mask)`.",
        {"cross_mask": "tgt"},
    ),
    (
        "the cross-attention ignored memory_mask, so queries attend to the source's padding. "
        "Hint: `self.cross_attn(x, memory, memory, memory_mask)`.",
        {"cross_mask": "none"},
    ),
]


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

DECODER_LAYER = Entry(
    "check_decoder_layer",
    "your decoder layer",
    references.decoder_layer,
    partial(draw.layers, decoder=True),
    knob_mistakes(variants.decoder_layer, LAYER_BUGS + _DECODER_BUGS),
    "Hint: masked self-attention, cross-attention to the memory, feed-forward; each in its "
    "residual sublayer.",
    "equals tl.DecoderLayer with the same weights, post-LN and pre-LN, h = d_k and h != d_k, with "
    "causal and per-sequence masks; each sublayer has its own LayerNorm; gradients match.",
    builds=True,
)


CROSS_ATTENTION = Entry(
    "check_cross_attention",
    "your cross-attention",
    lambda attn, x, memory, mask: attn(x, memory, memory, mask),
    draw.cross_attention,
    [
        Mistake(
            "the queries come from the decoder's x, the keys and values from the encoder's "
            "memory. Hint: `attn(x, memory, memory, memory_mask)`.",
            lambda attn, x, m, mask: attn(m, x, x, mask),
        ),
        Mistake(
            "memory_mask was not used: queries attend to the source's padding. Hint: pass it as "
            "the mask.",
            lambda attn, x, m, mask: attn(x, m, m),
        ),
        Mistake(
            "the mask has the opposite polarity: in this course True means 'may attend'.",
            lambda attn, x, m, mask: attn(x, m, m, ~mask),
        ),
        Mistake(
            "every sequence got the first sequence's memory mask: keep its batch axis (B, 1, 1, "
            "T_src).",
            lambda attn, x, m, mask: attn(x, m, m, mask[:1]),
        ),
    ],
    "Hint: `attn(x, memory, memory, memory_mask)[0]`.",
    "queries from the decoder, keys and values from the memory, the source's padding masked.",
    pick=output_and_weights,
)

ENTRIES = (DECODER_LAYER, CROSS_ATTENTION)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_decoder_layer(module_class: type) -> CheckResult:
    """Check the class ``MyDecoderLayer(d_model, num_heads, d_ff, norm_first=False)`` with
    ``forward(x, memory, tgt_mask=None, memory_mask=None)`` against ``tl.DecoderLayer`` holding the
    same weights (``self_attn``, ``cross_attn``, ``feed_forward``, ``norm1``-``norm3``, three
    distinct LayerNorms), post-LN and pre-LN, for ``(16, 4, 32)`` and ``(24, 3, 40)`` (h != d_k),
    with causal and padding masks. Returns a CheckResult: truthy when it passed; it prints as one
    friendly paragraph."""
    return judge(DECODER_LAYER, module_class)


def check_cross_attention(cross_attention: Callable) -> CheckResult:
    """Check ``cross_attention(attn, x, memory, memory_mask) -> output``: ``attn`` a
    ``tl.MultiHeadAttention``, the queries from the decoder's ``x``, keys and values from the
    encoder's ``memory``, its padding masked. Returns a CheckResult: truthy when it passed; it
    prints as one friendly paragraph."""
    return judge(CROSS_ATTENTION, cross_attention)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "05", "1", "MyDecoderLayer", "a decoder layer, post-LN or pre-LN", "check_decoder_layer"
    ),
    Exercise(
        "05",
        "2",
        "my_cross_attention",
        "cross-attention: which tensor is the query, which mask goes where",
        "check_cross_attention",
    ),
]

QUESTIONS = [Question("05", "3", "why unmasked cross-attention lets no later target token in")]
