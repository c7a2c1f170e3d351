"""The full encoder-decoder Transformer, its configuration and presets, and parameter counts."""

import dataclasses
import numbers
from dataclasses import dataclass, field

import torch
from torch import nn

from .._arguments import (
    check_bools,
    check_choice,
    check_heads,
    check_positive_ints,
    check_positive_real,
    check_probability,
    check_token_batch,
    check_token_id,
    is_int,
)
from .decoder import Decoder, DecoderCache
from .encoder import Encoder
from .layers import (
    FFN_ACTIVATIONS,
    NORMS,
    SINUSOID_LAYOUTS,
    BlockOptions,
    LearnedPositionalEncoding,
    PositionalEncoding,
    RotaryPositions,
    TokenEmbedding,
)
from .masks import causal_mask, padding_mask

__all__ = [
    "check_config",
    "config_repr",
    "head_width",
    "make_positions",
    "block_options",
    "ModelOptions",
    "init_projections",
    "TransformerConfig",
    "Transformer",
    "count_parameters",
]

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope")


def option(default):
    """A config field for an option: kept out of the printed config while it is the default."""
    return field(default=default, repr=False)


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """The options both model configs (:class:`TransformerConfig`, ``lm.LMConfig``) share besides
    their sizes, declared once here, with the paper's choice as the default. They are keyword-only
    and print only when they differ from the paper's (:func:`config_repr`), so a config made
    without them prints as it always did.

    activation        "relu" (paper) | "gelu" (BERT) | "gelu_tanh" (GPT-2) | "silu" (MarianMT)
                      | "swiglu" (Llama): gated, down(silu(gate(x)) * up(x)), hidden width d_ff
    scale_embeddings  True: token vectors times sqrt(d_model) (paper §3.4); False: GPT-2, BERT
    layer_norm_eps    1e-5 (nn.LayerNorm, GPT-2, Marian); 1e-12 (BERT); every norm
    embedding_norm    False; True: LayerNorm(token + position) before the dropout (BERT)
    sinusoid_layout   "interleaved" (paper formula) | "halves" (sines, then cosines: MarianMT)
    norm              "layernorm" (paper) | "rmsnorm" (Llama): every sublayer's norm, the final one
    rope_theta        10000.0; the base of the rotary frequencies, read with positional="rope"
    n_kv_heads        None (= num_heads, paper); fewer: grouped-query, 1: multi-query (Llama)
    bias              True (paper); False: no bias in any attention or feed-forward Linear (Llama)
    d_k, d_v          None (= d_model // num_heads, paper); per-head widths (Table 3 rows B)

    positional="rope" (Llama) is a value of each config's ``positional`` field: nothing is added
    to the token vectors, each self-attention rotates its queries and keys
    (layers.RotaryPositions, attention.apply_rope). The block's share of them reaches the layers
    as one :class:`~transformer_lib.model.layers.BlockOptions` (:func:`block_options`).
    """

    activation: str = option("relu")
    scale_embeddings: bool = option(True)
    layer_norm_eps: float = option(1e-5)
    embedding_norm: bool = option(False)
    sinusoid_layout: str = option("interleaved")
    norm: str = option("layernorm")
    rope_theta: float = option(10000.0)
    n_kv_heads: int | None = option(None)
    bias: bool = option(True)
    d_k: int | None = option(None)
    d_v: int | None = option(None)


def config_repr(config) -> str:
    """``Name(field=value, ...)``: every size and paper field, then the options that differ from
    their default.

    Configs made with the paper's choices print exactly as before the options existed (the notebooks
    show them); a GPT-2 config prints ``..., activation='gelu_tanh', scale_embeddings=False, ...``
    after the usual fields.
    """
    fields = dataclasses.fields(config)
    shown = []
    # Sizes and paper fields first, then options (a subclass's own after the shared ones).
    for f in [f for f in fields if f.repr] + [f for f in fields if not f.repr]:
        value = getattr(config, f.name)
        if f.repr or value != f.default:
            shown.append(f"{f.name}={value!r}")
    return f"{type(config).__name__}({', '.join(shown)})"


