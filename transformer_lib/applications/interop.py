"""Copy weights from PyTorch's own Transformer modules, and from Hugging Face models, into ours, so
that both compute the same function.

``copy_from_torch(ours, theirs)`` is the one place that knows how PyTorch lays out its weights: its
``nn.MultiheadAttention`` stacks ``W_Q``, ``W_K``, ``W_V`` in one fused ``in_proj_weight``
``(3 d_model, d_model)``, and its layers name their norms ``norm1``, ``norm2`` (``norm3``). Notebook
02 shows the copy by hand once; notebooks 04 and 05, the tests and ``bench`` call this function.

``from_huggingface(hf_model)`` is the one place that knows how Hugging Face lays out GPT-2, BERT,
MarianMT and Llama: it derives our config from theirs (:func:`config_from_huggingface`), builds our
model and copies every weight. ``transformers`` stays optional: it is imported only when one of
these two functions runs.
"""

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..model.attention import MultiHeadAttention
from ..model.decoder import DecoderLayer
from ..model.encoder import EncoderLayer
from ..model.layers import LayerNorm

__all__ = [
    "copy_from_torch",
    "from_huggingface",
    "config_from_huggingface",
    "HUGGINGFACE_FAMILIES",
    "HUGGINGFACE_MODELS",
]


def copy_from_torch(ours: nn.Module, theirs: nn.Module) -> nn.Module:
    """Copy the weights of PyTorch's ``theirs`` into ``ours`` and return ``ours``.

    Supported pairs: :class:`MultiHeadAttention` <- ``nn.MultiheadAttention``, :class:`EncoderLayer`
    <- ``nn.TransformerEncoderLayer`` and :class:`DecoderLayer` <- ``nn.TransformerDecoderLayer``
    (post-LN or pre-LN, the same ``norm_first`` on both sides; the same activation, ReLU or GELU).
    After the copy, ours in eval mode equals theirs in eval mode (``batch_first=True``; their masks
    use True = blocked, ours True = may attend).

    Raises:
        TypeError: for any other pair, or when sizes, biases, ``norm_first``, activation or
            LayerNorm ``eps`` differ, or ours has an option PyTorch's modules lack (rotary
            positions, RMSNorm), naming what differs. Nothing is copied then.
    """
    copies = []  # (destination, source) pairs, all checked before the first copy
    if isinstance(ours, MultiHeadAttention) and isinstance(theirs, nn.MultiheadAttention):
        copies += _attention_pairs(ours, theirs, "")
    elif isinstance(ours, EncoderLayer) and isinstance(theirs, nn.TransformerEncoderLayer):
        copies += _layer_pairs(
            ours, theirs, [("self_attn", "self_attn")], ["residual_attn", "residual_ff"]
        )
    elif isinstance(ours, DecoderLayer) and isinstance(theirs, nn.TransformerDecoderLayer):
        attentions = [("self_attn", "self_attn"), ("cross_attn", "multihead_attn")]
        copies += _layer_pairs(
            ours, theirs, attentions, ["residual_self", "residual_cross", "residual_ff"]
        )
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


def _tensor_pair(
    name: str,
    destination: torch.Tensor | None,
    source: torch.Tensor | None,
    theirs: str = "PyTorch's",
) -> list:
    """One checked (destination, source) pair; both absent (e.g. no bias on either side) gives none.
    ``theirs`` names the source's owner in the errors."""
    if destination is None and source is None:
        return []
    if destination is None or source is None:
        missing, present = ("ours", theirs) if destination is None else (theirs, "ours")
        raise TypeError(
            f"{name}: {present} has it and {missing} does not (bias=True on one side only?)"
        )
    if destination.shape != source.shape:
        raise TypeError(
            f"{name}: shapes differ, ours {tuple(destination.shape)} vs {theirs} "
            f"{tuple(source.shape)}"
        )
    return [(destination, source)]


