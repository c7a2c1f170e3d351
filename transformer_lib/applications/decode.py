"""Generating target sequences from a trained
:class:`~transformer_lib.model.transformer.Transformer`.

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

Greedy and sampled decoding, here and in the language models
(:func:`transformer_lib.model.lm.generate`), run one loop, :func:`autoregress`; the model enters it
only as a step function. Beam search has a loop of its own (it keeps ``W`` prefixes per source) on
the same step function and cache.
"""

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .._arguments import check_non_negative_ints, check_positive_ints
from ..model.attention import DecoderCache
from ..model.masks import causal_mask, padding_mask
from ..model.transformer import Transformer
from ..training.data import Vocab, make_batch

__all__ = [
    "autoregress",
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
    :func:`sample_decode` and :func:`transformer_lib.model.lm.generate`.
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
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] (or None for no cut), got {top_p!r}")


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
        # (B, V): 0 = most likely
        rank = logits.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)
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
    # NumPy's float32 is a number
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(
            f"temperature must be a finite number >= 0 (0 means greedy), got {temperature}"
        )


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
    """The token-picking rule of :func:`sample_decode` as a function ``choose(log_probs (B, V)) ->
    (B,)``, for any generation loop (the language models of :mod:`transformer_lib.model.lm` use it
    too). Arguments are checked here, once, with the same rules as :func:`sample_decode`."""
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
    score is ``log P / lp(L) <= log_prob / lp(L)`` (``lp > 0``), and as ``log_prob <=
    0`` that is largest where ``lp(L)`` is largest. ``lp`` is monotone in ``L`` (growing for ``alpha
    > 0``), so the largest is at one end: ``lp(max_len)`` for ``alpha > 0``, ``lp(length + 1)`` for
    ``alpha < 0``, 1 for ``alpha = 0`` (the bound is then ``log_prob`` itself). Dividing by
    ``lp(length)`` instead, as if the prefix stopped now, is no bound for ``alpha > 0``: a longer
    ending divides the (barely smaller) ``log P`` by a larger ``lp`` and can still win.
    """
    largest_lp = max(_length_penalty(length + 1, alpha), _length_penalty(max_len, alpha))
    return log_prob / largest_lp


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

    Every step, for each source: extend its ``W`` live prefixes by every token, take the best ``2W``
    of these ``W * V`` continuations by log-probability, set aside as finished those that end in
    ``<eos>`` and rank among the best ``W``, and keep the best ``W`` that do not end in ``<eos>`` as
    the next live prefixes (each live prefix has one ``<eos>`` continuation, so at most ``W`` of the
    ``2W`` end in it). A finished output therefore never shrinks the live beam. An ``<eos>`` ranked
    below the best ``W`` would not be in a width-``W`` beam, so it is not kept: that makes ``W = 1``
    greedy decoding for ``alpha = 0`` (and in practice for the default alpha, see the tests).

    A source stops when no live prefix can still beat its best finished score (see
    :func:`_best_reachable_score`), or at ``max_len``; its rows then leave the batch, so the decoder
    only runs on sources still searching. A source that finished nothing by ``max_len`` returns its
    live prefixes, cut at ``max_len`` without ``<eos>``. At most the ``W`` best finished hypotheses
    are kept per source. No continuation ends in ``<eos>`` before ``min_len`` tokens (its
    log-probability is ``-inf`` there), so every finished output has at least ``min_len`` tokens
    before its ``<eos>``.
    """
    width, alpha = beam_width, length_penalty
    found: list[list[Hypothesis]] = [[] for _ in range(num_sources)]
    active = list(range(num_sources))  # the sources still searching, in row-block order
    # (A*W, 1)
    prefixes = torch.full((num_sources * width, 1), bos_id, dtype=torch.long, device=device)
    # (A, W) live log-probabilities. Only one copy of <bos> is live; the others start at -inf, so
    # the first step does not pick the same continuation W times. A row at -inf is dead: it is never
    # finished or returned.
    live = torch.full((num_sources, width), float("-inf"), device=device)
    live[:, 0] = 0.0
    rank = torch.arange(2 * width, device=device)  # (2W,)
    for length in range(1, max_len + 1):  # length: tokens after <bos> in each continuation
        log_probs = step(prefixes)  # (A*W, V)
        if length <= min_len:  # <eos> here would end an output of length - 1 < min_len tokens
            log_probs = _forbid_eos(log_probs, eos_id)
        vocab_size = log_probs.size(-1)
        # (A, W*V)
        candidates = (live.reshape(-1, 1) + log_probs).view(len(active), width * vocab_size)
        top_scores, top_index = candidates.topk(2 * width, dim=1)  # (A, 2W), best first
        # (A, 2W): live row, new token
        origin, token = top_index // vocab_size, top_index % vocab_size
        is_eos = token == eos_id  # (A, 2W)
        # the best W non-<eos> continuations, in rank order: sorting by (ends in <eos>, rank) puts
        # them first
        keep = (is_eos.long() * 2 * width + rank).argsort(dim=1)[:, :width]  # (A, W)
        # (A, W)
        live = top_scores.gather(1, keep).masked_fill(is_eos.gather(1, keep), float("-inf"))
        rows = (
            torch.arange(len(active), device=device)[:, None] * width + origin.gather(1, keep)
        ).flatten()
        # (A*W, t+1)
        prefixes_next = torch.cat([prefixes[rows], token.gather(1, keep).reshape(-1, 1)], dim=1)

        # <eos> in best W
        finishing = (is_eos[:, :width] & top_scores[:, :width].isfinite()).nonzero().tolist()
        if finishing:
            top_list, origin_list = top_scores.tolist(), origin.tolist()
        for a, k in finishing:
            log_prob, source = top_list[a][k], active[a]
            tokens = prefixes[a * width + origin_list[a][k], 1:].tolist() + [eos_id]
            found[source].append(
                Hypothesis(tokens, log_prob, _length_normalised(log_prob, length, alpha))
            )
            # stable sort
            found[source] = sorted(found[source], key=lambda h: h.score, reverse=True)[:width]
        # (A,): from the best live row
        reachable = _best_reachable_score(live[:, 0], length, max_len, alpha).tolist()
        still: list[int] = []  # positions in `active` of the sources that go on
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
                            prefixes_next[a * width + j, 1:].tolist(),
                            s,
                            _length_normalised(s, length, alpha),
                        )
                        for j, s in enumerate(live[a].tolist())
                        if s > float("-inf")
                    ),
                    key=lambda h: h.score,
                    reverse=True,
                )
        if not still:
            break
        kept_rows = (
            torch.tensor(still, device=device)[:, None] * width + torch.arange(width, device=device)
        ).flatten()
        reorder(rows[kept_rows])  # follow the chosen prefixes and drop the rows of finished sources
        prefixes, live = prefixes_next[kept_rows], live[still]
        active = [active[a] for a in still]
    return found


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
    """Keep the ``beam_width`` most likely prefixes at every step; return each source's best
    finished output.

    Hypotheses are ranked by ``log P / lp`` with the GNMT length penalty ``lp = ((5 + length) / 6)
    ** alpha`` (``alpha = length_penalty``; the paper uses 0.6), so longer outputs are not punished
    merely for having more factors below 1. Each step takes the best ``2W`` continuations of the
    ``W`` live prefixes: those that end in ``<eos>`` (among the best ``W``) are set aside as
    finished, the best ``W`` others stay live, so the beam never shrinks. A source stops only when
    none of its live prefixes can still beat its best finished output (a live prefix's ``log P`` can
    only fall, but its ``lp`` can still grow up to ``lp(max_len)``), or at ``max_len``. All ``B``
    sources are searched together: ``B * W`` rows go through the decoder, the KV cache follows the
    chosen prefixes, and a source that stops leaves the batch. Each step holds ``B * W * V``
    log-probabilities: with a large vocabulary, pass a long test split in chunks of sources.

    Returns token lists without ``<bos>``, each ending in ``<eos>`` unless ``max_len`` cut it; with
    ``return_hypotheses=True`` each source's list of :class:`Hypothesis` instead (tokens,
    ``log_prob``, ``score``), best first (at most ``W`` per source: the finished outputs found
    before the search stopped), so the sequence log-probability can be compared with greedy
    decoding's (:func:`sequence_log_prob`).

    ``min_len``: no output ends before this many tokens (see the module's docstring). With the
    default 0 an output may be ``<eos>`` alone, and it often wins: its one factor below 1 can score
    above every real translation, most of all at small ``alpha``; ``min_len=1`` forbids that.
    """
    check_positive_ints(max_len=max_len, beam_width=beam_width)
    check_non_negative_ints(min_len=min_len)
    vocab_size = model.config.tgt_vocab_size
    if beam_width >= vocab_size:
        raise ValueError(
            f"beam_width={beam_width} must be below the vocabulary size {vocab_size}: a step can "
            f"extend a prefix by at most {vocab_size - 1} tokens (<pad> is never emitted)"
        )
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real):
        raise TypeError(
            f"length_penalty must be a number (alpha, 0.6 in the paper), got {length_penalty!r}"
        )
    if not math.isfinite(length_penalty):
        raise ValueError(
            "length_penalty must be a finite number (alpha, 0.6 in the paper), got "
            f"{length_penalty}"
        )
    # NumPy scalars from a grid pass too
    beam_width, length_penalty = int(beam_width), float(length_penalty)
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
    # (B, T): what the decoder read before each token
    prefix = torch.cat([bos, tokens[:, :-1]], dim=1)
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