def check_config(config, vocab_sizes: dict[str, int]) -> None:
    """The checks every model config shares (:class:`TransformerConfig`, ``lm.LMConfig``); each
    error names the field and its value.

    Positive whole sizes; every ``*dropout`` field a probability in [0, 1); NumPy numbers stored as
    Python numbers (a config built from a grid or a CSV compares and prints like any other); every
    field declared ``bool`` a real bool; a ``pad_id`` inside every vocabulary (or ``None``: no
    padding token); known choices; a ``layer_norm_eps`` and ``rope_theta`` above 0 (``rope_theta``
    changed only with ``positional="rope"``); the head layout (``_arguments.check_heads``). The
    checks read the field declarations, so a new bool or dropout option is checked without a line
    here.
    """
    c = config
    fields = dataclasses.fields(c)
    sizes = ("d_model", "num_heads", "d_ff", "num_layers", "max_len")
    check_positive_ints(**vocab_sizes, **{name: getattr(c, name) for name in sizes})
    check_probability(**{f.name: getattr(c, f.name) for f in fields if f.name.endswith("dropout")})
    for f in fields:  # NumPy scalars (from a grid, a CSV) become Python numbers
        value = getattr(c, f.name)
        if is_int(value) and not isinstance(value, int):
            object.__setattr__(c, f.name, int(value))
        elif isinstance(value, numbers.Real) and not isinstance(value, (int, float)):
            object.__setattr__(c, f.name, float(value))
    check_bools(**{f.name: getattr(c, f.name) for f in fields if f.type is bool})
    if c.pad_id is not None:
        sizes = ", ".join(f"{name}={size}" for name, size in vocab_sizes.items())
        hint = "(or None for a language model without a padding token)"
        check_token_id("pad_id", c.pad_id, min(vocab_sizes.values()), sizes, hint)
    check_choice("positional", c.positional, POSITIONAL_KINDS)
    check_choice("sinusoid_layout", c.sinusoid_layout, SINUSOID_LAYOUTS)
    check_choice("activation", c.activation, FFN_ACTIVATIONS)
    check_choice("norm", c.norm, tuple(NORMS))
    check_positive_real(layer_norm_eps=c.layer_norm_eps, rope_theta=c.rope_theta)
    check_heads(c.d_model, c.num_heads, c.n_kv_heads, c.d_k, c.d_v, rope=c.positional == "rope")
    default_theta = next(f.default for f in fields if f.name == "rope_theta")
    if c.positional != "rope" and c.rope_theta != default_theta:
        raise ValueError(
            f"rope_theta={c.rope_theta} is read only with positional='rope', got "
            f"positional={c.positional!r}"
        )


def head_width(config, values: bool = False) -> int:
    """A config's per-head width: ``d_k`` (or with ``values``, ``d_v``), ``d_model // num_heads``
    unless set."""
    width = config.d_v if values else config.d_k
    return width if width is not None else config.d_model // config.num_heads


def make_positions(config) -> nn.Module:
    """The positional encoding a config asks for (both model families read it here): sinusoids in
    ``sinusoid_layout``, a learned table, or nothing added for rotary positions (attention rotates
    instead), with BERT's ``embedding_norm`` if set, then dropout."""
    c = config
    norm = dict(norm=c.embedding_norm, eps=c.layer_norm_eps)
    if c.positional == "sinusoidal":
        return PositionalEncoding(c.d_model, c.max_len, c.dropout, layout=c.sinusoid_layout, **norm)
    if c.positional == "rope":
        return RotaryPositions(c.d_model, c.max_len, c.dropout, **norm)
    return LearnedPositionalEncoding(c.d_model, c.max_len, c.dropout, **norm)


def block_options(config) -> BlockOptions:
    """The :class:`~transformer_lib.model.layers.BlockOptions` of a config's layers (both model
    families build their stacks from it): every field of ``BlockOptions`` is read from the config
    field of the same name, ``rope_theta`` only when ``positional="rope"`` (else ``None``)."""
    shared = {f.name: getattr(config, f.name) for f in dataclasses.fields(BlockOptions)}
    shared["rope_theta"] = config.rope_theta if config.positional == "rope" else None
    return BlockOptions(**shared)