def _attention_pairs(ours: MultiHeadAttention, theirs: nn.MultiheadAttention, prefix: str) -> list:
    if ours.num_heads != theirs.num_heads:
        raise TypeError(
            f"{prefix}num_heads differ: ours {ours.num_heads}, PyTorch's {theirs.num_heads}"
        )
    if theirs.bias_k is not None:
        raise TypeError(
            f"{prefix}PyTorch's module has add_bias_kv=True, which ours does not implement"
        )
    if ours.rope_theta is not None:  # the weights would copy, but the functions would differ
        raise TypeError(
            f"{prefix}ours rotates queries and keys (rope_theta={ours.rope_theta}); PyTorch's does "
            "not"
        )
    if theirs.in_proj_weight is not None:  # fused: W_Q, W_K, W_V stacked along the output axis
        weights = theirs.in_proj_weight.chunk(3, dim=0)  # 3 x (d_model, d_model)
    else:  # kdim or vdim != embed_dim: three separate matrices
        weights = (theirs.q_proj_weight, theirs.k_proj_weight, theirs.v_proj_weight)
    biases = (
        theirs.in_proj_bias.chunk(3, dim=0)
        if theirs.in_proj_bias is not None
        else (None, None, None)
    )
    pairs = []
    for name, linear, weight, bias in zip(
        ("w_q", "w_k", "w_v"), (ours.w_q, ours.w_k, ours.w_v), weights, biases, strict=True
    ):
        pairs += _tensor_pair(f"{prefix}{name}.weight", linear.weight, weight)
        pairs += _tensor_pair(f"{prefix}{name}.bias", linear.bias, bias)
    pairs += _tensor_pair(f"{prefix}w_o.weight", ours.w_o.weight, theirs.out_proj.weight)
    pairs += _tensor_pair(f"{prefix}w_o.bias", ours.w_o.bias, theirs.out_proj.bias)
    return pairs


def _torch_activation_name(activation) -> str:
    """The name in ``layers.ACTIVATIONS`` of a PyTorch layer's activation (function or module), or
    its repr."""
    if activation in (torch.relu, nn.functional.relu) or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is nn.functional.gelu or (
        isinstance(activation, nn.GELU) and activation.approximate == "none"
    ):
        return "gelu"
    return repr(activation)


def _layer_pairs(ours: nn.Module, theirs: nn.Module, attentions: list, residuals: list) -> list:
    """Attention(s), feed-forward and the norms of an encoder or decoder layer; PyTorch's norms are
    numbered in the order of our residual sublayers."""
    ours_norm_first = getattr(ours, residuals[0]).norm_first
    if ours_norm_first != theirs.norm_first:
        raise TypeError(
            f"norm_first differs: ours {ours_norm_first}, PyTorch's {theirs.norm_first}"
        )
    ours_activation, theirs_activation = (
        ours.feed_forward.activation,
        _torch_activation_name(theirs.activation),
    )
    if ours_activation != theirs_activation:
        raise TypeError(
            f"feed-forward activations differ: ours {ours_activation!r}, PyTorch's "
            f"{theirs_activation!r}; build ours with the same activation (the default 'relu' is "
            "the paper's ReLU)"
        )
    pairs = []
    for our_name, their_name in attentions:
        pairs += _attention_pairs(
            getattr(ours, our_name), getattr(theirs, their_name), f"{our_name}."
        )
    for name in ("linear1", "linear2"):
        ours_linear, theirs_linear = getattr(ours.feed_forward, name), getattr(theirs, name)
        pairs += _tensor_pair(
            f"feed_forward.{name}.weight", ours_linear.weight, theirs_linear.weight
        )
        pairs += _tensor_pair(f"feed_forward.{name}.bias", ours_linear.bias, theirs_linear.bias)
    for number, residual in enumerate(residuals, start=1):
        ours_norm, theirs_norm = getattr(ours, residual).norm, getattr(theirs, f"norm{number}")
        if not isinstance(ours_norm, LayerNorm):
            raise TypeError(
                f"{residual}.norm: ours is {type(ours_norm).__name__}, PyTorch's layers use "
                "LayerNorm"
            )
        if ours_norm.eps != theirs_norm.eps:
            raise TypeError(
                f"{residual}.norm eps differs: ours {ours_norm.eps}, PyTorch's {theirs_norm.eps}"
            )
        pairs += _tensor_pair(f"{residual}.norm.weight", ours_norm.weight, theirs_norm.weight)
        pairs += _tensor_pair(f"{residual}.norm.bias", ours_norm.bias, theirs_norm.bias)
    return pairs


