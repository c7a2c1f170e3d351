"""Generating target sequences from a trained
:class:`~transformer_lib.model.transformer.Transformer`, and continuations from a
:class:`~transformer_lib.model.lm.DecoderOnlyLM` (:func:`generate`).

All three strategies run the encoder once and then the decoder one token at a time. With
``use_cache=True`` (the default) each step feeds only the newest token and the decoder's
:class:`~transformer_lib.model.attention.DecoderCache` supplies the keys and values of the earlier
ones; without it each step re-reads the whole prefix. Both give the same tokens. The cache saves
recomputing the projections and feed-forward layers of the prefix, so each step runs the layers on
one token instead of ``t``; its attention still reads all ``t`` cached keys, so a step's cost still
grows with the prefix (linearly instead of quadratically for the whole step).

No decoder ever emits ``<pad>``: its logit is set to ``-inf`` before every choice, so a finished row
is padded only after its ``<eos>``, and the cached path (which never masks the prefix) and the
uncached path (which masks padding in the prefix) read the same tokens. The one ``<pad>`` that both
read is a start token that *is* ``<pad>`` (MarianMT's ``decoder_start_token_id``, which Hugging
Face's ``generate`` reads too): the uncached path's padding mask never hides the first column.

``min_len`` (0 by default, as in the paper and Hugging Face's ``min_new_tokens``) forbids ``<eos>``
until an output holds that many tokens (fairseq's ``min_len``, Hugging Face's
``MinNewTokensLengthLogitsProcessor``): the ``<eos>`` log-probability is set to ``-inf`` and the
others are left as they are. Beam search needs it: an output that ends at once has one factor below
1, and can outrank every real translation (Stahlberg and Byrne 2019, "On NMT Search Errors and Model
Errors: Cat Got Your Tongue?"). The translation application decodes with ``min_len=1``.

Greedy and sampled decoding, of the translation model and of the language models
(:func:`generate`), run one loop, :func:`autoregress`; the model enters it only as a step function.
Beam search has a loop of its own (it keeps ``W`` prefixes per source) on the same step function and
cache.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .._arguments import (
    check_non_negative_ints,
    check_positions_fit,
    check_positive_ints,
    check_real,
    check_token_id,
)
from ..model.attention import DecoderCache
from ..model.lm import DecoderOnlyLM
from ..model.masks import causal_mask, padding_mask
from ..model.transformer import Transformer
from ..training.data import Vocab, make_batch

__all__ = [
    "autoregress",
    "generate",
    "greedy",
    "sampler",
    "greedy_decode",
    "sample_decode",
    "filter_top_k_top_p",
    "beam_search",
    "Hypothesis",
    "sequence_log_prob",
    "exact_match",
]

# Below this temperature sampling is argmax: dividing logits by it would overflow to inf and NaN.
MIN_TEMPERATURE = 1e-6


def _next_token_log_probs(model: Transformer, hidden: torch.Tensor) -> torch.Tensor:
    """``hidden (..., d_model)`` -> ``(..., V)`` log-probabilities with ``<pad>`` removed (its logit
    is -inf)."""
    logits = model.output_projection(hidden)  # (..., V)
    logits[..., model.config.pad_id] = float("-inf")
    return logits.log_softmax(dim=-1)


def _forbid_eos(log_probs: torch.Tensor, eos_id: int) -> torch.Tensor:
    """``log_probs (R, V)`` with ``<eos>`` at ``-inf`` (a copy): an output shorter than ``min_len``
    may not end. The other tokens keep their log-probabilities, so a hypothesis's score is still its
    ``log P`` under the model (:func:`sequence_log_prob`)."""
    log_probs = log_probs.clone()
    log_probs[:, eos_id] = float("-inf")
    return log_probs  # (R, V)


# step(new (B, t_new), cache) -> (B, V): the next token's log-probabilities after ``new``
Step = Callable[[torch.Tensor, DecoderCache | None], torch.Tensor]


def _next_log_probs(step: Step, prefix: torch.Tensor, cache: DecoderCache | None) -> torch.Tensor:
    """``prefix (B, t)`` -> ``(B, V)``: ``step`` reads the whole prefix, or with a cache only the
    tokens that the cache does not hold yet (their keys and values join it)."""
    return step(prefix if cache is None else prefix[:, cache.length :], cache)


def greedy(log_probs: torch.Tensor) -> torch.Tensor:
    """The greedy choice: ``log_probs (B, V)`` -> ``(B,)``, the most likely token of each row."""
    return log_probs.argmax(dim=-1)


@torch.no_grad()
def autoregress(
    step: Step,
    prefix: torch.Tensor,
    steps: int,
    choose: Callable[[torch.Tensor], torch.Tensor],
    cache: DecoderCache | None = None,
    eos_id: int | None = None,
    pad_id: int | None = None,
    min_len: int = 0,
) -> torch.Tensor:
    """Extend ``prefix (B, t0)`` one token at a time, ``steps`` times: ``(B, t0 + <= steps)``.

    Each step asks ``step(new, cache)`` for the next token's log-probabilities ``(B, V)`` (``new``:
    the whole sequence, or with a ``cache`` only its newest tokens), and ``choose`` picks the token
    from them, ``(B, V) -> (B,)``. With ``eos_id`` (and ``pad_id``), a row that has emitted
    ``<eos>`` gets ``pad_id`` from then on, and the loop stops once every row has; ``<eos>`` is not
    chosen before ``min_len`` new tokens. The one loop of :func:`greedy_decode`,
    :func:`sample_decode` and :func:`generate`.
    """
    check_non_negative_ints(min_len=min_len)
    tokens = prefix
    finished = torch.zeros(prefix.size(0), dtype=torch.bool, device=prefix.device)  # (B,)
    for generated in range(steps):
        log_probs = _next_log_probs(step, tokens, cache)  # (B, V)
        if eos_id is not None and generated < min_len:
            log_probs = _forbid_eos(log_probs, eos_id)
        next_token = choose(log_probs)  # (B,)
        if eos_id is not None:
            next_token = next_token.masked_fill(finished, pad_id)  # pad after <eos>
            finished |= next_token == eos_id
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
        if eos_id is not None and finished.all():
            break
    return tokens


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
    one with :func:`sampler`. With ``use_cache`` each step feeds only the newest token and the
    model's :class:`~transformer_lib.model.attention.DecoderCache` supplies the keys and values of
    the earlier ones; without it each step re-reads the whole sequence. Both give the same tokens.
    The loop is :func:`autoregress`, the translation model's too.

    A batch of prompts of different lengths is left-padded, as Hugging Face's ``generate`` expects:
    ``attention_mask (B, T0)`` (1 or True at real tokens) hides the padding from every step, and
    each token's position is counted from its row's first real token,
    ``attention_mask.cumsum(-1) - 1`` (0 at padding), then one more per new token, as Hugging Face
    derives ``position_ids``. Each row then continues as it would alone. ``eos_id``: a row that
    emits it is finished; it gets ``pad_id`` from then on (default: the model's ``pad_id``, else
    ``eos_id`` as Hugging Face does for GPT-2), and generation stops once every row has finished.
    """
    pad_id = _check_generate(model, prompt, max_new_tokens, eos_id, pad_id)
    model.eval()
    prompt_mask = None if attention_mask is None else _prompt_mask(attention_mask, prompt)
    if prompt_mask is not None:
        # Hugging Face's position_ids: each token's index among its row's real tokens, 0 at padding
        counted = prompt_mask.long().cumsum(dim=-1) - 1  # (B, T0)
        prompt_positions = counted.masked_fill(~prompt_mask, 0)  # (B, T0)

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


