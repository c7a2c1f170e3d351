"""The full encoder-decoder Transformer, its configuration and presets, and parameter counts."""

import dataclasses
import numbers
from dataclasses import dataclass

import torch
from torch import nn

from ._arguments import check_positive_ints, check_probability, is_int
from .decoder import Decoder, DecoderCache
from .encoder import Encoder
from .layers import LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from .masks import causal_mask, padding_mask

__all__ = ["check_config", "init_projections", "TransformerConfig", "Transformer", "count_parameters"]

POSITIONAL_KINDS = ("sinusoidal", "learned")


def check_config(config, vocab_sizes: dict[str, int], probabilities: tuple[str, ...], flags: tuple[str, ...]) -> None:
    """The checks every model config shares (:class:`TransformerConfig`, and ``lm.LMConfig`` of notebook 11).

    Positive whole sizes, probabilities in [0, 1), NumPy numbers stored as Python numbers (a config built from a
    grid or a CSV compares and prints like any other), ``flags`` that are real bools, a ``pad_id`` inside every
    vocabulary, a known kind of ``positional`` encoding, and ``d_model`` divisible by ``num_heads``. Every error
    names the field and its value.
    """
    c = config
    check_positive_ints(
        **vocab_sizes, d_model=c.d_model, num_heads=c.num_heads, d_ff=c.d_ff, num_layers=c.num_layers, max_len=c.max_len
    )
    check_probability(**{name: getattr(c, name) for name in probabilities})
    for field in dataclasses.fields(c):  # NumPy scalars (from a grid, a CSV) become Python numbers
        value = getattr(c, field.name)
        if is_int(value) and not isinstance(value, int):
            object.__setattr__(c, field.name, int(value))
        elif isinstance(value, numbers.Real) and not isinstance(value, (int, float)):
            object.__setattr__(c, field.name, float(value))
    for name in flags:
        value = getattr(c, name)
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}")
    if not is_int(c.pad_id):
        raise TypeError(f"pad_id must be an int, got {c.pad_id!r} of type {type(c.pad_id).__name__}")
    smallest_vocab = min(vocab_sizes.values())
    if not 0 <= c.pad_id < smallest_vocab:
        sizes = ", ".join(f"{name}={size}" for name, size in vocab_sizes.items())
        raise ValueError(
            f"pad_id={c.pad_id} is not a token id: it must satisfy 0 <= pad_id < {smallest_vocab} ({sizes})"
        )
    if c.positional not in POSITIONAL_KINDS:
        raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got positional={c.positional!r}")
    if c.d_model % c.num_heads:
        raise ValueError(f"d_model={c.d_model} is not divisible by num_heads={c.num_heads}")


def init_projections(model: nn.Module) -> None:
    """Xavier-uniform for every projection matrix of ``model``, as in the reference implementations; the embedding
    tables (tokens, and learned positions: ``positions.embedding``) keep their own initialisation. Used by
    :class:`Transformer` and by the language models of :mod:`transformer_lib.lm`."""
    for name, p in model.named_parameters():
        if p.dim() > 1 and "embed" not in name:
            nn.init.xavier_uniform_(p)


@dataclass(frozen=True)
class TransformerConfig:
    """Every size and option of a :class:`Transformer`. The presets below are the ones the course uses.

    With ``share_embeddings=True`` (the paper's choice for its shared source/target BPE vocabulary) the source
    embedding, the target embedding and the output projection are one matrix, and the two vocabularies must be
    the same size. ``positional`` picks how positions enter: ``"sinusoidal"`` (the paper's fixed table) or
    ``"learned"`` (an ``nn.Embedding(max_len, d_model)``, ``max_len * d_model`` more parameters; Table 3 row E).
    ``pad_id`` is the padding token of both vocabularies, so ``0 <= pad_id < min(src_vocab_size, tgt_vocab_size)``.
    Every field is checked when the config is made, and an error names the field and its value.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    label_smoothing: float = 0.1
    norm_first: bool = False
    share_embeddings: bool = True
    max_len: int = 5000
    pad_id: int = 0
    positional: str = "sinusoidal"

    def __post_init__(self):
        check_config(
            self,
            {"src_vocab_size": self.src_vocab_size, "tgt_vocab_size": self.tgt_vocab_size},
            probabilities=("dropout", "attention_dropout", "label_smoothing"),
            flags=("norm_first", "share_embeddings"),
        )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one vocabulary, got "
                f"src_vocab_size={self.src_vocab_size} and tgt_vocab_size={self.tgt_vocab_size}"
            )

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed: ``config.replace(num_layers=2)``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def paper_base(cls, vocab_size: int = 37000) -> "TransformerConfig":
        """The paper's base model (Table 3): N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1, eps_ls=0.1."""
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
            label_smoothing=0.0,
            max_len=256,
        )

    @classmethod
    def cpu_small(cls, vocab_size: int) -> "TransformerConfig":
        """Two layers, small enough for the CPU, deep enough to show layers and heads doing different work."""
        return cls(vocab_size, vocab_size, d_model=128, num_heads=4, d_ff=512, num_layers=2, dropout=0.1, max_len=256)