# --------------------------------------------------------------------------------------------------
# Hugging Face


def _import_transformers():
    try:
        import transformers
    except ImportError as error:
        raise ImportError(
            "from_huggingface and config_from_huggingface need the optional package transformers "
            "(pip install transformers); the rest of transformer_lib works without it"
        ) from error
    return transformers


# Hugging Face's activation names (ACT2FN) -> ours (layers.ACTIVATIONS).
_HF_ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
}


def _activation(name: str, model_type: str) -> str:
    if name not in _HF_ACTIVATIONS:
        raise ValueError(
            f"the {model_type} config's activation {name!r} has no counterpart here; "
            f"supported: {sorted(_HF_ACTIVATIONS)}"
        )
    return _HF_ACTIVATIONS[name]


def _require(condition: bool, what: str) -> None:
    """A clear error for a Hugging Face setting that our blocks do not implement."""
    if not condition:
        raise ValueError(f"cannot copy this model: {what}")


def config_from_huggingface(hf_config):
    """Our config for a Hugging Face config: ``GPT2Config``, ``BertConfig`` and ``LlamaConfig`` ->
    :class:`~transformer_lib.LMConfig`, ``MarianConfig`` ->
    :class:`~transformer_lib.TransformerConfig`. Each field comes from the matching HF field; the
    options that make our block theirs are switched on (the option table at the top of
    ``model/transformer.py`` lists them). Each family's function (``_gpt2_config``, ...; the table
    :data:`HUGGINGFACE_FAMILIES` picks it by ``model_type``) says what it leaves out.

    Raises:
        ValueError: for a model type other than gpt2, bert, marian or llama, or a setting our blocks
            do not implement.
    """
    kind = getattr(hf_config, "model_type", None)
    for family in HUGGINGFACE_FAMILIES.values():
        if family.model_type == kind:
            return family.config(hf_config)
    *first, last = [family.model_type for family in HUGGINGFACE_FAMILIES.values()]
    raise ValueError(
        f"config_from_huggingface reads {', '.join(first)} and {last} configs, got "
        f"model_type={kind!r}"
    )


def _gpt2_config(c):
    """GPT-2: pre-LN, learned positions, no padding token. ``embd_pdrop`` (training only) is left
    out: ours uses ``resid_pdrop`` everywhere."""
    from ..model.lm import LMConfig

    _require(
        c.scale_attn_weights,
        "GPT-2 with scale_attn_weights=False (ours always divides by sqrt(d_k))",
    )
    _require(
        not c.scale_attn_by_inverse_layer_idx, "GPT-2 with scale_attn_by_inverse_layer_idx=True"
    )
    _require(not c.add_cross_attention, "GPT-2 with add_cross_attention=True")
    return LMConfig(
        vocab_size=c.vocab_size,
        d_model=c.n_embd,
        num_heads=c.n_head,
        d_ff=c.n_inner if c.n_inner is not None else 4 * c.n_embd,
        num_layers=c.n_layer,
        dropout=c.resid_pdrop,
        max_len=c.n_positions,
        positional="learned",
        norm_first=True,  # GPT-2: LayerNorm before each sublayer, and a final one (ln_f)
        pad_id=None,  # GPT-2 has no padding token (pad_token_id is usually unset, or borrows eos)
        activation=_activation(c.activation_function, "gpt2"),
        scale_embeddings=False,
        layer_norm_eps=c.layer_norm_epsilon,
        attention_dropout=c.attn_pdrop,
        tie_embeddings=c.tie_word_embeddings,
    )


