"""Language models from the encoder's layers: a decoder-only model (GPT) and an encoder-only masked
model (BERT).

Nothing here is a second attention or layer: both models stack
:class:`~transformer_lib.EncoderLayer`.

- **Decoder-only** (GPT, Radford et al. 2018/2019): an encoder layer whose self-attention gets a
  *causal* mask is a GPT block. Trained to predict token ``t + 1`` from tokens ``<= t``; generates
  one token at a time, with the same :class:`~transformer_lib.model.attention.DecoderCache` as the
  translation decoder.
- **Encoder-only** (BERT, Devlin et al. 2019): the bidirectional encoder, trained to recover tokens
  hidden by the 80/10/10 masking recipe (:func:`mask_tokens`); the loss counts only the hidden
  positions.

Shapes (NOTATION.md): token ids ``(B, T)``, hidden states ``(B, T, d_model)``, logits ``(B, T, V)``.
"""

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .._arguments import (
    check_non_negative_ints,
    check_token_batch,
    check_token_id,
    check_token_ids,
)
from ..applications.decode import autoregress, greedy
from ..training.train import IGNORE_INDEX, LM_BATCHES, Trainer, perplexity
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

__all__ = [
    "LMConfig",
    "DecoderOnlyLM",
    "MaskedLM",
    "mask_tokens",
    "masking_shares",
    "expected_masking_shares",
    "language_model_loss",
    "generate",
    "perplexity",
    "LanguageModelTrainer",
    "IGNORE_INDEX",
]

# IGNORE_INDEX (-100, F.cross_entropy's default ignore_index) marks the targets a loss skips;
# perplexity is train.perplexity, which scores these models' (inputs, targets) batches as well as
# the encoder-decoder's.


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
        if start + tokens.size(1) > self.config.max_len:
            raise ValueError(
                f"positions {start}..{start + tokens.size(1) - 1} exceed "
                f"max_len={self.config.max_len}; use a shorter input or a config with a larger "
                "max_len"
            )

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
            # (B, T): BERT's default 0
            types = torch.zeros_like(tokens) if token_types is None else token_types
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
    ``attention_mask.cumsum(-1) - 1`` (what :func:`generate` derives from its ``attention_mask``).
    With rotary positions (``positional="rope"``) attention depends only on the differences of
    positions, so a row whose real tokens are the default positions shifted by one amount (left
    padding) gets exactly what it would get at those positions; the model rotates from the default
    positions and accepts only such ``positions`` (a ValueError otherwise). With a cache, the shift
    must stay the same from call to call (as :func:`generate` keeps it).
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
        # (1, 1, T, start + T)
        attend = causal_mask(tokens.size(1), start + tokens.size(1), device=tokens.device)
        if mask is not None:
            self._check_padding_mask(mask, tokens, start + tokens.size(1))
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
        """An empty cache for generating one token at a time (:func:`generate`)."""
        return DecoderCache.empty(len(self.blocks.layers), cross_attention=False)


