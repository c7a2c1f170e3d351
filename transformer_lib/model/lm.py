"""Language models from the encoder's layers: a decoder-only model (GPT) and an encoder-only masked
model (BERT).

Nothing here is a second attention or layer: both models stack
:class:`~transformer_lib.EncoderLayer`.

- **Decoder-only** (GPT, Radford et al. 2018/2019): an encoder layer whose self-attention gets a
  *causal* mask is a GPT block. Trained to predict token ``t + 1`` from tokens ``<= t``; generates
  one token at a time, with the same :class:`~transformer_lib.model.attention.DecoderCache` as the
  translation decoder.
- **Encoder-only** (BERT, Devlin et al. 2019): the bidirectional encoder, trained to recover tokens
  hidden by the 80/10/10 masking recipe; the loss counts only the hidden positions.

The models only: their objectives (:func:`~transformer_lib.training.lm_objectives.mask_tokens`,
:class:`~transformer_lib.training.lm_objectives.LanguageModelTrainer`) are training's, and
:func:`~transformer_lib.applications.decode.generate` sits beside the decoding loop it runs
(``tl.lm`` gathers all three).

Shapes (NOTATION.md): token ids ``(B, T)``, hidden states ``(B, T, d_model)``, logits ``(B, T, V)``.
"""

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._arguments import (
    check_non_negative_ints,
    check_positions_fit,
    check_token_batch,
    check_token_ids,
)
from .attention import DecoderCache
from .encoder import Encoder
from .layers import LayerNorm, LearnedPositionalEncoding, PositionalEncoding, TokenEmbedding
from .masks import causal_mask, check_mask, padding_mask
from .transformer import (
    ModelOptions,
    block_options,
    check_config,
    config_repr,
    init_projections,
    make_positions,
    option,
)

__all__ = ["LMConfig", "DecoderOnlyLM", "MaskedLM"]


