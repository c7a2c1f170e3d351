"""The pieces every Transformer layer is made of: LayerNorm, the feed-forward network, the residual
sublayer, token embeddings, and positional encodings (the paper's fixed sinusoids, or learned
position vectors).

Each piece is the paper's by default; the options that published descendants changed (GPT-2's GELU,
BERT's unscaled embeddings and embedding LayerNorm, Marian's sinusoid layout, Llama's RMSNorm,
SwiGLU and bias-free projections) are arguments here, so that the models read one config field each
and the same blocks compute GPT-2, BERT, MarianMT and Llama (``interop.from_huggingface``).
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._arguments import (
    check_choice,
    check_positions_fit,
    check_positive_ints,
    check_token_ids,
    renamed,
)

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "make_norm",
    "NORMS",
    "PositionwiseFeedForward",
    "ResidualSublayer",
    "TokenEmbedding",
    "PositionalEncoding",
    "LearnedPositionalEncoding",
    "RotaryPositions",
    "sinusoidal_encoding",
    "ACTIVATIONS",
    "GATED_ACTIVATIONS",
    "FFN_ACTIVATIONS",
    "SINUSOID_LAYOUTS",
    "BlockOptions",
    "LayerStack",
]

# The feed-forward network's nonlinearity, by name (``TransformerConfig.activation``,
# ``LMConfig.activation``): "relu" is the paper's max(0, x); "gelu" is x * Phi(x) (BERT);
# "gelu_tanh" is GELU's tanh approximation (GPT-2, Hugging Face's "gelu_new"); "silu" is x *
# sigmoid(x), also called swish (MarianMT's opus-mt models).
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
    "silu": F.silu,
}

# Gated feed-forwards (Shazeer 2020, "GLU Variants Improve Transformer"): the nonlinearity of a gate
# multiplies a second, linear projection, ``down(act(gate(x)) * up(x))``. "swiglu" (Llama) gates
# with silu.
GATED_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"swiglu": F.silu}
# every name a config's ``activation`` may take
FFN_ACTIVATIONS = (*ACTIVATIONS, *GATED_ACTIVATIONS)

# Where the sines and cosines of one frequency sit in the sinusoidal table (see
# sinusoidal_encoding).
SINUSOID_LAYOUTS = ("interleaved", "halves")


class LayerNorm(nn.Module):
    """Normalise each token vector to mean 0 and variance 1 over its ``d_model`` features, then
    scale and shift.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance, exactly as
    ``nn.LayerNorm`` (whose parameter names it shares, so weights copy across).
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps  # 1e-5 as nn.LayerNorm and GPT-2; BERT uses 1e-12
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain, gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # the shift, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.weight.size(0), "LayerNorm")
        # PyTorch's fused kernel of the textbook form (x - mean) / sqrt(var + eps) * weight + bias
        # (equal to ~1e-6, tests/test_layers.py), several times faster with its backward
        width = self.weight.shape
        return F.layer_norm(x, width, self.weight, self.bias, self.eps)  # (..., d_model)