def init_projections(model: nn.Module) -> None:
    """Xavier-uniform for every projection matrix of ``model``, as in the reference implementations;
    the embedding tables (tokens, and learned positions: ``positions.embedding``) keep their own
    initialisation. Used by :class:`Transformer` and by the language models of
    :mod:`transformer_lib.model.lm`."""
    for name, p in model.named_parameters():
        if p.dim() > 1 and "embed" not in name:
            nn.init.xavier_uniform_(p)


@dataclass(frozen=True)
class TransformerConfig(ModelOptions):
    """Every size and option of a :class:`Transformer`. The presets below are the ones the course
    uses.

    With ``share_embeddings=True`` (the paper's choice for its shared source/target BPE vocabulary)
    the source embedding, the target embedding and the output projection are one matrix, and the two
    vocabularies must be the same size. ``positional`` picks how positions enter: ``"sinusoidal"``
    (the paper's fixed table) or ``"learned"`` (an ``nn.Embedding(max_len, d_model)``,
    ``max_len * d_model`` more parameters; Table 3 row E). ``pad_id`` is the padding token of both
    vocabularies, so ``0 <= pad_id < min(src_vocab_size, tgt_vocab_size)``. Every field is checked
    when the config is made, and an error names the field and its value.

    The options default to the paper; they let the same model be MarianMT
    (``interop.from_huggingface``) or take Llama's block. Those both configs share are declared
    once in :class:`ModelOptions` (``activation``, ``norm``, ``d_k``, ...); this one adds
    ``output_bias`` (a bias per target token on the output projection; Marian's
    ``final_logits_bias``) and ``num_decoder_layers`` (the decoder's depth when it differs from the
    encoder's ``num_layers``; ``None``: the same). In the encoder-decoder, rotary positions act in
    both self-attentions, never in cross-attention.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm_first: bool = False
    share_embeddings: bool = True
    max_len: int = 5000
    pad_id: int = 0
    positional: str = "sinusoidal"
    output_bias: bool = option(False)
    num_decoder_layers: int | None = option(None)

    __repr__ = config_repr

    def __post_init__(self):
        vocab_sizes = {"src_vocab_size": self.src_vocab_size, "tgt_vocab_size": self.tgt_vocab_size}
        check_config(self, vocab_sizes)
        if self.pad_id is None:
            raise ValueError(
                "pad_id=None is for the language models: the encoder-decoder needs a padding token "
                "id (its decoders pad finished rows with it and never emit it)"
            )
        if self.num_decoder_layers is not None:
            check_positive_ints(num_decoder_layers=self.num_decoder_layers)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one vocabulary, got "
                f"src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed: ``config.replace(num_layers=2)``."""
        return dataclasses.replace(self, **changes)

    @property
    def decoder_layers(self) -> int:
        """The decoder's depth: ``num_decoder_layers``, or ``num_layers`` when that is ``None`` (the
        paper's N)."""
        return self.num_layers if self.num_decoder_layers is None else self.num_decoder_layers

    @classmethod
    def paper_base(cls, vocab_size: int = 37000) -> "TransformerConfig":
        """The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (its
        eps_ls=0.1 is the training recipe's,
        :class:`~transformer_lib.training.train.TrainingRecipe`)."""
        return cls(vocab_size, vocab_size)

    @classmethod
    def paper_big(cls, vocab_size: int = 37000) -> "TransformerConfig":
        """The paper's big model (Table 3): d_model=1024, d_ff=4096, h=16, P_drop=0.3."""
        return cls(vocab_size, vocab_size, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3)

    @classmethod
    def cpu_tiny(cls, vocab_size: int) -> "TransformerConfig":
        """Trains on a laptop CPU in seconds (copy and reverse tasks, date translation)."""
        return cls(
            vocab_size,
            vocab_size,
            d_model=64,
            num_heads=4,
            d_ff=256,
            num_layers=1,
            dropout=0.0,
            max_len=256,
        )

    @classmethod
    def cpu_small(cls, vocab_size: int) -> "TransformerConfig":
        """Two layers, small enough for the CPU, deep enough to show layers and heads doing
        different work."""
        return cls(
            vocab_size,
            vocab_size,
            d_model=128,
            num_heads=4,
            d_ff=512,
            num_layers=2,
            dropout=0.1,
            max_len=256,
        )