class MaskedLM(_EncoderStackLM):
    """BERT: the bidirectional encoder and a prediction head; ``forward(tokens (B, T)) -> logits (B,
    T, V)``.

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
        # (B, T, d_model)
        hidden = self.head(self.hidden_states(tokens, mask, token_types=token_types))
        return self.logits(hidden) + self.head.output_bias  # (B, T, V)

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


def mask_tokens(
    tokens: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: tuple[int, ...] = (0,),
    rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking recipe: pick ``rate`` of the maskable positions; of those, 80% become
    ``mask_id``, 10% a random token, 10% stay as they are. Returns ``(inputs (B, T), targets (B,
    T))``: targets hold the original token at picked positions and :data:`IGNORE_INDEX` everywhere
    else, so the loss counts only picked ones.

    ``special_ids`` (padding, ...) are never picked, and random replacements are never special
    tokens or the mask itself. Keeping 10% unchanged makes the model produce a useful prediction for
    every token it sees, not only for ``mask_id`` (which never appears when the model is used).
    """
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"rate must be in (0, 1], got {rate}")
    maskable = torch.ones_like(tokens, dtype=torch.bool)
    for i in special_ids:
        maskable &= tokens != i
    draw = torch.rand(tokens.shape, generator=generator, device=tokens.device)  # (B, T)
    picked = maskable & (draw < rate)
    # (B, T): which of 80/10/10
    action = torch.rand(tokens.shape, generator=generator, device=tokens.device)
    to_mask = picked & (action < 0.8)
    to_random = picked & (action >= 0.8) & (action < 0.9)
    forbidden = torch.tensor(sorted({*special_ids, mask_id}), device=tokens.device)
    allowed = torch.ones(vocab_size, dtype=torch.bool, device=tokens.device)
    allowed[forbidden] = False
    candidates = allowed.nonzero()[:, 0]  # ids a random replacement may take
    random_ids = candidates[
        torch.randint(len(candidates), tokens.shape, generator=generator, device=tokens.device)
    ]
    inputs = torch.where(to_mask, torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(to_random, random_ids, inputs)
    targets = torch.where(picked, tokens, torch.full_like(tokens, IGNORE_INDEX))
    return inputs, targets


def masking_shares(
    tokens: torch.Tensor,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    mask_id: int,
    special_ids: tuple[int, ...],
) -> dict[str, float]:
    """What a masking did to ``tokens (B, T)``, as the shares that define BERT's recipe
    (:func:`mask_tokens` aims at 15% picked, 80% of them ``mask_id``, 10% another token, none of the
    rest changed). Shares, not positions: two correct recipes draw different positions, but the same
    shares. A replacement may draw the original token, so "given another token" sits a little under
    10%."""
    # the ids on the tokens' device: on mps or cuda a CPU tensor beside them fails
    special = torch.tensor(special_ids, dtype=tokens.dtype, device=tokens.device)
    maskable = ~torch.isin(tokens, special)  # (B, T)
    picked = targets != IGNORE_INDEX  # (B, T)
    replaced = picked & (inputs != tokens) & (inputs != mask_id)
    special_or_mask = torch.isin(
        inputs, torch.tensor([*special_ids, mask_id], dtype=inputs.dtype, device=inputs.device)
    )

    def share(part: torch.Tensor, whole: torch.Tensor) -> float:
        return part.sum().item() / max(whole.sum().item(), 1)

    return {
        "share of the non-special positions picked": share(picked & maskable, maskable),
        "share of the special positions picked": share(picked & ~maskable, ~maskable),
        "share of picked positions set to mask_id": share((inputs == mask_id) & picked, picked),
        "share of picked positions given another token": share(replaced, picked),
        "share of positions not picked that were changed": share(
            (inputs != tokens) & ~picked, ~picked
        ),
        "share of random replacements that are special or mask_id": share(
            replaced & special_or_mask, replaced
        ),
        "share of picked targets that are not the original token": share(
            picked & (targets != tokens), picked
        ),
    }


def expected_masking_shares(
    vocab_size: int, mask_id: int, special_ids: tuple[int, ...], rate: float = 0.15
) -> dict[str, float]:
    """The shares of :func:`masking_shares` that :func:`mask_tokens` has in expectation: ``rate`` of
    the maskable positions picked, 80% of those set to ``mask_id``, 10% given a random token (which
    is the original one in 1 of the ``candidates`` draws), and nothing else changed."""
    candidates = vocab_size - len({*special_ids, mask_id})  # the ids a random replacement may take
    return {
        "share of the non-special positions picked": rate,
        "share of the special positions picked": 0.0,
        "share of picked positions set to mask_id": 0.8,
        "share of picked positions given another token": 0.1 * (1 - 1 / candidates),
        "share of positions not picked that were changed": 0.0,
        "share of random replacements that are special or mask_id": 0.0,
        "share of picked targets that are not the original token": 0.0,
    }


def language_model_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose target is not :data:`IGNORE_INDEX`.

    ``logits (B, T, V)``, ``targets (B, T)``. For the decoder-only model every target counts (the
    next character); for the masked model only the picked positions do.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} must agree on (B, T)"
        )
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