def _check_generate(
    model: DecoderOnlyLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    eos_id: int | None,
    pad_id: int | None,
) -> int | None:
    """:func:`generate`'s arguments checked; returns the ``pad_id`` that finished rows get (the
    given one, else the model's, else ``eos_id``; None without ``eos_id``)."""
    if prompt.dim() != 2 or prompt.size(1) < 1:
        raise ValueError(
            f"prompt must be (B, T0) ids with T0 >= 1, got shape {tuple(prompt.shape)}"
        )
    check_non_negative_ints(max_new_tokens=max_new_tokens)
    check_positions_fit(
        type(model).__name__,
        0,
        prompt.size(1) + max_new_tokens,
        model.config.max_len,
        f"prompt length {prompt.size(1)} + max_new_tokens {max_new_tokens}",
    )
    vocab_size = model.config.vocab_size
    if eos_id is not None:
        check_token_id("eos_id", eos_id, vocab_size, f"vocab_size={vocab_size}")
        pad_id = pad_id if pad_id is not None else model.config.pad_id
        pad_id = pad_id if pad_id is not None else eos_id
        check_token_id("pad_id", pad_id, vocab_size, f"vocab_size={vocab_size}")
    return pad_id


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


def _read_prefix(
    model: Transformer,
    tgt: torch.Tensor,
    memory: torch.Tensor,
    src_mask: torch.Tensor,
    cache: DecoderCache | None = None,
) -> torch.Tensor:
    """The decoder's hidden states ``(B, T_new, d_model)`` of ``tgt (B, T_new)``: with a ``cache``
    its newest tokens under the causal mask (the decoder's own default), without one the whole
    prefix under the causal and padding masks, where the padding mask never hides the first column,
    the start token, even when it is ``<pad>`` (MarianMT; see the module's docstring)."""
    if cache is not None:
        return model.decode(tgt, memory, src_mask, cache=cache)  # (B, T_new, d_model)
    real = padding_mask(tgt, model.config.pad_id)  # (B, 1, 1, T)
    real[..., 0] = True  # the start token
    tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & real  # (B, 1, T, T)
    return model.decode(tgt, memory, src_mask, tgt_mask)  # (B, T, d_model)