def _bert_config(c):
    """BERT: post-LN, learned absolute positions, a LayerNorm on the embeddings, token types."""
    from ..model.lm import LMConfig

    position_kind = getattr(c, "position_embedding_type", "absolute")
    _require(
        position_kind == "absolute",
        f"BERT with position_embedding_type={position_kind!r} (ours: absolute)",
    )
    _require(not c.is_decoder, "BERT with is_decoder=True (ours is the bidirectional masked model)")
    _require(
        c.hidden_act == "gelu",
        f"BERT with hidden_act={c.hidden_act!r}: our MaskedLM head uses GELU",
    )
    return LMConfig(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        num_heads=c.num_attention_heads,
        d_ff=c.intermediate_size,
        num_layers=c.num_hidden_layers,
        dropout=c.hidden_dropout_prob,
        max_len=c.max_position_embeddings,
        positional="learned",
        norm_first=False,  # BERT is post-LN, as the paper
        pad_id=c.pad_token_id,
        activation=_activation(c.hidden_act, "bert"),
        scale_embeddings=False,
        layer_norm_eps=c.layer_norm_eps,
        embedding_norm=True,
        attention_dropout=c.attention_probs_dropout_prob,
        type_vocab_size=c.type_vocab_size,
        tie_embeddings=c.tie_word_embeddings,
    )


def _marian_config(c):
    """MarianMT: the paper's post-LN encoder-decoder with "halves" sinusoids and a bias on the
    output. ``activation_dropout`` and layer drop (training only) are left out."""
    from ..model.transformer import TransformerConfig

    _require(
        c.share_encoder_decoder_embeddings, "Marian with separate source and target embeddings"
    )
    _require(c.tie_word_embeddings, "Marian with an output projection not tied to the embeddings")
    _require(
        c.decoder_vocab_size in (None, c.vocab_size), "Marian with decoder_vocab_size != vocab_size"
    )
    _require(
        c.encoder_attention_heads == c.decoder_attention_heads
        and c.encoder_ffn_dim == c.decoder_ffn_dim,
        "Marian whose encoder and decoder differ in heads or d_ff (ours differ only in depth)",
    )
    return TransformerConfig(
        src_vocab_size=c.vocab_size,
        tgt_vocab_size=c.vocab_size,
        d_model=c.d_model,
        num_heads=c.encoder_attention_heads,
        d_ff=c.encoder_ffn_dim,
        num_layers=c.encoder_layers,
        num_decoder_layers=c.decoder_layers,
        dropout=c.dropout,
        attention_dropout=c.attention_dropout,
        norm_first=False,  # Marian is post-LN, as the paper
        share_embeddings=True,
        max_len=c.max_position_embeddings,
        pad_id=c.pad_token_id,
        positional="sinusoidal",
        sinusoid_layout="halves",
        activation=_activation(c.activation_function, "marian"),
        scale_embeddings=c.scale_embedding,
        output_bias=True,  # final_logits_bias
    )


def _llama_config(c):
    """Llama: pre-norm RMSNorm, rotary positions read from ``rope_parameters`` (only
    ``rope_type="default"``), SwiGLU, grouped-query attention, one bias switch, no dropout."""
    from ..model.lm import LMConfig

    rope = c.rope_parameters or {}
    _require(
        rope.get("rope_type", "default") == "default",
        f"Llama with rope_type={rope.get('rope_type')!r} (ours: the original RoPE frequencies, "
        "'default')",
    )
    _require(
        c.head_dim == c.hidden_size // c.num_attention_heads,
        f"Llama with head_dim={c.head_dim} != hidden_size // num_attention_heads (ours: d_k = "
        "d_model // h)",
    )
    _require(
        c.attention_bias == c.mlp_bias,
        f"Llama with attention_bias={c.attention_bias} but mlp_bias={c.mlp_bias} (ours: one bias "
        "switch)",
    )
    _require(
        c.hidden_act == "silu",
        f"Llama with hidden_act={c.hidden_act!r}: our gated feed-forward is SwiGLU",
    )
    return LMConfig(
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        num_heads=c.num_attention_heads,
        d_ff=c.intermediate_size,
        num_layers=c.num_hidden_layers,
        dropout=0.0,  # Llama has no dropout on sublayer outputs or embeddings
        max_len=c.max_position_embeddings,
        positional="rope",
        norm_first=True,  # pre-norm, and a final norm (model.norm)
        pad_id=c.pad_token_id,
        activation="swiglu",
        scale_embeddings=False,
        layer_norm_eps=c.rms_norm_eps,
        attention_dropout=float(c.attention_dropout),
        tie_embeddings=c.tie_word_embeddings,
        norm="rmsnorm",
        rope_theta=float(rope.get("rope_theta", 10000.0)),
        n_kv_heads=c.num_key_value_heads,
        bias=c.attention_bias,
    )