class RMSNorm(nn.Module):
    """Divide each token vector by its root mean square over the ``d_model`` features, then scale
    (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"; Llama).

    ``y = x / sqrt(mean(x^2) + eps) * weight``: LayerNorm without the mean subtraction and without
    the shift, cheaper by one reduction; its authors report quality comparable to LayerNorm's
    without the re-centring. Computed in at least fp32 (a square of fp16 overflows early), then cast
    back before the gain, as Llama does, so weights copy across.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps  # Llama: 1e-6 (its rms_norm_eps)
        self.weight = nn.Parameter(torch.ones(d_model))  # the gain, gamma; there is no shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.weight.size(0), "RMSNorm")
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        rms_inverse = torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return (x32 * rms_inverse).to(x.dtype) * self.weight  # (..., d_model)


# The normalisation of every residual sublayer and of the pre-LN stack's final norm
# (``config.norm``).
NORMS: dict[str, type[nn.Module]] = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """``LayerNorm(d_model, eps)`` for ``kind="layernorm"`` (the paper), ``RMSNorm(d_model, eps)``
    for "rmsnorm"."""
    check_choice("norm", kind, tuple(NORMS))
    return NORMS[kind](d_model, eps)


class PositionwiseFeedForward(nn.Module):
    """``FFN(x) = max(0, x W1 + b1) W2 + b2``, applied to every position separately (paper eq. 2).

    ``d_model -> d_ff -> d_model``; the layer names match ``nn.TransformerEncoderLayer``
    (``linear1``, ``linear2``). The paper applies dropout only to sublayer outputs, so there is none
    inside. ``activation`` names the nonlinearity in place of ``max(0, .)``: one of
    :data:`ACTIVATIONS` ("relu", the paper's, by default; "gelu" for BERT, "gelu_tanh" for GPT-2,
    "silu" for MarianMT).

    A gated activation (:data:`GATED_ACTIVATIONS`: "swiglu", Llama) adds a third matrix, the gate:
    ``FFN(x) = linear2(silu(gate(x)) * linear1(x))`` (Llama's down, gate and up projections), of
    hidden width ``d_ff`` (the width that keeps the paper's parameter count: NOTATION.md).
    ``bias=False`` drops every bias (Llama has none).
    """

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True):
        super().__init__()
        check_choice("activation", activation, FFN_ACTIVATIONS)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)  # the "up" projection when gated
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # the "down" projection when gated
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if activation in GATED_ACTIVATIONS else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_width(x, self.linear1.in_features, "PositionwiseFeedForward")
        if self.gate is not None:
            gate = GATED_ACTIVATIONS[self.activation](self.gate(x))  # (B, T, d_ff)
            hidden = gate * self.linear1(x)  # (B, T, d_ff)
        else:
            hidden = ACTIVATIONS[self.activation](self.linear1(x))  # (B, T, d_ff)
        return self.linear2(hidden)  # (B, T, d_model)


class ResidualSublayer(nn.Module):
    """A residual connection around a sublayer, with its LayerNorm and dropout.

    Post-LN (the paper, default): ``LayerNorm(x + Dropout(sublayer(x)))``.
    Pre-LN (``norm_first=True``): ``x + Dropout(sublayer(LayerNorm(x)))``; the residual path stays
    an identity from input to output, which is why deep modern models train more easily with it (no
    warmup needed). ``norm`` picks the normalisation by name (:data:`NORMS`): "layernorm" (the
    paper) or "rmsnorm" (Llama).
    """

    def __init__(
        self,
        d_model: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        eps: float = 1e-5,
        norm: str = "layernorm",
    ):
        super().__init__()
        self.norm = make_norm(norm, d_model, eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(
        self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """``x (B, T, d_model)``; ``sublayer`` must return a tensor of the same shape (else a
        ValueError: the sum would broadcast silently)."""
        out = sublayer(self.norm(x) if self.norm_first else x)  # (B, T, d_model)
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"the sublayer must return the shape of its input {tuple(x.shape)}, got {got}"
            )
        if self.norm_first:
            return x + self.dropout(out)
        return self.norm(x + self.dropout(out))


class TokenEmbedding(nn.Module):
    """Token ids ``(B, T)`` -> vectors ``(B, T, d_model)``, multiplied by ``sqrt(d_model)`` (paper
    §3.4).

    The scale makes embedded vectors the size of the positional encodings (why: NOTATION.md).
    ``scale=False`` returns the rows as stored (GPT-2 and BERT, whose trained rows are already the
    size of their position vectors). ``padding_idx`` is a row that starts at zero (``None``: no
    padding token).
    """

    def __init__(
        self, vocab_size: int, d_model: int, padding_idx: int | None = None, scale: bool = True
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)
        nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
        if padding_idx is not None:
            with torch.no_grad():
                self.embedding.weight[padding_idx].zero_()
        self.scale = math.sqrt(d_model) if scale else 1.0

    @property
    def weight(self) -> nn.Parameter:
        """The ``(vocab_size, d_model)`` matrix, shared with the output projection when weights are
        tied."""
        return self.embedding.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # reads the data: one sync on a GPU
        check_token_ids("tokens", tokens, self.embedding.num_embeddings)
        return self.embedding(tokens) * self.scale  # (B, T, d_model)


def sinusoidal_encoding(d_model: int, max_len: int, layout: str = "interleaved") -> torch.Tensor:
    """``(max_len, d_model)``: ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``,
    ``PE[pos, 2i+1] = cos(...)``.

    Each pair of features ``(2i, 2i+1)`` turns at its own frequency ``w_i = 10000^(-2i/d_model)``
    (their range, and why the paper chose them: NOTATION.md). The arguments come in the order of
    :class:`PositionalEncoding`: width first, then length.

    ``layout`` places the same numbers in another column order: ``"interleaved"`` (above; the
    paper's formula) or ``"halves"``: every sine first, then every cosine,
    ``PE[pos, i] = sin(pos * w_i)`` and ``PE[pos, ceil(d_model/2) + i] = cos(pos * w_i)``
    (tensor2tensor, fairseq and MarianMT)::

        interleaved: sin w0 | cos w0 | sin w1 | cos w1 | ...
        halves:      sin w0 | sin w1 | ... | cos w0 | cos w1 | ...

    Attention cannot tell the two apart (a fixed permutation of features), but weights trained on
    one layout need that layout.
    """
    check_positive_ints(d_model=d_model, max_len=max_len)
    check_choice("layout", layout, SINUSOID_LAYOUTS)
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    angles = position * frequency  # (max_len, ceil(d_model / 2))
    pe = torch.zeros(max_len, d_model)
    if layout == "halves":
        pe[:, : angles.size(1)] = torch.sin(angles)
        pe[:, angles.size(1) :] = torch.cos(angles[:, : d_model // 2])
        return pe  # (max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe  # (max_len, d_model)


class _AddPositions(nn.Module):
    """What both position modules share: after the position vectors are added, an optional LayerNorm
    of the sum (``norm=True``: BERT's embedding LayerNorm, with ``eps``), then dropout. Subclasses
    build their table first, then call :meth:`_add_norm_and_dropout` (so the printed module lists
    the table first, as it always did)."""

    def _add_norm_and_dropout(self, d_model: int, dropout: float, norm: bool, eps: float) -> None:
        self.dropout = nn.Dropout(dropout)
        self.norm = LayerNorm(d_model, eps) if norm else None

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm is not None:
            x = self.norm(x)  # (B, T, d_model)
        return self.dropout(x)  # (B, T, d_model)


class PositionalEncoding(_AddPositions):
    """Add sinusoidal position vectors along the **sequence** axis, then dropout (paper §3.5 and
    §5.4).

    The encodings are a buffer ``(1, max_len, d_model)``: the leading 1 broadcasts over the batch,
    so every sequence gets the same position vectors. (Adding a ``(max_len, 1, d_model)`` table to
    batch-first input gives each *sequence* one position instead: a common silent bug, notebook 03.)
    ``layout``: the column order of :func:`sinusoidal_encoding`. ``norm=True`` adds a LayerNorm
    (``eps``) of the sum before the dropout, as BERT normalises its embeddings.
    """

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.1,
        layout: str = "interleaved",
        norm: bool = False,
        eps: float = 1e-5,
    ):
        super().__init__()
        self.register_buffer(
            "pe", sinusoidal_encoding(d_model, max_len, layout)[None], persistent=False
        )
        self._add_norm_and_dropout(d_model, dropout, norm, eps)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``x (B, T, d_model)`` -> ``x + PE[start : start + T]``; ``start`` > 0 when decoding step
        by step."""
        rows = _position_rows(x, start, self.pe.size(1), self.pe.size(2), type(self).__name__)
        return self._finish(x + self.pe[:, rows])  # (B, T, d_model)


class LearnedPositionalEncoding(_AddPositions):
    """Add a learned vector per position along the sequence axis, then dropout:
    ``nn.Embedding(max_len, d_model)``.

    The paper's alternative to sinusoids (§3.5, Table 3 row E: "nearly identical results"), with
    the same interface as :class:`PositionalEncoding`, so
    :class:`transformer_lib.model.transformer.Transformer` swaps one for the other
    (``TransformerConfig(positional="learned")``). The vectors start as Gaussian noise of the
    sinusoids' size (NOTATION.md). Positions beyond ``max_len`` have no vector: unlike sinusoids,
    learned positions cannot extrapolate. ``norm=True``: a LayerNorm of the sum before the dropout,
    as in :class:`PositionalEncoding` (BERT).
    """

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.1,
        norm: bool = False,
        eps: float = 1e-5,
    ):
        super().__init__()
        check_positive_ints(d_model=d_model, max_len=max_len)
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=2**-0.5)
        self._add_norm_and_dropout(d_model, dropout, norm, eps)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``x (B, T, d_model)`` -> ``x + P[start : start + T]``, the rows of the learned table
        ``P``."""
        max_len, d_model = self.embedding.weight.shape
        rows = _position_rows(x, start, max_len, d_model, type(self).__name__)
        return self._finish(x + self.embedding.weight[rows][None])  # (B, T, d_model)


class RotaryPositions(_AddPositions):
    """Nothing added to the token vectors: with rotary positions (``positional="rope"``) the
    positions enter inside attention, where :func:`~transformer_lib.model.attention.apply_rope`
    rotates each head's queries and keys.

    Kept as a module of the same interface as :class:`PositionalEncoding` so that the models read
    positions in one place: it applies the embedding dropout (and BERT's ``norm``, if asked) and
    refuses positions beyond ``max_len``, as the other two do (rotations themselves exist at every
    position).
    """

    def __init__(
        self,
        d_model: int,
        max_len: int = 5000,
        dropout: float = 0.1,
        norm: bool = False,
        eps: float = 1e-5,
    ):
        super().__init__()
        check_positive_ints(d_model=d_model, max_len=max_len)
        self.d_model, self.max_len = d_model, max_len
        self._add_norm_and_dropout(d_model, dropout, norm, eps)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``x (B, T, d_model)`` -> ``x`` (then norm and dropout); ``start`` only checked against
        ``max_len``."""
        _position_rows(x, start, self.max_len, self.d_model, type(self).__name__)
        return self._finish(x)  # (B, T, d_model)


def _check_width(x: torch.Tensor, d_model: int, owner: str) -> None:
    """A floating tensor whose last axis is ``d_model`` wide, or a clear error naming ``owner``."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        got = f"dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(
            f"{owner} expects a floating-point tensor (..., d_model={d_model}), got {got}"
        )
    if x.dim() == 0 or x.size(-1) != d_model:
        raise ValueError(
            f"{owner} expects x of shape (..., d_model={d_model}), got {tuple(x.shape)}"
        )


def _position_rows(x: torch.Tensor, start: int, max_len: int, d_model: int, owner: str) -> slice:
    """The table rows ``start : start + T`` for ``x (B, T, d_model)``, after checking that they
    exist."""
    _check_width(x, d_model, owner)
    if x.dim() != 3:
        raise ValueError(
            f"{owner} expects x of shape (B, T, d_model={d_model}), got {tuple(x.shape)}"
        )
    length = x.size(1)
    check_positions_fit(owner, start, length, max_len)
    return slice(start, start + length)


@dataclass(frozen=True)
class BlockOptions:
    """Everything an :class:`~transformer_lib.EncoderLayer` or ``DecoderLayer`` is besides its
    sizes ``d_model``, ``num_heads``, ``d_ff``; the defaults are the paper's block. A config makes
    one with ``model.block_options(config)``; a layer built by hand takes one, or changes fields
    by keyword: ``EncoderLayer(32, 4, 64, dropout=0.0, norm_first=True)``.

    Fields:
        dropout: ``P_drop`` on each sublayer's output.
        attention_dropout: dropout on the attention weights (not in the paper).
        norm_first: pre-LN instead of the paper's post-LN.
        activation: the feed-forward nonlinearity, a name from :data:`FFN_ACTIVATIONS`
            ("swiglu": gated).
        layer_norm_eps: ``eps`` of every norm.
        norm: "layernorm" (the paper) or "rmsnorm" (Llama), in every residual sublayer and the
            final norm.
        bias: whether every projection (attention and feed-forward) has a bias; Llama's have none.
        n_kv_heads: key/value heads of the self-attention (grouped-query; ``None``:
            ``num_heads``); ``num_kv_heads``, its old name, still works in :meth:`of` and warns.
        rope_theta: rotary positions in the self-attention with this ``theta`` (``None``: none).
        d_k, d_v: per-head widths of queries/keys and of values (``None``:
            ``d_model // num_heads``).
    """

    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm_first: bool = False
    activation: str = "relu"
    layer_norm_eps: float = 1e-5
    norm: str = "layernorm"
    bias: bool = True
    n_kv_heads: int | None = None
    rope_theta: float | None = None
    d_k: int | None = None
    d_v: int | None = None

    @classmethod
    def of(cls, options: "BlockOptions | None" = None, **changes) -> "BlockOptions":
        """``options`` (default: the paper's) with ``changes``, the keywords a layer was given."""
        if options is None:
            options = cls()
        elif not isinstance(options, cls):
            raise TypeError(
                f"options must be a BlockOptions, got {type(options).__name__} {options!r:.40}. "
                "Pass dropout and the other options by keyword: EncoderLayer(32, 4, 64, dropout=0)."
            )
        if "num_kv_heads" in changes:
            old = changes.pop("num_kv_heads")
            new = changes.get("n_kv_heads")
            changes["n_kv_heads"] = renamed("BlockOptions", "num_kv_heads", "n_kv_heads", old, new)
        return dataclasses.replace(options, **changes)

    def attention(self) -> dict:
        """The keyword arguments of a layer's ``MultiHeadAttention`` (``rope_theta`` aside: only
        self-attention rotates)."""
        widths = dict(n_kv_heads=self.n_kv_heads, d_k=self.d_k, d_v=self.d_v)
        return dict(dropout=self.attention_dropout, bias=self.bias, **widths)

    def feed_forward(self, d_model: int, d_ff: int) -> "PositionwiseFeedForward":
        return PositionwiseFeedForward(d_model, d_ff, self.activation, self.bias)

    def residual(self, d_model: int) -> "ResidualSublayer":
        return ResidualSublayer(
            d_model, self.dropout, self.norm_first, self.layer_norm_eps, self.norm
        )


class LayerStack(nn.Module):
    """``num_layers`` copies of ``layer_class``; with pre-LN, a final norm of the kind
    ``options.norm`` (the residual stream is never normalised otherwise). The base of ``Encoder``
    and ``Decoder``, which set ``layer_class`` and ``forward``. ``options`` (a
    :class:`BlockOptions`) and keyword changes to it, as for ``EncoderLayer``:
    ``Encoder(6, 32, 4, 64, dropout=0.0, norm_first=True)``."""

    layer_class: type[nn.Module]

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        options: BlockOptions | None = None,
        **changes,
    ):
        super().__init__()
        check_positive_ints(num_layers=num_layers)
        o = BlockOptions.of(options, **changes)
        self.layers = nn.ModuleList(
            self.layer_class(d_model, num_heads, d_ff, o) for _ in range(num_layers)
        )
        final_norm = make_norm(o.norm, d_model, o.layer_norm_eps) if o.norm_first else nn.Identity()
        self.final_norm = final_norm