class _Seq2SeqStep:
    """The encoder-decoder's step: the encoder reads the source once, here; each call runs the
    decoder on the new target tokens and returns the next token's log-probabilities."""

    def __init__(self, model: Transformer, src: torch.Tensor):
        self.model = model
        self.src_mask = model.source_mask(src)  # (B, 1, 1, S)
        self.memory = model.encode(src, self.src_mask)  # (B, S, d_model)

    def __call__(self, new: torch.Tensor, cache: DecoderCache | None) -> torch.Tensor:
        hidden = _read_prefix(self.model, new, self.memory, self.src_mask, cache)  # (B, t_new, d)
        return _next_token_log_probs(self.model, hidden[:, -1])  # (B, V)

    def reorder(self, index: torch.Tensor) -> None:
        """Row ``i`` of the next step reads the source of row ``index[i]`` (beam search)."""
        self.memory, self.src_mask = self.memory[index], self.src_mask[index]


@torch.no_grad()
def _generate(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    choose: Callable[[torch.Tensor], torch.Tensor],
    use_cache: bool,
    min_len: int = 0,
) -> torch.Tensor:
    """Greedy and sampled decoding of ``src (B, S)``: ``choose`` picks each token (B, V) -> (B,)."""
    check_positive_ints(max_len=max_len)
    model.eval()
    step, cache = _Seq2SeqStep(model, src), (model.new_cache() if use_cache else None)
    bos = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    tokens = autoregress(step, bos, max_len, choose, cache, eos_id, model.config.pad_id, min_len)
    return tokens[:, 1:]  # (B, <= max_len), without <bos>


def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    use_cache: bool = True,
    min_len: int = 0,
) -> torch.Tensor:
    """``src (B, S)`` -> ``(B, <= max_len)`` ids: the most likely token at every step, padded after
    ``<eos>`` (which is not chosen before ``min_len`` tokens)."""
    return _generate(model, src, max_len, bos_id, eos_id, greedy, use_cache, min_len)


