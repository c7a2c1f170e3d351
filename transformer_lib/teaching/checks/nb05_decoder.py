"""Notebook 05 · decoder: the checks of the decoder layer and of cross-attention.

The decoder layer's check shares the layer mistakes of notebook 04 (``LAYER_BUGS``) and adds the
decoder's own: which mask goes to which attention, and where cross-attention's queries come from.
"""

from collections.abc import Callable
from functools import partial

import torch

from ...model.attention import MultiHeadAttention
from ...model.decoder import DecoderLayer
from ...model.masks import causal_mask
from ...model.transformer import Transformer, TransformerConfig, count_parameters
from . import inputs as draw
from . import references, variants
from .engine import (
    Case,
    CheckResult,
    Entry,
    Mistake,
    judge,
    knob_mistakes,
    one_number,
    output_and_weights,
)
from .nb04_encoder import LAYER_BUGS
from .registry import Exercise, Question

__all__ = ["check_decoder_layer", "check_cross_attention", "check_transformer_parameter_count"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _cross_attention_cases() -> list[Case]:
    gen, attn = draw.generator(), draw.fixed(lambda: MultiHeadAttention(16, 4))
    x6, memory6 = draw.randn(gen, 3, 6, 16), draw.randn(gen, 3, 6, 16)
    x, memory = draw.randn(gen, 3, 5, 16, grad=True), draw.randn(gen, 3, 7, 16, grad=True)
    return [
        Case(
            (attn, x6, memory6, draw.padded([4, 6, 2], 6)),
            "x and memory (3, 6, 16), per-sequence memory mask",
        ),
        Case(
            (attn, x, memory, draw.padded([4, 7, 2], 7)),
            "x (3, 5, 16), memory (3, 7, 16), per-sequence memory mask",
            inputs={"x": x, "memory": memory},
        ),
    ]


def _decoder_layer_variant(
    ref: DecoderLayer,
    x,
    memory,
    tgt_mask=None,
    memory_mask=None,
    *,
    swap=False,
    skip=(),
    self_mask="tgt",
    cross_mask="memory",
    queries_from_memory=False,
    **attention,
) -> torch.Tensor:
    """``skip``: the sublayers ("self", "cross", "feed-forward") whose residual ``x +`` is
    forgotten; ``self_mask`` and ``cross_mask``: which mask each attention gets ("tgt", "memory",
    "none", or "causal": a causal mask of the layer's own, without the target's padding);
    ``attention``: the knobs of :func:`variants.attend`."""
    masks = {"tgt": tgt_mask, "memory": memory_mask, "none": None, "causal": causal_mask(x.size(1))}
    pre = ref.residual_self.norm_first != swap
    x = variants.sublayer(
        x,
        lambda y: variants.attend(ref.self_attn, y, y, y, masks[self_mask], **attention),
        ref.residual_self.norm,
        pre,
        "self" not in skip,
    )
    cross = (
        (lambda y: variants.attend(ref.cross_attn, memory, y, y, masks[cross_mask], **attention))
        if (queries_from_memory)
        else (
            lambda y: variants.attend(
                ref.cross_attn, y, memory, memory, masks[cross_mask], **attention
            )
        )
    )
    x = variants.sublayer(x, cross, ref.residual_cross.norm, pre, "cross" not in skip)
    return variants.sublayer(
        x, ref.feed_forward, ref.residual_ff.norm, pre, "feed-forward" not in skip
    )


# fmt: off
_DECODER_BUGS = [
    ("the two masks were swapped: the self-attention needs tgt_mask (causal, over the target) "
     "and the cross-attention memory_mask (the source's padding). Hint: `self.self_attn(x, x, "
     "x, tgt_mask)` and `self.cross_attn(x, memory, memory, memory_mask)`.",
     {"self_mask": "memory", "cross_mask": "tgt"}),
    ("the self-attention got memory_mask, the source's padding: over the target it needs "
     "tgt_mask, which is causal. Hint: `self.self_attn(x, x, x, tgt_mask)`.",
     {"self_mask": "memory"}),
    ("the cross-attention's queries came from the memory and its keys and values from x: the "
     "decoder asks (queries) and the encoder's memory answers (keys, values). Hint: "
     "`self.cross_attn(x, memory, memory, memory_mask)`.",
     {"queries_from_memory": True}),
    ("the self-attention ignored the target mask, so each position sees the future. Hint: "
     "`self.self_attn(x, x, x, tgt_mask)`.",
     {"self_mask": "none"}),
    ("the self-attention used a causal mask of its own instead of tgt_mask, which is causal "
     "*and* the target's padding: here only padded queries differ, but with left padding "
     "(`<pad> <pad> <bos> y`) real tokens would attend to <pad>. Hint: use the tgt_mask you "
     "are given, `self.self_attn(x, x, x, tgt_mask)`.",
     {"self_mask": "causal"}),
    ("the cross-attention got the wrong mask: it needs memory_mask, the source's padding (its "
     "keys come from the memory). Hint: `self.cross_attn(x, memory, memory, memory_mask)`.",
     {"cross_mask": "tgt"}),
    ("the cross-attention ignored memory_mask, so queries attend to the source's padding. "
     "Hint: `self.cross_attn(x, memory, memory, memory_mask)`.",
     {"cross_mask": "none"}),
]
# fmt: on


def _memory_normalised(ref, x, memory, tgt_mask=None, memory_mask=None):
    """A decoder layer whose cross-attention reads ``norm2(memory)``: in pre-LN the sublayer's
    LayerNorm was applied to the memory as well as to x."""
    return _decoder_layer_variant(
        ref, x, ref.residual_cross.norm(memory), tgt_mask, memory_mask
    )  # (B, T_tgt, d_model)


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

DECODER_LAYER = Entry(
    "check_decoder_layer",
    "your decoder layer",
    partial(references.layer, DecoderLayer, ("self_attn", "cross_attn")),
    partial(draw.layers, decoder=True),
    [
        *knob_mistakes(_decoder_layer_variant, LAYER_BUGS + _DECODER_BUGS),
        Mistake(
            "the cross-attention's keys and values came from norm2(memory): in pre-LN the "
            "sublayer's LayerNorm normalises only the decoder's stream x, "
            "`x + cross_attn(norm2(x), memory, memory, memory_mask)`; the memory arrives "
            "normalised already (the encoder's final LayerNorm), and norm2's gain and shift "
            "belong to x. Hint: pass `memory` as it comes.",
            _memory_normalised,
        ),
    ],
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
    _cross_attention_cases,
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


def _count(
    config: TransformerConfig,
    *,
    final_norms=True,
    tied=True,
    output_bias=False,
    positions="config",
    cross=True,
    decoder_norms=3,
    biases="config",
    heads=False,
    one_vocab=False,
    output_projection=True,
) -> int:
    """The encoder-decoder's parameters written out, with a knob per typical mistake:
    ``final_norms`` counts the pre-LN stacks' final LayerNorms (True: in pre-LN only; "always": in
    post-LN too); ``tied``: count a shared embedding once (False: once per use, three times);
    ``output_bias``: an untied output projection with a bias; ``positions``: "config" counts the
    learned table (one, max_len x d_model) only with positional="learned", "always" counts one for
    the sinusoidal buffer too, "two" one per stack whatever the kind, "never" forgets the learned
    one, "per_stack" counts it once per stack; ``cross``: the decoder's cross-attention;
    ``decoder_norms``: LayerNorms per decoder layer; ``biases``: attention and feed-forward biases
    ("config": as config.bias says; True or False: whatever it says; "norms_too": bias=False taken
    to drop the LayerNorms' shift as well); ``heads``: attention counted once per head;
    ``one_vocab``: an untied target side sized by the source vocabulary; ``output_projection``:
    False forgets the untied output projection."""
    d, f, n = config.d_model, config.d_ff, config.num_layers
    has_bias = config.bias if biases in ("config", "norms_too") else biases
    attention = (4 * d * d + (4 * d if has_bias else 0)) * (config.num_heads if heads else 1)
    ffn = 2 * d * f + ((f + d) if has_bias else 0)
    norm = d if biases == "norms_too" and not config.bias else 2 * d
    encoder = n * (attention + ffn + 2 * norm)
    decoder = n * ((2 if cross else 1) * attention + ffn + decoder_norms * norm)
    stacks = encoder + decoder
    if final_norms == "always" or (final_norms and config.norm_first):
        stacks += 2 * norm
    source, target = config.src_vocab_size, config.tgt_vocab_size
    target = source if one_vocab else target
    if config.share_embeddings:
        embeddings = source * d * (1 if tied else 3)
    else:  # source embedding, target embedding, output projection
        projection = target * d + (target if output_bias else 0)
        embeddings = source * d + target * d + (projection if output_projection else 0)
    learned = config.positional == "learned"
    tables = {"config": learned, "always": 1, "never": 0, "per_stack": 2 * learned, "two": 2}[
        positions
    ]
    return stacks + embeddings + tables * config.max_len * d


def _library_count(config: TransformerConfig) -> int:
    """``tl.count_parameters`` of the model itself, built on the meta device (shapes only)."""
    with torch.device("meta"):
        model = Transformer(config)
    return count_parameters(model)["total"]


def _count_cases() -> list[Case]:
    """Six configurations: post-LN and pre-LN with one shared vocabulary, untied embeddings with
    two vocabulary sizes, learned positions, bias=False, and the paper's base model."""
    small = dict(d_model=64, num_heads=4, d_ff=256, num_layers=2, src_vocab_size=1000)
    configs = [
        (TransformerConfig(**small, tgt_vocab_size=1000), "post-LN, shared vocabulary of 1000"),
        (
            TransformerConfig(**small, tgt_vocab_size=1000, norm_first=True),
            "pre-LN, shared vocabulary of 1000",
        ),
        (
            TransformerConfig(**small, tgt_vocab_size=700, share_embeddings=False),
            "post-LN, untied: source vocabulary 1000, target 700",
        ),
        (
            TransformerConfig(**small, tgt_vocab_size=1000, positional="learned", max_len=64),
            "post-LN, shared vocabulary of 1000, learned positions, max_len=64",
        ),
        (
            TransformerConfig(**small, tgt_vocab_size=1000, norm_first=True, bias=False),
            "pre-LN, shared vocabulary of 1000, bias=False",
        ),
        (TransformerConfig.paper_base(vocab_size=37000), "the paper's base, vocabulary 37000"),
    ]
    return [
        Case(
            (config,),
            f"for {about} (d_model={config.d_model}, d_ff={config.d_ff}, "
            f"num_layers={config.num_layers}, num_heads={config.num_heads})",
        )
        for config, about in configs
    ]


_COUNT_MISTAKES = [
    (
        "a pre-LN stack ends with a final LayerNorm (notebook 04, section 3), the encoder's and "
        "the decoder's: 2 * 2 * d_model parameters you did not count.",
        {"final_norms": False},
    ),
    (
        "a post-LN stack has no final LayerNorm (each layer already ends with one): count the "
        "two final norms only when norm_first is True.",
        {"final_norms": "always"},
    ),
    (
        "with share_embeddings=True the source embedding, the target embedding and the output "
        "projection are one vocab x d_model matrix: count it once.",
        {"tied": False},
    ),
    (
        "the sinusoidal table is a buffer, not a parameter (section 5's count lists `positions` "
        "with 0); max_len changes nothing unless positional='learned'.",
        {"positions": "always"},
    ),
    (
        "the encoder and the decoder share one learned position table (`positions` in "
        "count_parameters): max_len x d_model, counted once.",
        {"positions": "per_stack"},
    ),
    (
        "with positional='learned' the positions are a learned table, max_len x d_model "
        "parameters (`positions` in count_parameters), that you did not count.",
        {"positions": "never"},
    ),
    (
        "the sinusoidal table is a buffer, not a parameter (section 5's count lists `positions` "
        "with 0), in neither stack; max_len changes nothing unless positional='learned'.",
        {"positions": "two"},
    ),
    (
        "the decoder layers lack their cross-attention: each has two attentions (self and "
        "cross), three LayerNorms.",
        {"cross": False},
    ),
    (
        "each decoder layer has three LayerNorms, one per sublayer (self-attention, "
        "cross-attention, feed-forward), not two.",
        {"decoder_norms": 2},
    ),
    (
        "the attention and feed-forward biases are missing: with bias=True (the default) the "
        "library's projections have biases, as PyTorch's do (4 * d_model per attention, d_ff + "
        "d_model per feed-forward).",
        {"biases": False},
    ),
    (
        "bias=False removes the attention and feed-forward biases, which you still counted (4 * "
        "d_model per attention, d_ff + d_model per feed-forward).",
        {"biases": True},
    ),
    (
        "bias=False removes the attention and feed-forward biases only: every LayerNorm keeps "
        "its shift, 2 * d_model parameters each.",
        {"biases": "norms_too"},
    ),
    (
        "you counted the attention once per head: the heads split d_model into h slices of d_k, "
        "so they add no parameters (4 * (d_model^2 + d_model) whatever h is).",
        {"heads": True},
    ),
    (
        "the output projection has no bias here (`output_bias=False`, the default): untied, it is "
        "a tgt_vocab x d_model matrix alone.",
        {"output_bias": True},
    ),
    (
        "untied, the output projection is a third matrix, tgt_vocab_size x d_model, no bias "
        "(`output_projection` in count_parameters), next to the two embeddings.",
        {"output_projection": False},
    ),
    (
        "the target side was sized by the source vocabulary: untied, the target embedding and the "
        "output projection are tgt_vocab_size x d_model each.",
        {"one_vocab": True},
    ),
]


TRANSFORMER_PARAMETER_COUNT = Entry(
    "check_transformer_parameter_count",
    "your count",
    _library_count,
    _count_cases,
    knob_mistakes(_count, _COUNT_MISTAKES),
    "Hint: count the pieces tl.count_parameters lists (embeddings, encoder, decoder, output "
    "projection) and ask, for each option of the config, which of them it changes.",
    "matches tl.count_parameters for post-LN and pre-LN, shared and untied embeddings, learned "
    "positions, bias=False, and the paper's base model.",
    pick=one_number("parameter count"),
    atol=0.5,
    rtol=0.0,
)

ENTRIES = (DECODER_LAYER, CROSS_ATTENTION, TRANSFORMER_PARAMETER_COUNT)


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


def check_transformer_parameter_count(count: Callable) -> CheckResult:
    """Check ``count(config) -> int``, the parameters of ``tl.Transformer(config)`` counted by hand,
    against ``tl.count_parameters``: post-LN and pre-LN, shared and untied embeddings (two
    vocabulary sizes), learned positions, bias=False, the paper's base model. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(TRANSFORMER_PARAMETER_COUNT, count)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "05", "1", "MyDecoderLayer", "a decoder layer, post-LN or pre-LN", "check_decoder_layer"
    ),
    Exercise(
        "05",
        "2",
        "my_count_parameters",
        "the model's parameters by hand: norms, tying, vocabularies, positions, biases",
        "check_transformer_parameter_count",
    ),
]

QUESTIONS = [Question("05", "3", "why unmasked cross-attention lets no later target token in")]