def from_huggingface(hf_model) -> nn.Module:
    """The library's model computing the same function as a Hugging Face model, with its weights
    copied.

    Supported (:data:`HUGGINGFACE_MODELS`): ``GPT2LMHeadModel`` ->
    :class:`~transformer_lib.DecoderOnlyLM`, ``BertForMaskedLM`` ->
    :class:`~transformer_lib.MaskedLM`, ``MarianMTModel`` -> :class:`~transformer_lib.Transformer`,
    each with the config :func:`config_from_huggingface` derives. The model is returned in eval mode
    (as ``from_pretrained`` returns theirs) and in float32. Then, in eval mode:

    - GPT-2: ``ours(ids, mask=attention_mask.bool()[:, None, None, :])`` equals
      ``theirs(ids, attention_mask=attention_mask).logits`` at every real position;
    - BERT: ``ours(ids, mask=..., token_types=token_type_ids)`` equals theirs likewise;
    - Marian: ``ours(src, tgt, src_mask=..., tgt_mask=causal_mask(T))`` equals
      ``theirs(src, attention_mask, decoder_input_ids=tgt).logits``: Marian starts the target with
      ``pad_token_id`` and does not hide it, so pass the causal mask rather than letting ours hide
      target padding;
    - Llama (``LlamaForCausalLM`` -> :class:`~transformer_lib.DecoderOnlyLM`): as GPT-2. Its query
      and key rows are permuted on the way in, from Hugging Face's "rotate half" pairs to ours
      (:func:`_rope_rows`).

    Raises:
        ImportError: ``transformers`` is not installed.
        TypeError: ``hf_model`` is not one of the supported classes (the error lists them).
        ValueError: a setting of its config that our blocks do not implement.
    """
    transformers = _import_transformers()
    matches = [
        name for name in HUGGINGFACE_FAMILIES if isinstance(hf_model, getattr(transformers, name))
    ]
    if not matches:
        raise TypeError(
            f"from_huggingface copies {', '.join(HUGGINGFACE_MODELS)}; got "
            f"{type(hf_model).__name__}"
        )
    family = HUGGINGFACE_FAMILIES[matches[0]]
    module, name = family.ours.split(".")
    ours_class = getattr(importlib.import_module(f"..model.{module}", __package__), name)
    ours = ours_class(family.config(hf_model.config))
    pairs = family.pairs(ours, hf_model)  # every pair is checked before the first copy
    with torch.no_grad():
        for destination, source in pairs:
            destination.copy_(source)
    return ours.eval()


def _hf_pair(name: str, destination: torch.Tensor, source: torch.Tensor) -> list:
    return _tensor_pair(name, destination, source, theirs="Hugging Face's")


def _linear_pairs(
    name: str, ours: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None
) -> list:
    return _hf_pair(f"{name}.weight", ours.weight, weight) + _hf_pair(
        f"{name}.bias", ours.bias, bias
    )


def _norm_pairs(name: str, ours: nn.Module, theirs: nn.Module) -> list:
    """A LayerNorm (gain and shift) or an RMSNorm (gain only: no ``bias`` on either side; Llama's
    calls its eps ``variance_epsilon``)."""
    their_eps = theirs.eps if hasattr(theirs, "eps") else theirs.variance_epsilon
    # the config derivation sets it; a mismatch here is a bug, not a user error
    if ours.eps != their_eps:
        raise TypeError(f"{name} eps differs: ours {ours.eps}, Hugging Face's {their_eps}")
    bias_pair = _hf_pair(f"{name}.bias", getattr(ours, "bias", None), getattr(theirs, "bias", None))
    return _hf_pair(f"{name}.weight", ours.weight, theirs.weight) + bias_pair


def _output_pairs(ours, hf_model) -> list:
    """The untied output matrix, when the model has one (``tie_embeddings=False``)."""
    if ours.output is None:
        return []
    return _hf_pair("output.weight", ours.output.weight, hf_model.get_output_embeddings().weight)