def _check_top_k_top_p(top_k: int | None, top_p: float | None) -> None:
    if top_k is not None:
        check_positive_ints(top_k=top_k)
    if top_p is not None:
        check_real("top_p", top_p, "in (0, 1]", "(or None for no cut)")


def filter_top_k_top_p(
    logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """``logits (B, V)`` -> the same with every token outside the top-k and outside the nucleus set
    to -inf.

    ``top_k`` keeps the ``k`` largest logits of each row (a ``k`` above ``V`` keeps them all).
    ``top_p`` keeps the smallest set of most likely tokens whose probability mass reaches ``p``
    (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"), measured after the top-k
    cut, so the two combine. The most likely token always survives; ties at the cut are broken by
    position.
    """
    _check_top_k_top_p(top_k, top_p)
    if top_k is not None:
        # each token's rank in its row, 0 = most likely
        rank = logits.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)  # (B, V)
        logits = logits.masked_fill(rank >= top_k, float("-inf"))
    if top_p is not None:
        sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)  # (B, V) each
        probs = sorted_logits.softmax(dim=-1)  # (B, V)
        mass_before = probs.cumsum(dim=-1) - probs  # (B, V): mass of the more likely tokens
        drop_sorted = mass_before >= top_p  # the set already reached p without this token
        drop_sorted[..., 0] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # (B, V), back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _check_temperature(temperature: float) -> None:
    check_real("temperature", temperature, "finite and >= 0", "(0 means greedy)")


def sample_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    top_k: int | None = None,
    top_p: float | None = None,
    min_len: int = 0,
) -> torch.Tensor:
    """Draw each token from ``softmax(logits / temperature)``, optionally cut to the ``top_k`` most
    likely tokens and then to the nucleus of mass ``top_p`` (see :func:`filter_top_k_top_p`).

    Low temperatures sharpen the distribution, high ones flatten it. A temperature below ``1e-6`` (0
    included) is taken as its limit, the argmax: the same tokens as :func:`greedy_decode`. A
    negative, NaN or infinite temperature raises a ValueError. ``top_k=1`` is greedy at any
    temperature. ``<eos>`` is not drawn before ``min_len`` tokens.
    """
    return _generate(
        model,
        src,
        max_len,
        bos_id,
        eos_id,
        sampler(temperature, top_k, top_p, generator),
        use_cache,
        min_len,
    )