@dataclass(frozen=True)
class LMConfig(ModelOptions):
    """Sizes and options of a :class:`DecoderOnlyLM` or :class:`MaskedLM` (NOTATION.md for the
    symbols).

    ``positional``: ``"learned"`` (GPT-2, BERT) or ``"sinusoidal"`` (the paper). ``norm_first``:
    pre-LN (GPT-2) or post-LN (BERT, the paper). ``pad_id=None``: no padding token (GPT-2 has none;
    with an int, that embedding row starts at zero and :class:`MaskedLM` hides that token from
    attention unless given a mask).

    The options default to the paper's block and make the same models GPT-2, BERT and Llama
    (``interop.from_huggingface``). Those both configs share are declared once in
    :class:`~transformer_lib.model.transformer.ModelOptions` (``activation``, ``norm``,
    ``n_kv_heads``, ...); this one adds ``attention_dropout`` (a field of
    :class:`TransformerConfig`), ``type_vocab_size`` (BERT's token-type, or segment, embeddings:
    that many rows, added to the token vectors; 0: none) and ``tie_embeddings`` (True: the output
    projection is the token embedding's matrix, as in the paper, GPT-2 and BERT; False: a matrix of
    its own). :meth:`llama_like` shows Llama's options together.
    """

    vocab_size: int
    d_model: int = 768
    num_heads: int = 12
    d_ff: int = 3072
    num_layers: int = 12
    dropout: float = 0.1
    max_len: int = 1024
    positional: str = "learned"
    norm_first: bool = True
    pad_id: int | None = 0
    attention_dropout: float = option(0.0)
    type_vocab_size: int = option(0)
    tie_embeddings: bool = option(True)

    __repr__ = config_repr

    def __post_init__(self):
        check_config(self, {"vocab_size": self.vocab_size})
        # 0: no token-type embeddings; BERT: 2
        check_non_negative_ints(type_vocab_size=self.type_vocab_size)

    def replace(self, **changes) -> "LMConfig":
        """A copy with some fields changed: ``config.replace(num_layers=2)``."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def gpt2_small(cls) -> "LMConfig":
        """GPT-2 small (Radford et al. 2019): 12 pre-LN layers, d_model 768, 12 heads, 50257 BPE
        tokens, 1024 learned positions. Its published size is 124M parameters."""
        return cls(vocab_size=50257, max_len=1024, positional="learned", norm_first=True)

    @classmethod
    def bert_base(cls) -> "LMConfig":
        """BERT-base (Devlin et al. 2019): 12 post-LN layers, d_model 768, 12 heads, 30522 WordPiece
        tokens, 512 learned positions. Its published size is 110M parameters."""
        return cls(vocab_size=30522, max_len=512, positional="learned", norm_first=False)

    @classmethod
    def llama_like(cls, vocab_size: int, **sizes) -> "LMConfig":
        """The block of Llama (Touvron et al. 2023) on the paper's skeleton: pre-norm with RMSNorm,
        rotary positions, a SwiGLU feed-forward, grouped-query attention (2 key/value heads for 4
        query heads), no biases, unscaled embeddings and an untied output head, at a size for the
        CPU; ``sizes`` overrides any field (``n_kv_heads=4`` for multi-head, ``1`` for multi-query).
        """
        fields = dict(
            d_model=128,
            num_heads=4,
            d_ff=344,  # about 8/3 d_model: three matrices of d_ff instead of two of 4 d_model
            num_layers=2,
            dropout=0.0,
            max_len=256,
            positional="rope",
            norm_first=True,
            pad_id=None,
            activation="swiglu",
            scale_embeddings=False,
            norm="rmsnorm",
            n_kv_heads=2,
            bias=False,
            tie_embeddings=False,
        )
        return cls(vocab_size, **{**fields, **sizes})

    @classmethod
    def cpu_char_masked(cls, vocab_size: int) -> "LMConfig":
        """A masked (BERT-style) character model for the CPU (notebook 11): post-LN like BERT, 2
        layers of d_model 64 and the paper's sinusoidal positions, on windows of up to 64
        characters. It is smaller than :meth:`cpu_char` because the masked objective scores only 15%
        of the positions it reads, so it needs more positions per CPU second."""
        return cls(
            vocab_size,
            d_model=64,
            num_heads=4,
            d_ff=256,
            num_layers=2,
            dropout=0.0,
            max_len=64,
            positional="sinusoidal",
            norm_first=False,
        )

    @classmethod
    def cpu_char(cls, vocab_size: int, norm_first: bool = True) -> "LMConfig":
        """A character model that trains on a CPU in a few minutes (notebook 11): 3 layers, d_model
        128, windows of up to 128 characters (learned positions exist only for those)."""
        return cls(
            vocab_size,
            d_model=128,
            num_heads=4,
            d_ff=512,
            num_layers=3,
            dropout=0.0,
            max_len=128,
            positional="learned",
            norm_first=norm_first,
        )


class _EncoderStackLM(nn.Module):
    """What both models share: embeddings, positions, a stack of encoder layers, and the output
    projection."""

    def __init__(self, config: LMConfig):
        super().__init__()
        self.config = c = config
        self.embed = TokenEmbedding(
            c.vocab_size, c.d_model, padding_idx=c.pad_id, scale=c.scale_embeddings
        )
        self.positions = make_positions(c)
        self.blocks = Encoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, block_options(c))
        init_projections(self)
        # Options (None when off, so a default model has exactly the modules and parameters it
        # always had):
        self.token_type_embed = None  # BERT's segment embeddings, added to the token vectors
        if c.type_vocab_size:
            self.token_type_embed = nn.Embedding(c.type_vocab_size, c.d_model)
            # the size of an unscaled token row
            nn.init.normal_(self.token_type_embed.weight, std=c.d_model**-0.5)
        self.output = None  # an untied output projection; tied, the logits read the token embedding
        if not c.tie_embeddings:
            self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)
            nn.init.xavier_uniform_(self.output.weight)

    def _check_tokens(self, tokens: torch.Tensor, start: int = 0) -> None:
        check_token_batch(tokens=tokens)
        check_positions_fit(type(self).__name__, start, tokens.size(1), self.config.max_len)

    @staticmethod
    def _check_padding_mask(mask: torch.Tensor, tokens: torch.Tensor, key_length: int) -> None:
        """A padding mask must be bool ``(B, 1, 1, T_k)``, True at real tokens, one row per
        sequence."""
        expected = (tokens.size(0), 1, 1, key_length)
        right_kind = isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() == 4
        if not right_kind:
            check_mask(mask, expected, device=tokens.device)  # names the wrong type, dtype or rank
        if tuple(mask.shape) != expected:
            raise ValueError(
                f"mask must be a padding mask of shape (B, 1, 1, T_k) = {expected}, True at real "
                f"tokens, got {tuple(mask.shape)}; make it with tl.padding_mask(tokens, pad_id), "
                "or from Hugging Face's attention_mask (B, T) with attention_mask.bool()[:, None, "
                "None, :]"
            )
        check_mask(mask, expected, device=tokens.device)  # the device

    def hidden_states(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor | None,
        cache: DecoderCache | None = None,
        token_types: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``tokens (B, T)`` -> ``(B, T, d_model)``: embed (plus token types, if the model has
        them), add positions, run the stack of blocks (it ends with the final norm and extends
        ``cache``). ``positions (B, T)``: each token's position (checked by the caller), for an
        added table (learned or sinusoidal); ``None``: ``start, start + 1, ...`` in every row."""
        start = cache.length if cache is not None else 0
        x = self.embed(tokens)  # (B, T, d_model)
        if self.token_type_embed is not None:
            # without token_types every token is in segment 0, BERT's default
            types = torch.zeros_like(tokens) if token_types is None else token_types  # (B, T)
            x = x + self.token_type_embed(types)  # (B, T, d_model)
        table = self.positions
        if positions is not None and isinstance(table, PositionalEncoding):
            x = table._finish(x + table.pe[0, positions])  # (B, T, d_model)
        elif positions is not None and isinstance(table, LearnedPositionalEncoding):
            x = table._finish(x + table.embedding(positions))  # (B, T, d_model)
        else:  # rotary positions rotate inside attention, from `start` (see DecoderOnlyLM)
            x = table(x, start=start)  # (B, T, d_model)
        return self.blocks(x, mask, cache)  # (B, T, d_model)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model)`` -> ``(B, T, V)`` through the transposed token embedding (tied
        weights), or the model's own output matrix with ``tie_embeddings=False``."""
        if self.output is not None:
            return self.output(hidden)  # (B, T, V)
        return hidden @ self.embed.weight.T  # (B, T, V)