def _gpt2_pairs(ours, hf_model) -> list:
    t = hf_model.transformer
    pairs = _hf_pair("embed", ours.embed.weight, t.wte.weight)
    pairs += _hf_pair("positions", ours.positions.embedding.weight, t.wpe.weight)
    for i, (layer, block) in enumerate(zip(ours.blocks.layers, t.h, strict=True)):
        p = f"blocks.layers.{i}."
        # GPT-2's Conv1D stores its weight transposed, (in_features, out_features), where nn.Linear
        # stores (out_features, in_features): every Conv1D weight is transposed (.T) on the way in.
        # c_attn fuses the query, key and value projections along its output axis.
        d_model, fused = ours.config.d_model, block.attn.c_attn
        q, k, v = fused.weight.split(d_model, dim=1)  # 3 x (d_model in, d_model out)
        bq, bk, bv = fused.bias.split(d_model)  # 3 x (d_model,)
        attn = layer.self_attn
        pairs += _linear_pairs(p + "self_attn.w_q", attn.w_q, q.T, bq)
        pairs += _linear_pairs(p + "self_attn.w_k", attn.w_k, k.T, bk)
        pairs += _linear_pairs(p + "self_attn.w_v", attn.w_v, v.T, bv)
        pairs += _linear_pairs(
            p + "self_attn.w_o", attn.w_o, block.attn.c_proj.weight.T, block.attn.c_proj.bias
        )
        ff, mlp = layer.feed_forward, block.mlp
        pairs += _linear_pairs(
            p + "feed_forward.linear1", ff.linear1, mlp.c_fc.weight.T, mlp.c_fc.bias
        )
        pairs += _linear_pairs(
            p + "feed_forward.linear2", ff.linear2, mlp.c_proj.weight.T, mlp.c_proj.bias
        )
        pairs += _norm_pairs(p + "residual_attn.norm", layer.residual_attn.norm, block.ln_1)
        pairs += _norm_pairs(p + "residual_ff.norm", layer.residual_ff.norm, block.ln_2)
    pairs += _norm_pairs("blocks.final_norm", ours.blocks.final_norm, t.ln_f)
    return pairs + _output_pairs(ours, hf_model)


def _bert_pairs(ours, hf_model) -> list:
    e = hf_model.bert.embeddings
    pairs = _hf_pair("embed", ours.embed.weight, e.word_embeddings.weight)
    pairs += _hf_pair("positions", ours.positions.embedding.weight, e.position_embeddings.weight)
    pairs += _hf_pair(
        "token_type_embed", ours.token_type_embed.weight, e.token_type_embeddings.weight
    )
    pairs += _norm_pairs("positions.norm", ours.positions.norm, e.LayerNorm)  # LN(tok + pos + type)
    for i, (layer, block) in enumerate(
        zip(ours.blocks.layers, hf_model.bert.encoder.layer, strict=True)
    ):
        p = f"blocks.layers.{i}."
        attn, theirs = layer.self_attn, block.attention
        linears = [
            ("self_attn.w_q", attn.w_q, theirs.self.query),
            ("self_attn.w_k", attn.w_k, theirs.self.key),
            ("self_attn.w_v", attn.w_v, theirs.self.value),
            ("self_attn.w_o", attn.w_o, theirs.output.dense),
            ("feed_forward.linear1", layer.feed_forward.linear1, block.intermediate.dense),
            ("feed_forward.linear2", layer.feed_forward.linear2, block.output.dense),
        ]
        # nn.Linear on both sides: same (out, in) layout
        for name, ours_linear, their_linear in linears:
            pairs += _linear_pairs(p + name, ours_linear, their_linear.weight, their_linear.bias)
        pairs += _norm_pairs(
            p + "residual_attn.norm", layer.residual_attn.norm, theirs.output.LayerNorm
        )
        pairs += _norm_pairs(p + "residual_ff.norm", layer.residual_ff.norm, block.output.LayerNorm)
    head = hf_model.cls.predictions
    pairs += _linear_pairs(
        "head.dense", ours.head.dense, head.transform.dense.weight, head.transform.dense.bias
    )
    pairs += _norm_pairs("head.norm", ours.head.norm, head.transform.LayerNorm)
    pairs += _hf_pair("head.output_bias", ours.head.output_bias, head.bias)
    return pairs + _output_pairs(ours, hf_model)