class LanguageModelTrainer(Trainer):
    """A :class:`~transformer_lib.Trainer` for language models: ``Trainer(..., batches=LM_BATCHES)``
    with :func:`language_model_loss`. The same steps, schedule, checkpoints and history, on batches
    ``(inputs (B, T), targets (B, T))`` such as :meth:`PythonSourceCorpus.batch` returns (or
    :func:`mask_tokens` makes); token accuracy counts the targets that are not :data:`IGNORE_INDEX`.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer,
        scheduler=None,
        clip_grad_norm: float | None = 1.0,
        device="cpu",
    ):
        loss = language_model_loss
        super().__init__(model, optimizer, scheduler, loss, clip_grad_norm, device, LM_BATCHES)


@torch.no_grad()
def generate(
    model: DecoderOnlyLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    choose=None,
    use_cache: bool = True,
    attention_mask: torch.Tensor | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
) -> torch.Tensor:
    """Continue ``prompt (B, T0)`` by ``max_new_tokens`` tokens; returns
    ``(B, T0 + max_new_tokens)`` (fewer columns when every row has ended, see ``eos_id``).

    ``choose(log_probs (B, V)) -> (B,)`` picks each next token (greedy by default); build a sampling
    one with :func:`transformer_lib.applications.decode.sampler`. With ``use_cache`` each step feeds
    only the newest token and the model's :class:`~transformer_lib.model.attention.DecoderCache`
    supplies the keys and values of the earlier ones; without it each step re-reads the whole
    sequence. Both give the same tokens. The loop is
    :func:`transformer_lib.applications.decode.autoregress`, the translation model's too.

    A batch of prompts of different lengths is left-padded, as Hugging Face's ``generate`` expects:
    ``attention_mask (B, T0)`` (1 or True at real tokens) hides the padding from every step, and
    each token's position is counted from its row's first real token, ``attention_mask.cumsum(-1)
    - 1`` (0 at padding), then one more per new token, as Hugging Face derives ``position_ids``.
    Each row then continues as it would alone. ``eos_id``: a row that emits it is finished; it gets
    ``pad_id`` from then on (default: the model's ``pad_id``, else ``eos_id`` as Hugging Face does
    for GPT-2), and generation stops once every row has finished.
    """
    if prompt.dim() != 2 or prompt.size(1) < 1:
        raise ValueError(
            f"prompt must be (B, T0) ids with T0 >= 1, got shape {tuple(prompt.shape)}"
        )
    check_non_negative_ints(max_new_tokens=max_new_tokens)
    if prompt.size(1) + max_new_tokens > model.config.max_len:
        raise ValueError(
            f"prompt length {prompt.size(1)} + max_new_tokens {max_new_tokens} exceeds the model's "
            f"max_len={model.config.max_len}"
        )
    vocab_size = model.config.vocab_size
    if eos_id is not None:
        check_token_id("eos_id", eos_id, vocab_size, f"vocab_size={vocab_size}")
        pad_id = pad_id if pad_id is not None else model.config.pad_id
        pad_id = pad_id if pad_id is not None else eos_id
        check_token_id("pad_id", pad_id, vocab_size, f"vocab_size={vocab_size}")
    model.eval()
    prompt_mask = None if attention_mask is None else _prompt_mask(attention_mask, prompt)
    if prompt_mask is not None:
        # (B, T0): Hugging Face's position_ids, 0 at padding
        prompt_positions = (prompt_mask.long().cumsum(dim=-1) - 1).masked_fill(~prompt_mask, 0)

    def step(new: torch.Tensor, cache: DecoderCache | None) -> torch.Tensor:
        if prompt_mask is None:
            return model(new, cache=cache)[:, -1].log_softmax(dim=-1)  # (B, V): after the last
        total = (cache.length if cache is not None else 0) + new.size(1)
        grown = total - prompt.size(1)  # tokens generated so far
        seen = torch.cat([prompt_mask, prompt_mask.new_ones(prompt.size(0), grown)], dim=1)
        after = torch.arange(1, grown + 1, device=prompt.device)  # (grown,)
        positions = torch.cat(  # (B, total)
            [prompt_positions, prompt_positions[:, -1:] + after], dim=1
        )
        logits = model(
            new, cache=cache, mask=seen[:, None, None, :], positions=positions[:, -new.size(1) :]
        )  # (B, t_new, V)
        return logits[:, -1].log_softmax(dim=-1)  # (B, V)

    cache = model.new_cache() if use_cache else None
    choose = choose if choose is not None else greedy
    # (B, T0 + <= max_new_tokens)
    return autoregress(step, prompt, max_new_tokens, choose, cache, eos_id, pad_id)


def _prompt_mask(attention_mask: torch.Tensor, prompt: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``attention_mask (B, T0)`` (0/1 integers or bool) -> bool ``(B, T0)``, after
    checking that it fits ``prompt``."""
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(
            f"attention_mask must be a (B, T0) tensor of 0/1 or bool, got "
            f"{type(attention_mask).__name__}"
        )
    if attention_mask.shape != prompt.shape:
        raise ValueError(
            f"attention_mask must be (B, T0) = {tuple(prompt.shape)} like the prompt, got "
            f"{tuple(attention_mask.shape)}"
        )
    binary = (attention_mask == 0) | (attention_mask == 1)
    if attention_mask.is_floating_point() or not binary.all():
        raise ValueError("attention_mask must hold 0/1 integers or bools (1 = a real token)")
    return attention_mask.to(device=prompt.device, dtype=torch.bool)