class DecoderOnlyLM(_EncoderStackLM):
    """GPT: encoder layers with a causal mask; ``forward(tokens (B, T)) -> logits (B, T, V)``.

    The logits at position ``t`` predict token ``t + 1`` from tokens ``<= t`` only. With a ``cache``
    (see :meth:`new_cache`) ``tokens`` holds only the newest tokens; they sit after the cached ones
    and see them all. ``mask``: an optional padding mask, bool ``(B, 1, 1, T_k)``, True = may attend
    (a real token), combined with the causal mask; with a cache ``T_k`` counts the cached tokens
    too. Padded positions still get logits, which mean nothing.

    ``positions``: an optional ``(B, T)`` tensor of each token's position (Hugging Face's
    ``position_ids``). Without it positions count from the first column (after the cached tokens),
    padded or not, as Hugging Face's do when no ``position_ids`` are given: with right padding the
    real positions get exactly the unpadded logits. A left-padded row needs its own positions,
    ``attention_mask.cumsum(-1) - 1`` (what :func:`~transformer_lib.applications.decode.generate`
    derives from its ``attention_mask``).
    With rotary positions (``positional="rope"``) attention depends only on the differences of
    positions, so a row whose real tokens are the default positions shifted by one amount (left
    padding) gets exactly what it would get at those positions; the model rotates from the default
    positions and accepts only such ``positions`` (a ValueError otherwise). With a cache, the shift
    must stay the same from call to call (as
    :func:`~transformer_lib.applications.decode.generate` keeps it).
    """

    def __init__(self, config: LMConfig):
        if config.type_vocab_size:
            raise ValueError(
                f"type_vocab_size={config.type_vocab_size}: token-type embeddings belong to the "
                "masked model (MaskedLM, BERT); a DecoderOnlyLM has none (type_vocab_size=0)"
            )
        super().__init__(config)

    def forward(
        self,
        tokens: torch.Tensor,
        cache: DecoderCache | None = None,
        mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        start = cache.length if cache is not None else 0
        self._check_tokens(tokens, start)
        end = start + tokens.size(1)
        attend = causal_mask(tokens.size(1), end, device=tokens.device)  # (1, 1, T, start + T)
        if mask is not None:
            self._check_padding_mask(mask, tokens, end)
            attend = attend & mask  # (B, 1, T, start + T)
        if positions is not None:
            real = None if mask is None else mask[:, 0, 0, start:]  # (B, T): the tokens' own column
            self._check_positions(positions, tokens, start, real)
        return self.logits(self.hidden_states(tokens, attend, cache, positions=positions))

    def _check_positions(
        self, positions: torch.Tensor, tokens: torch.Tensor, start: int, real: torch.Tensor | None
    ) -> None:
        """``positions`` must be integer ``(B, T)`` like ``tokens``, each in ``[0, max_len)``; with
        rotary positions, each row's real tokens (``real (B, T)``, or all) must sit at the default
        positions ``start, start + 1, ...`` shifted by one amount."""
        if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
            got = f"dtype {positions.dtype}" if isinstance(positions, torch.Tensor) else positions
            raise TypeError(f"positions must be an integer tensor (B, T), got {got!r}")
        if positions.shape != tokens.shape:
            raise ValueError(
                f"positions must be (B, T) = {tuple(tokens.shape)} like the tokens, got "
                f"{tuple(positions.shape)}"
            )
        max_len = self.config.max_len
        if positions.numel() and not (0 <= positions.min() and positions.max() < max_len):
            raise ValueError(
                f"positions must be in [0, max_len={max_len}), got {positions.min().item()}.."
                f"{positions.max().item()}"
            )
        if self.config.positional != "rope":
            return
        default = torch.arange(start, start + tokens.size(1), device=positions.device)  # (T,)
        shift = (positions - default).long()  # (B, T)
        real = torch.ones_like(shift, dtype=torch.bool) if real is None else real.to(shift.device)
        big = torch.iinfo(torch.long).max
        highest = shift.masked_fill(~real, -big).amax(dim=1)  # (B,)
        lowest = shift.masked_fill(~real, big).amin(dim=1)  # (B,)
        if (real.any(dim=1) & (highest != lowest)).any():
            raise ValueError(
                "with rotary positions, positions must be the default ones (start, start + 1, ...) "
                "shifted by one amount per row on the real tokens (as left padding gives): rotary "
                "attention reads only differences of positions, and this model rotates from the "
                "default ones"
            )

    def new_cache(self) -> DecoderCache:
        """An empty cache for generating one token at a time
        (:func:`~transformer_lib.applications.decode.generate`)."""
        return DecoderCache.empty(len(self.blocks.layers), cross_attention=False)


class MaskedLM(_EncoderStackLM):
    """BERT: the bidirectional encoder and a prediction head;
    ``forward(tokens (B, T)) -> logits (B, T, V)``.

    Every position sees every other real token: ``mask`` (bool ``(B, 1, 1, T)``, True = may attend)
    says which are real; without it, every token except ``pad_id`` (every token, when ``pad_id`` is
    None). ``token_types`` ``(B, T)``: each token's segment, for a model with
    ``type_vocab_size > 0`` (default: all 0, as in BERT). The head is BERT's: a dense layer with
    GELU and a LayerNorm, then the output projection with a bias of its own.
    """

    def __init__(self, config: LMConfig):
        super().__init__(config)
        self.head = MaskedLMHead(config.d_model, config.vocab_size, config.layer_norm_eps)

    def forward(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor | None = None,
        token_types: torch.Tensor | None = None,
    ) -> torch.Tensor:
        self._check_tokens(tokens)
        if mask is not None:
            self._check_padding_mask(mask, tokens, tokens.size(1))
        elif self.config.pad_id is not None:
            mask = padding_mask(tokens, self.config.pad_id)  # (B, 1, 1, T)
        if token_types is not None:
            self._check_token_types(token_types, tokens)
        hidden = self.hidden_states(tokens, mask, token_types=token_types)  # (B, T, d_model)
        return self.logits(self.head(hidden)) + self.head.output_bias  # (B, T, V)

    def _check_token_types(self, token_types: torch.Tensor, tokens: torch.Tensor) -> None:
        size = self.config.type_vocab_size
        if not size:
            raise ValueError(
                "token_types given, but this model has no token-type embeddings (type_vocab_size=0)"
            )
        if not isinstance(token_types, torch.Tensor) or token_types.shape != tokens.shape:
            got = (
                tuple(token_types.shape)
                if isinstance(token_types, torch.Tensor)
                else type(token_types).__name__
            )
            raise ValueError(
                f"token_types must be (B, T) = {tuple(tokens.shape)} like the tokens, got {got}"
            )
        check_token_ids("token_types", token_types, size)


class MaskedLMHead(nn.Module):
    """BERT's prediction head before the output projection: ``LayerNorm(GELU(x W + b))`` (GELU
    whatever the blocks use: BERT's head uses its ``hidden_act``, which is GELU), plus the bias that
    the output projection adds to each vocabulary entry (the projection's matrix is the embedding's
    when tied)."""

    def __init__(self, d_model: int, vocab_size: int, eps: float = 1e-5):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.norm = LayerNorm(d_model, eps)
        self.output_bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.dense(hidden)))  # (B, T, d_model)