class Transformer(nn.Module):
    """The encoder-decoder of *Attention Is All You Need*.

    ``forward(src, tgt) -> logits (B, T_tgt, tgt_vocab_size)``: the logits at position ``t`` predict target
    token ``t + 1`` having seen ``tgt[:, : t + 1]`` and the whole source. Masks are built from ``pad_id`` when
    not given. ``encode`` and ``decode`` are the two halves, used separately when generating.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        c = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.tgt_embed = self.src_embed if c.share_embeddings else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_id)
        positions = PositionalEncoding if c.positional == "sinusoidal" else LearnedPositionalEncoding
        self.positions = positions(c.d_model, max_len=c.max_len, dropout=c.dropout)
        sizes = (c.num_layers, c.d_model, c.num_heads, c.d_ff)
        options = dict(dropout=c.dropout, attention_dropout=c.attention_dropout, norm_first=c.norm_first)
        self.encoder = Encoder(*sizes, **options)
        self.decoder = Decoder(*sizes, **options)
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.share_embeddings:
            self.output_projection.weight = self.tgt_embed.weight  # one matrix: paper §3.4
        init_projections(self)

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

        With a ``cache`` (see :meth:`new_cache`), ``tgt`` holds only the newest tokens: they sit at positions
        ``cache.length`` onwards and may attend to every cached token.
        """
        start = cache.length if cache is not None else 0
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt.size(1), start + tgt.size(1), device=tgt.device)
            if cache is None:
                tgt_mask = tgt_mask & padding_mask(tgt, self.config.pad_id)
        x = self.positions(self.tgt_embed(tgt), start=start)  # (B, T_tgt, d_model)
        return self.decoder(x, memory, tgt_mask, src_mask, cache)

    def new_cache(self) -> DecoderCache:
        """An empty cache for step-by-step decoding (:mod:`transformer_lib.decode`)."""
        return DecoderCache.empty(self.config.num_layers)

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``src (B, T_src)``, ``tgt (B, T_tgt)`` -> ``logits (B, T_tgt, tgt_vocab_size)``.

        Source and target must have the same batch size ``B``: row ``b`` of ``tgt`` is the translation of row
        ``b`` of ``src`` (a source of batch 1 would otherwise broadcast silently over every target row)."""
        for name, tokens in (("src", src), ("tgt", tgt)):
            if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
                got = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
                raise ValueError(f"{name} must be (B, T) token ids, got {got}")
        if src.size(0) != tgt.size(0):
            raise ValueError(
                f"src and tgt must have the same batch size B, got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}"
            )
        src_mask = self.source_mask(src) if src_mask is None else src_mask
        tgt_mask = self.target_mask(tgt) if tgt_mask is None else tgt_mask
        memory = self.encode(src, src_mask)  # (B, T_src, d_model)
        return self.output_projection(self.decode(tgt, memory, src_mask, tgt_mask))  # (B, T_tgt, V)


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable parameters per top-level component, each shared tensor counted once (where it first appears).

    ``count_parameters(Transformer(TransformerConfig.paper_base()))`` with a shared 37000-token vocabulary
    gives 63,082,496: embeddings 18,944,000 (37000 x 512, shared by source, target and output projection),
    encoder 18,914,304 (6 x 3,152,384), decoder 25,224,192 (6 x 4,204,032). The paper's Table 3 says 65M
    (and 213M for ``paper_big``, where this gives 214.2M). No single vocabulary size fits both counts, and the
    paper's attention has no biases (36,864 parameters in base here), so its counts cannot be reproduced
    exactly from its text; notebook 05 shows the arithmetic.
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