def sampler(
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The token-picking rule of :func:`sample_decode` as a function
    ``choose(log_probs (B, V)) -> (B,)``, for any generation loop (:func:`generate` uses it too).
    Arguments are checked here, once, with the same rules as :func:`sample_decode`."""
    _check_temperature(temperature)
    _check_top_k_top_p(top_k, top_p)

    def choose(log_probs: torch.Tensor) -> torch.Tensor:
        if temperature < MIN_TEMPERATURE:
            return log_probs.argmax(dim=-1)
        logits = filter_top_k_top_p(log_probs / temperature, top_k, top_p)  # (B, V)
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)[:, 0]

    return choose


@dataclass(frozen=True)
class Hypothesis:
    """One finished beam: its tokens (without ``<bos>``), their total log-probability
    ``log P(tokens | src)`` and the length-normalised score beam search ranked it by."""

    tokens: list[int]
    log_prob: float
    score: float


def _length_penalty(length: int, alpha: float) -> float:
    """GNMT's ``lp = ((5 + length) / 6) ** alpha`` (Wu et al. 2016, "Google's Neural Machine
    Translation System")."""
    return ((5 + length) / 6) ** alpha


def _length_normalised(log_prob: float, length: int, alpha: float) -> float:
    """The score beam search ranks finished outputs by: ``log P / lp(length)``."""
    return log_prob / _length_penalty(length, alpha)


def _best_reachable_score(
    log_prob: torch.Tensor, length: int, max_len: int, alpha: float
) -> torch.Tensor:
    """An upper bound on the score that live prefixes of ``length`` tokens with log-probabilities
    ``log_prob`` (any shape) can still reach, so beam search can stop once its best finished output
    is at least this good.

    A prefix finishes at some length ``L`` in ``[length + 1, max_len]`` with
    ``log P <= log_prob <= 0``: every further token multiplies ``P`` by a probability <= 1. Its
    score is ``log P / lp(L) <= log_prob / lp(L)`` (``lp > 0``), and as ``log_prob <= 0`` that is
    largest where ``lp(L)`` is largest. ``lp`` is monotone in ``L`` (growing for ``alpha > 0``), so
    the largest is at one end: ``lp(max_len)`` for ``alpha > 0``, ``lp(length + 1)`` for
    ``alpha < 0``, 1 for ``alpha = 0`` (the bound is then ``log_prob`` itself). Dividing by
    ``lp(length)`` instead, as if the prefix stopped now, is no bound for ``alpha > 0``: a longer
    ending divides the (barely smaller) ``log P`` by a larger ``lp`` and can still win.
    """
    largest_lp = max(_length_penalty(length + 1, alpha), _length_penalty(max_len, alpha))
    return log_prob / largest_lp


class _Expansion(NamedTuple):
    """One step of beam search on ``A`` sources of ``W`` live prefixes (:func:`_expand`)."""

    top_scores: torch.Tensor  # (A, 2W): the best 2W continuations' log-probabilities, best first
    origin: torch.Tensor  # (A, 2W): the live row each of them extends
    is_eos: torch.Tensor  # (A, 2W): whether it ends in <eos>
    live: torch.Tensor  # (A, W): the next live log-probabilities (-inf: a dead row)
    rows: torch.Tensor  # (A*W,): the row of the last step each next live prefix continues
    prefixes: torch.Tensor  # (A*W, t+1): the next live prefixes


def _expand(
    prefixes: torch.Tensor, live: torch.Tensor, log_probs: torch.Tensor, eos_id: int
) -> _Expansion:
    """One step of beam search for ``A`` sources of ``W`` live prefixes each: extend every live
    prefix by every token and take the best ``2W`` continuations per source by log-probability,
    then keep the best ``W`` that do not end in ``<eos>`` as the next live prefixes (each live
    prefix has one ``<eos>`` continuation, so at most ``W`` of the ``2W`` end in it).

    Args:
        prefixes: ``(A*W, t)`` the live prefixes, ``W`` rows per source.
        live: ``(A, W)`` their log-probabilities (``-inf``: a dead row).
        log_probs: ``(A*W, V)`` the next-token log-probabilities of each prefix.
        eos_id: the end token.
    """
    num_active, width = live.shape
    vocab_size = log_probs.size(-1)
    candidates = (live.reshape(-1, 1) + log_probs).view(num_active, width * vocab_size)  # (A, W*V)
    top_scores, top_index = candidates.topk(2 * width, dim=1)  # (A, 2W), best first
    origin, token = top_index // vocab_size, top_index % vocab_size  # (A, 2W): live row, new token
    is_eos = token == eos_id  # (A, 2W)
    # the best W non-<eos> continuations in rank order, first when sorted by (ends in <eos>, rank)
    rank = torch.arange(2 * width, device=live.device)  # (2W,)
    keep = (is_eos.long() * 2 * width + rank).argsort(dim=1)[:, :width]  # (A, W)
    live = top_scores.gather(1, keep).masked_fill(is_eos.gather(1, keep), float("-inf"))  # (A, W)
    first_rows = torch.arange(num_active, device=live.device)[:, None] * width  # (A, 1)
    rows = (first_rows + origin.gather(1, keep)).flatten()  # (A*W,)
    next_tokens = token.gather(1, keep).reshape(-1, 1)  # (A*W, 1)
    prefixes = torch.cat([prefixes[rows], next_tokens], dim=1)  # (A*W, t+1)
    return _Expansion(top_scores, origin, is_eos, live, rows, prefixes)


def _retire(
    found: list[list[Hypothesis]],
    active: list[int],
    expanded: _Expansion,
    prefixes: torch.Tensor,
    length: int,
    eos_id: int,
    alpha: float,
) -> None:
    """Set aside in ``found`` (per source, the ``W`` best, best first) the continuations of
    :func:`_expand`'s output ``expanded`` that end in ``<eos>`` and rank among the best ``W``;
    ``prefixes (A*W, t)`` are the prefixes they extend, ``length`` their tokens after ``<bos>``.
    An ``<eos>`` ranked below the best ``W`` would not be in a width-``W`` beam, so it is not
    kept."""
    top_scores, origin, is_eos = expanded.top_scores, expanded.origin, expanded.is_eos
    width = top_scores.size(1) // 2
    eos_in_best = is_eos[:, :width] & top_scores[:, :width].isfinite()  # (A, W)
    finishing = eos_in_best.nonzero().tolist()  # (a, k) of each <eos> in the best W
    if finishing:
        top_list, origin_list = top_scores.tolist(), origin.tolist()
    for a, k in finishing:
        log_prob, source = top_list[a][k], active[a]
        tokens = prefixes[a * width + origin_list[a][k], 1:].tolist() + [eos_id]
        found[source].append(
            Hypothesis(tokens, log_prob, _length_normalised(log_prob, length, alpha))
        )
        found[source] = sorted(found[source], key=lambda h: h.score, reverse=True)[:width]  # stable


def _still_searching(
    found: list[list[Hypothesis]],
    active: list[int],
    live: torch.Tensor,
    prefixes: torch.Tensor,
    length: int,
    max_len: int,
    alpha: float,
) -> list[int]:
    """The positions in ``active`` of the sources that go on: those below ``max_len`` whose best
    live prefix (``live (A, W)``) can still beat their best finished score
    (:func:`_best_reachable_score`). A source that stops at ``max_len`` with nothing finished gets
    its live ``prefixes (A*W, t)``, cut there and ranked, as its hypotheses."""
    width = live.size(1)
    reachable = _best_reachable_score(live[:, 0], length, max_len, alpha).tolist()  # (A,)
    still: list[int] = []
    for a, source in enumerate(active):
        hypotheses = found[source]
        can_improve = reachable[a] > float("-inf") and (
            not hypotheses or reachable[a] > hypotheses[0].score
        )
        if length < max_len and can_improve:
            still.append(a)
        elif not hypotheses:  # max_len reached with nothing finished: rank the cut prefixes
            found[source] = sorted(
                (
                    Hypothesis(
                        prefixes[a * width + j, 1:].tolist(),
                        s,
                        _length_normalised(s, length, alpha),
                    )
                    for j, s in enumerate(live[a].tolist())
                    if s > float("-inf")
                ),
                key=lambda h: h.score,
                reverse=True,
            )
    return still


def _beam_search_steps(
    step: Callable[[torch.Tensor], torch.Tensor],
    reorder: Callable[[torch.Tensor], None],
    num_sources: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    beam_width: int,
    length_penalty: float,
    device: torch.device | str = "cpu",
    min_len: int = 0,
) -> list[list[Hypothesis]]:
    """Beam search over ``num_sources`` sources at once; each source's finished hypotheses, best
    first.

    The model enters only through two callables, so the search can be tested on a hand-built table:
    ``step(prefixes (R, t)) -> (R, V)`` gives the next-token log-probabilities of ``R`` prefixes
    (each starting with ``<bos>``; ``R = A * W``: ``W`` rows for each of the ``A`` sources still
    searching, in their original order, so the first call gets ``num_sources * W`` rows), and
    ``reorder(index (R',))`` tells it that row ``i`` of the next call continues row ``index[i]`` of
    the last one (:func:`beam_search` reorders the encoder memory and the cache; a table needs
    nothing).

    Every step, for each source, :func:`_expand` keeps the best ``W`` continuations that do not end
    in ``<eos>`` live and :func:`_retire` sets aside those among the best ``W`` that do (keeping
    each source's ``W`` best): a finished output never shrinks the live beam, and ``W = 1`` is
    greedy decoding for ``alpha = 0`` (and in practice for the default alpha, see the tests). A
    source stops when no live prefix can beat its best finished score, or at ``max_len``
    (:func:`_still_searching`); its rows then leave the batch. No continuation ends in ``<eos>``
    before ``min_len`` tokens.
    """
    width, alpha = beam_width, length_penalty
    found: list[list[Hypothesis]] = [[] for _ in range(num_sources)]
    active = list(range(num_sources))  # the sources still searching, in row-block order
    num_rows = num_sources * width
    prefixes = torch.full((num_rows, 1), bos_id, dtype=torch.long, device=device)  # (A*W, 1)
    # Only one copy of <bos> is live; the others start at -inf, so the first step does not pick the
    # same continuation W times. A row at -inf is dead: it is never finished or returned.
    live = torch.full((num_sources, width), -math.inf, device=device)  # (A, W): log-probabilities
    live[:, 0] = 0.0
    for length in range(1, max_len + 1):  # length: tokens after <bos> in each continuation
        log_probs = step(prefixes)  # (A*W, V)
        if length <= min_len:  # <eos> here would end an output of length - 1 < min_len tokens
            log_probs = _forbid_eos(log_probs, eos_id)
        expanded = _expand(prefixes, live, log_probs, eos_id)
        _retire(found, active, expanded, prefixes, length, eos_id, alpha)
        live = expanded.live  # (A, W)
        still = _still_searching(found, active, live, expanded.prefixes, length, max_len, alpha)
        if not still:
            break
        kept_rows = (
            torch.tensor(still, device=device)[:, None] * width + torch.arange(width, device=device)
        ).flatten()
        reorder(expanded.rows[kept_rows])  # follow the chosen prefixes, drop finished sources
        prefixes, live = expanded.prefixes[kept_rows], live[still]  # (A'*W, t+1), (A', W)
        active = [active[a] for a in still]
    return found


def _check_beam(
    max_len: int, beam_width: int, length_penalty: float, min_len: int, vocab_size: int
) -> tuple[int, float]:
    """:func:`beam_search`'s arguments checked; returns ``beam_width`` and ``length_penalty`` as
    ``int`` and ``float`` (NumPy scalars from a grid pass too)."""
    check_positive_ints(max_len=max_len, beam_width=beam_width)
    check_non_negative_ints(min_len=min_len)
    if beam_width >= vocab_size:
        raise ValueError(
            f"beam_width={beam_width} must be below the vocabulary size {vocab_size}: a step can "
            f"extend a prefix by at most {vocab_size - 1} tokens (<pad> is never emitted)"
        )
    check_real("length_penalty", length_penalty, "finite", "(alpha, 0.6 in the paper)")
    return int(beam_width), float(length_penalty)


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    beam_width: int = 4,
    length_penalty: float = 0.6,
    use_cache: bool = True,
    return_hypotheses: bool = False,
    min_len: int = 0,
) -> list[list[int]] | list[list[Hypothesis]]:
    """Keep the ``beam_width`` most likely prefixes each step; return each source's best output.

    Hypotheses are ranked by ``log P / lp`` with the GNMT length penalty
    ``lp = ((5 + length) / 6) ** alpha`` (``alpha = length_penalty``; the paper uses 0.6), so longer
    outputs are not punished merely for having more factors below 1. The beam never shrinks
    (:func:`_beam_search_steps`), and a source stops only when none of its live prefixes can still
    beat its best finished output (a live prefix's ``log P`` can only fall, but its ``lp`` can still
    grow up to ``lp(max_len)``), or at ``max_len``. All ``B`` sources are searched together:
    ``B * W`` rows go through the decoder, the KV cache follows the chosen prefixes, and a source
    that stops leaves the batch. Each step holds ``B * W * V`` log-probabilities: with a large
    vocabulary, pass a long test split in chunks of sources.

    Returns token lists without ``<bos>``, each ending in ``<eos>`` unless ``max_len`` cut it; with
    ``return_hypotheses=True`` each source's :class:`Hypothesis` list (tokens, ``log_prob``,
    ``score``), best first: at most ``W``, the finished outputs found before the search stopped, to
    compare with greedy decoding's (:func:`sequence_log_prob`).

    ``min_len``: no output ends before this many tokens; ``min_len=1`` forbids ``<eos>`` alone,
    which with the default 0 often wins at small ``alpha`` (see the module's docstring).
    """
    vocab_size = model.config.tgt_vocab_size
    beam_width, length_penalty = _check_beam(
        max_len, beam_width, length_penalty, min_len, vocab_size
    )
    model.eval()
    step, cache = _Seq2SeqStep(model, src), (model.new_cache() if use_cache else None)

    def reorder(index: torch.Tensor) -> None:  # row i of the next step continues row index[i]
        step.reorder(index)
        if cache is not None:
            cache.reorder(index)

    reorder(torch.arange(src.size(0), device=src.device).repeat_interleave(beam_width))  # (B*W,)
    found = _beam_search_steps(
        lambda prefixes: _next_log_probs(step, prefixes, cache),  # (A*W, t) ids -> (A*W, V)
        reorder,
        src.size(0),
        max_len,
        bos_id,
        eos_id,
        beam_width,
        length_penalty,
        src.device,
        min_len,
    )
    return found if return_hypotheses else [hypotheses[0].tokens for hypotheses in found]