class Transformer(nn.Module):
    """The encoder-decoder of *Attention Is All You Need*.

    ``forward(src, tgt) -> logits (B, T_tgt, tgt_vocab_size)``: the logits at position ``t``
    predict target token ``t + 1`` having seen ``tgt[:, : t + 1]`` and the whole source. Masks are
    built from ``pad_id`` when not given. ``encode`` and ``decode`` are the two halves, used
    separately when generating.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        c = config
        scale = c.scale_embeddings
        self.src_embed = TokenEmbedding(
            c.src_vocab_size, c.d_model, padding_idx=c.pad_id, scale=scale
        )
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id, scale)
        )
        self.positions = make_positions(c)
        sizes = (c.d_model, c.num_heads, c.d_ff)
        self.encoder = Encoder(c.num_layers, *sizes, block_options(c))
        self.decoder = Decoder(c.decoder_layers, *sizes, block_options(c))
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=c.output_bias)
        if c.share_embeddings:
            self.output_projection.weight = self.tgt_embed.weight  # one matrix: paper §3.4
        init_projections(self)
        if c.output_bias:
            # every token starts equally likely, as with no bias
            nn.init.zeros_(self.output_projection.bias)

    def source_mask(self, src: torch.Tensor) -> torch.Tensor:
        """``(B, 1, 1, T_src)``: True at real source tokens."""
        return padding_mask(src, self.config.pad_id)

    def target_mask(self, tgt: torch.Tensor) -> torch.Tensor:
        """``(B, 1, T_tgt, T_tgt)``: causal and padding."""
        return padding_mask(tgt, self.config.pad_id) & causal_mask(tgt.size(1), device=tgt.device)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``src (B, T_src)`` ids -> ``memory (B, T_src, d_model)``."""
        src_mask = self.source_mask(src) if src_mask is None else src_mask
        return self.encoder(self.positions(self.src_embed(src)), src_mask)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """``tgt (B, T_tgt)`` ids and the memory -> hidden states ``(B, T_tgt, d_model)``.

        With a ``cache`` (see :meth:`new_cache`), ``tgt`` holds only the newest tokens: they sit at
        positions ``cache.length`` onwards and may attend to every cached token.
        """
        start = cache.length if cache is not None else 0
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt.size(1), start + tgt.size(1), device=tgt.device)
            if cache is None:
                tgt_mask = tgt_mask & padding_mask(tgt, self.config.pad_id)
        x = self.positions(self.tgt_embed(tgt), start=start)  # (B, T_tgt, d_model)
        return self.decoder(x, memory, tgt_mask, src_mask, cache)

    def new_cache(self) -> DecoderCache:
        """An empty cache for step-by-step decoding (:mod:`transformer_lib.applications.decode`)."""
        return DecoderCache.empty(self.config.decoder_layers)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``src (B, T_src)``, ``tgt (B, T_tgt)`` -> ``logits (B, T_tgt, tgt_vocab_size)``.

        Source and target must have the same batch size ``B``: row ``b`` of ``tgt`` is the
        translation of row ``b`` of ``src`` (a source of batch 1 would otherwise broadcast silently
        over every target row)."""
        check_token_batch(src=src, tgt=tgt)
        if src.size(0) != tgt.size(0):
            raise ValueError(
                f"src and tgt must have the same batch size B, got src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)}"
            )
        src_mask = self.source_mask(src) if src_mask is None else src_mask
        tgt_mask = self.target_mask(tgt) if tgt_mask is None else tgt_mask
        memory = self.encode(src, src_mask)  # (B, T_src, d_model)
        return self.output_projection(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T_tgt, V)


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable parameters per top-level component, each shared tensor counted once (where it first
    appears), and their ``"total"``.

    The paper's base model counts 63,082,496 here against its Table 3's 65M; why the two differ is
    in NOTATION.md ("Parameter counts") and notebook 05.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"count_parameters needs an nn.Module, got {type(model).__name__}")
    seen: set[int] = set()
    counts: dict[str, int] = {}
    for name, child in model.named_children():
        total = 0
        for p in child.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        counts[name] = total
    own = [p for p in model.parameters(recurse=False) if p.requires_grad and id(p) not in seen]
    if own:  # parameters held by the model itself, outside any component
        counts["own parameters"] = sum(p.numel() for p in own)
    counts["total"] = sum(counts.values())
    return counts