def _marian_attention_pairs(name: str, ours: MultiHeadAttention, theirs: nn.Module) -> list:
    pairs = []
    for ours_name, their_name in (
        ("w_q", "q_proj"),
        ("w_k", "k_proj"),
        ("w_v", "v_proj"),
        ("w_o", "out_proj"),
    ):
        their_linear = getattr(theirs, their_name)
        ours_linear = getattr(ours, ours_name)
        pairs += _linear_pairs(
            f"{name}.{ours_name}", ours_linear, their_linear.weight, their_linear.bias
        )
    return pairs


def _marian_pairs(ours, hf_model) -> list:
    m = hf_model.model
    _require(
        torch.equal(m.encoder.embed_positions.weight, m.decoder.embed_positions.weight),
        "Marian whose encoder and decoder position tables differ (ours share one sinusoid table)",
    )
    pairs = _hf_pair("src_embed", ours.src_embed.weight, m.shared.weight)  # = tgt_embed, output
    # Marian computes its sinusoid table in float64 ("halves" layout); ours (float32) differs by
    # float32 rounding of the angles, so copy theirs: the two then agree to the last bit at every
    # position.
    pairs += _hf_pair("positions.pe", ours.positions.pe[0], m.encoder.embed_positions.weight)
    pairs += _hf_pair(
        "output_projection.bias", ours.output_projection.bias, hf_model.final_logits_bias[0]
    )
    for i, (layer, block) in enumerate(zip(ours.encoder.layers, m.encoder.layers, strict=True)):
        p = f"encoder.layers.{i}."
        pairs += _marian_attention_pairs(p + "self_attn", layer.self_attn, block.self_attn)
        pairs += _norm_pairs(
            p + "residual_attn.norm", layer.residual_attn.norm, block.self_attn_layer_norm
        )
        pairs += _marian_feed_forward_pairs(p, layer, block)
    for i, (layer, block) in enumerate(zip(ours.decoder.layers, m.decoder.layers, strict=True)):
        p = f"decoder.layers.{i}."
        pairs += _marian_attention_pairs(p + "self_attn", layer.self_attn, block.self_attn)
        pairs += _norm_pairs(
            p + "residual_self.norm", layer.residual_self.norm, block.self_attn_layer_norm
        )
        pairs += _marian_attention_pairs(p + "cross_attn", layer.cross_attn, block.encoder_attn)
        pairs += _norm_pairs(
            p + "residual_cross.norm", layer.residual_cross.norm, block.encoder_attn_layer_norm
        )
        pairs += _marian_feed_forward_pairs(p, layer, block)
    return pairs


def _marian_feed_forward_pairs(prefix: str, layer: nn.Module, block: nn.Module) -> list:
    ff = layer.feed_forward
    pairs = _linear_pairs(
        prefix + "feed_forward.linear1", ff.linear1, block.fc1.weight, block.fc1.bias
    )
    pairs += _linear_pairs(
        prefix + "feed_forward.linear2", ff.linear2, block.fc2.weight, block.fc2.bias
    )
    return pairs + _norm_pairs(
        prefix + "residual_ff.norm", layer.residual_ff.norm, block.final_layer_norm
    )