@torch.no_grad()
def sequence_log_prob(
    model: Transformer, src: torch.Tensor, tokens: torch.Tensor, bos_id: int, eos_id: int
) -> torch.Tensor:
    """``log P(tokens | src)`` under the model, as the decoders see it (``<pad>`` excluded):
    ``src (B, S)`` and ``tokens (B, T)`` as the decoders return them (without ``<bos>``, padded
    after ``<eos>``) -> ``(B,)``.

    Each row sums the log-probabilities of its tokens up to and including its first ``<eos>``; use
    it to compare the outputs of greedy decoding and beam search on the same sources. The prefix is
    read as the decoders read it, a ``<pad>`` start token included.
    """
    model.eval()
    bos = torch.full((tokens.size(0), 1), bos_id, dtype=torch.long, device=tokens.device)
    # what the decoder read before each token
    prefix = torch.cat([bos, tokens[:, :-1]], dim=1)  # (B, T)
    src_mask = model.source_mask(src)  # (B, 1, 1, S)
    hidden = _read_prefix(model, prefix, model.encode(src, src_mask), src_mask)  # (B, T, d_model)
    log_probs = _next_token_log_probs(model, hidden).gather(-1, tokens[..., None])[..., 0]  # (B, T)
    is_eos = (tokens == eos_id).long()  # (B, T)
    counted = (is_eos.cumsum(dim=1) - is_eos) == 0  # up to and including the first <eos>
    return log_probs.masked_fill(~counted, 0.0).sum(dim=1)


def exact_match(
    model: Transformer,
    pairs: Sequence[tuple[str, str]],
    vocab: Vocab,
    max_len: int | None = None,
    batch_size: int = 500,
) -> float:
    """Fraction of ``(source, target)`` pairs whose greedy decoding is exactly the target string."""
    if not pairs:
        raise ValueError("exact_match needs at least one (source, target) pair")
    check_positive_ints(batch_size=batch_size)
    max_len = max_len if max_len is not None else max(len(t) for _, t in pairs) + 1
    device = next(model.parameters()).device
    correct = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        src = make_batch(chunk, vocab).src.to(device)
        out = greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id)
        correct += sum(
            vocab.decode(ids) == target for ids, (_, target) in zip(out, chunk, strict=True)
        )
    return correct / len(pairs)