def _rope_rows(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Hugging Face's query or key projection rows ``(num_heads * d_k, ...)`` (a weight, or a bias)
    reordered for our :func:`~transformer_lib.model.attention.apply_rope`.

    Both rotate the same pairs of features at the same frequencies; they differ in where a pair
    sits. Ours (and Meta's original Llama) rotates neighbours, features ``(2i, 2i+1)``; Hugging
    Face's "rotate half" rotates ``(i, i + d_k/2)`` (its conversion script permuted Meta's rows this
    way). So within each head our row ``2i`` is their row ``i`` and our row ``2i+1`` is their row
    ``i + d_k/2``::

        theirs: x0 x1 x2 | y0 y1 y2        (pair i = (x_i, y_i))
        ours:   x0 y0 x1 y1 x2 y2

    Queries and keys get the same permutation, so every head's dot products, hence the scores, are
    unchanged; values and the output projection are not rotated and keep their rows.
    """
    rows = weight.size(0)
    d_k = rows // num_heads
    per_head = weight.reshape(num_heads, 2, d_k // 2, *weight.shape[1:])  # (h, [x | y], d_k/2, ...)
    return per_head.transpose(1, 2).reshape(rows, *weight.shape[1:])  # (h * d_k, ...): x0 y0 x1 ...


def _llama_pairs(ours, hf_model) -> list:
    m, c = hf_model.model, ours.config
    pairs = _hf_pair("embed", ours.embed.weight, m.embed_tokens.weight)
    for i, (layer, block) in enumerate(zip(ours.blocks.layers, m.layers, strict=True)):
        p = f"blocks.layers.{i}."
        attn, theirs = layer.self_attn, block.self_attn
        # RoPE layout: Hugging Face rotates (i, i + d_k/2), ours (2i, 2i+1); the query and key rows
        # are permuted here, at the copy, so that the same pairs turn together (see _rope_rows).
        # Keys have n_kv_heads heads.
        rotated = (("w_q", theirs.q_proj, c.num_heads), ("w_k", theirs.k_proj, attn.n_kv_heads))
        for ours_name, their_linear, heads in rotated:
            bias = None if their_linear.bias is None else _rope_rows(their_linear.bias, heads)
            pairs += _linear_pairs(
                f"{p}self_attn.{ours_name}",
                getattr(attn, ours_name),
                _rope_rows(their_linear.weight, heads),
                bias,
            )
        pairs += _linear_pairs(
            p + "self_attn.w_v", attn.w_v, theirs.v_proj.weight, theirs.v_proj.bias
        )
        pairs += _linear_pairs(
            p + "self_attn.w_o", attn.w_o, theirs.o_proj.weight, theirs.o_proj.bias
        )
        # down(silu(gate(x)) * up(x)): ours gate, linear1, linear2
        ff, mlp = layer.feed_forward, block.mlp
        pairs += _linear_pairs(
            p + "feed_forward.gate", ff.gate, mlp.gate_proj.weight, mlp.gate_proj.bias
        )
        pairs += _linear_pairs(
            p + "feed_forward.linear1", ff.linear1, mlp.up_proj.weight, mlp.up_proj.bias
        )
        pairs += _linear_pairs(
            p + "feed_forward.linear2", ff.linear2, mlp.down_proj.weight, mlp.down_proj.bias
        )
        pairs += _norm_pairs(
            p + "residual_attn.norm", layer.residual_attn.norm, block.input_layernorm
        )
        pairs += _norm_pairs(
            p + "residual_ff.norm", layer.residual_ff.norm, block.post_attention_layernorm
        )
    pairs += _norm_pairs("blocks.final_norm", ours.blocks.final_norm, m.norm)
    return pairs + _output_pairs(ours, hf_model)


# --------------------------------------------------------------------------------------------------
# The one table of Hugging Face families. Adding one (say Mistral) is a config function, a pairs
# function (or Llama's, when the module names match) and a row here.


@dataclass(frozen=True)
class HuggingFaceFamily:
    """How one Hugging Face model class becomes ours: the ``model_type`` its config carries, our
    model (``"lm.DecoderOnlyLM"``: a class in ``transformer_lib.model``), the function from its
    config to ours, and the function listing the checked (destination, source) weight pairs."""

    model_type: str
    ours: str
    config: Callable
    pairs: Callable


HUGGINGFACE_FAMILIES = {
    "GPT2LMHeadModel": HuggingFaceFamily("gpt2", "lm.DecoderOnlyLM", _gpt2_config, _gpt2_pairs),
    "BertForMaskedLM": HuggingFaceFamily("bert", "lm.MaskedLM", _bert_config, _bert_pairs),
    "MarianMTModel": HuggingFaceFamily(
        "marian", "transformer.Transformer", _marian_config, _marian_pairs
    ),
    "LlamaForCausalLM": HuggingFaceFamily("llama", "lm.DecoderOnlyLM", _llama_config, _llama_pairs),
}

# The Hugging Face classes from_huggingface copies, and the library's model each becomes.
HUGGINGFACE_MODELS = {name: family.ours for name, family in HUGGINGFACE_FAMILIES.items()}
