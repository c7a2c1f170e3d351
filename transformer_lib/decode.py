"""Generating target sequences from a trained :class:`~transformer_lib.model.Transformer`.

All three strategies run the encoder once and then the decoder one token at a time. With ``use_cache=True``
(the default) each step feeds only the newest token and the decoder's :class:`~transformer_lib.DecoderCache`
supplies the keys and values of the earlier ones; without it each step re-reads the whole prefix. Both give the
same tokens. The cache saves recomputing the projections and feed-forward layers of the prefix, so each step
runs the layers on one token instead of ``t``; its attention still reads all ``t`` cached keys, so a step's
cost still grows with the prefix (linearly instead of quadratically for the whole step).

No decoder ever emits ``<pad>``: its logit is set to ``-inf`` before every choice, so a finished row is padded
only after its ``<eos>``, and the cached path (which never masks the prefix) and the uncached path (which
masks padding in the prefix) read the same tokens.
"""

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ._arguments import check_positive_ints, is_int
from .data import Vocab, make_batch
from .model import Transformer

__all__ = [
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
    """``hidden (..., d_model)`` -> ``(..., V)`` log-probabilities with ``<pad>`` removed (its logit is -inf)."""
    logits = model.output_projection(hidden)  # (..., V)
    logits[..., model.config.pad_id] = float("-inf")
    return logits.log_softmax(dim=-1)


class _Stepper:
    """Next-token log-probabilities for a growing target prefix, with or without the KV cache."""

    def __init__(self, model: Transformer, src: torch.Tensor, use_cache: bool):
        self.model = model
        self.src_mask = model.source_mask(src)  # (B, 1, 1, S)
        self.memory = model.encode(src, self.src_mask)  # (B, S, d_model)
        self.cache = model.new_cache() if use_cache else None

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        """``prefix (B, t)`` ids (starting with ``<bos>``) -> ``(B, V)`` log-probabilities of token ``t + 1``."""
        new = prefix if self.cache is None else prefix[:, self.cache.length :]  # only unseen tokens when cached
        hidden = self.model.decode(new, self.memory, self.src_mask, cache=self.cache)  # (B, t_new, d_model)
        return _next_token_log_probs(self.model, hidden[:, -1])  # (B, V)

    def reorder(self, index: torch.Tensor) -> None:
        """Follow beam search's choice of hypotheses: keep rows ``index`` of the memory and the cache."""
        self.memory, self.src_mask = self.memory[index], self.src_mask[index]
        if self.cache is not None:
            self.cache.reorder(index)


@torch.no_grad()
def _generate(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    choose: Callable[[torch.Tensor], torch.Tensor],
    use_cache: bool,
) -> torch.Tensor:
    """Shared loop of greedy and sampled decoding: ``choose(log_probs (B, V)) -> (B,)`` picks each token."""
    check_positive_ints(max_len=max_len)
    model.eval()
    stepper = _Stepper(model, src, use_cache)
    tokens = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        next_token = choose(stepper.log_probs(tokens))  # (B,)
        next_token = next_token.masked_fill(finished, model.config.pad_id)  # pad after <eos>
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens[:, 1:]  # (B, <= max_len), without <bos>


def greedy_decode(
    model: Transformer, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, use_cache: bool = True
) -> torch.Tensor:
    """``src (B, S)`` -> ``(B, <= max_len)`` ids: the most likely token at every step, padded after ``<eos>``."""
    return _generate(model, src, max_len, bos_id, eos_id, lambda lp: lp.argmax(dim=-1), use_cache)


def _check_top_k_top_p(top_k: int | None, top_p: float | None) -> None:
    if top_k is not None and (not is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be a whole number >= 1 (or None for no cut), got {top_k!r}")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] (or None for no cut), got {top_p!r}")


def filter_top_k_top_p(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """``logits (B, V)`` -> the same with every token outside the top-k and outside the nucleus set to -inf.

    ``top_k`` keeps the ``k`` largest logits of each row (a ``k`` above ``V`` keeps them all). ``top_p`` keeps
    the smallest set of most likely tokens whose probability mass reaches ``p`` (Holtzman et al. 2020, "The
    Curious Case of Neural Text Degeneration"), measured after the top-k cut, so the two combine. The most
    likely token always survives; ties at the cut are broken by position.
    """
    _check_top_k_top_p(top_k, top_p)
    if top_k is not None:
        rank = logits.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)  # (B, V): 0 = most likely
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
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):  # NumPy's float32 is a number
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 means greedy), got {temperature}")


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
) -> torch.Tensor:
    """Draw each token from ``softmax(logits / temperature)``, optionally cut to the ``top_k`` most likely tokens
    and then to the nucleus of mass ``top_p`` (see :func:`filter_top_k_top_p`).

    Low temperatures sharpen the distribution, high ones flatten it. A temperature below ``1e-6`` (0
    included) is taken as its limit, the argmax: the same tokens as :func:`greedy_decode`. A negative, NaN or
    infinite temperature raises a ValueError. ``top_k=1`` is greedy at any temperature.
    """
    return _generate(model, src, max_len, bos_id, eos_id, sampler(temperature, top_k, top_p, generator), use_cache)


def sampler(
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The token-picking rule of :func:`sample_decode` as a function ``choose(log_probs (B, V)) -> (B,)``, for
    any generation loop (the language models of :mod:`transformer_lib.lm` use it too). Arguments are checked
    here, once, with the same rules as :func:`sample_decode`."""
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
    """One finished beam: its tokens (without ``<bos>``), their total log-probability ``log P(tokens | src)``
    and the length-normalised score beam search ranked it by."""

    tokens: list[int]
    log_prob: float
    score: float


def _length_normalised(log_prob: float, length: int, alpha: float) -> float:
    """GNMT's ``log P / lp`` with ``lp = ((5 + length) / 6) ** alpha`` (Wu et al. 2016)."""
    return log_prob / (((5 + length) / 6) ** alpha)


def _beam_search_one(
    model: Transformer,
    row: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    beam_width: int,
    length_penalty: float,
    use_cache: bool,
) -> list[Hypothesis]:
    """Every hypothesis that beam search finished for one source ``row (S,)``, best first."""
    device = row.device
    stepper = _Stepper(model, row[None], use_cache)
    beams = torch.full((1, 1), bos_id, dtype=torch.long, device=device)  # (W, t): live prefixes
    scores = torch.zeros(1, device=device)  # (W,): their log-probabilities
    finished: list[Hypothesis] = []
    for _ in range(max_len):
        log_probs = scores[:, None] + stepper.log_probs(beams)  # (W, V)
        top_scores, top_index = log_probs.flatten().topk(beam_width)  # best W continuations of all W * V
        origin, token = top_index // log_probs.size(1), top_index % log_probs.size(1)
        keep = []
        for score, o, t in zip(top_scores.tolist(), origin.tolist(), token.tolist(), strict=True):
            if score == float("-inf"):  # <pad>, never a continuation
                continue
            if t == eos_id:
                tokens = beams[o, 1:].tolist() + [eos_id]
                finished.append(Hypothesis(tokens, score, _length_normalised(score, len(tokens), length_penalty)))
            else:
                keep.append((score, o, t))
        # A beam that ended in <eos> leaves the live set, which holds fewer than W prefixes until the next step.
        if len(finished) >= beam_width or not keep:
            break
        index = torch.tensor([o for _, o, _ in keep], device=device)
        stepper.reorder(index)
        beams = torch.cat([beams[index], torch.tensor([[t] for *_, t in keep], device=device)], dim=1)
        scores = torch.tensor([s for s, _, _ in keep], device=device)
    if not finished:  # max_len reached: rank the live prefixes instead
        finished = [
            Hypothesis(b[1:].tolist(), s, _length_normalised(s, beams.size(1) - 1, length_penalty))
            for s, b in zip(scores.tolist(), beams, strict=True)
        ]
    return sorted(finished, key=lambda h: h.score, reverse=True)


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
) -> list[list[int]] | list[list[Hypothesis]]:
    """Keep the ``beam_width`` most likely prefixes at every step; return each source's best finished one.

    Hypotheses are ranked by ``log P / lp`` with the GNMT length penalty ``lp = ((5 + length) / 6) ** alpha``
    (``alpha = length_penalty``; the paper uses 0.6), so longer outputs are not punished merely for having
    more factors below 1. When one of the best continuations ends in ``<eos>`` it is set aside as finished,
    and for that step fewer than ``beam_width`` prefixes stay live. Sources are searched one at a time,
    which keeps the bookkeeping readable.

    Returns token lists without ``<bos>``, each ending in ``<eos>`` unless ``max_len`` cut it; with
    ``return_hypotheses=True`` each source's list of :class:`Hypothesis` instead (tokens, ``log_prob``,
    ``score``), best first, so the sequence log-probability can be compared with greedy decoding's
    (:func:`sequence_log_prob`).
    """
    check_positive_ints(max_len=max_len)
    vocab_size = model.config.tgt_vocab_size
    if not is_int(beam_width) or beam_width < 1:
        raise ValueError(f"beam_width must be a whole number >= 1, got {beam_width!r}")
    if beam_width >= vocab_size:
        raise ValueError(
            f"beam_width={beam_width} must be below the vocabulary size {vocab_size}: "
            f"a step can extend a prefix by at most {vocab_size - 1} tokens (<pad> is never emitted)"
        )
    model.eval()
    found = [
        _beam_search_one(model, row, max_len, bos_id, eos_id, beam_width, length_penalty, use_cache) for row in src
    ]
    return found if return_hypotheses else [hypotheses[0].tokens for hypotheses in found]


@torch.no_grad()
def sequence_log_prob(
    model: Transformer, src: torch.Tensor, tokens: torch.Tensor, bos_id: int, eos_id: int
) -> torch.Tensor:
    """``log P(tokens | src)`` under the model, as the decoders see it (``<pad>`` excluded): ``src (B, S)`` and
    ``tokens (B, T)`` as the decoders return them (without ``<bos>``, padded after ``<eos>``) -> ``(B,)``.

    Each row sums the log-probabilities of its tokens up to and including its first ``<eos>``; use it to
    compare the outputs of greedy decoding and beam search on the same sources.
    """
    model.eval()
    bos = torch.full((tokens.size(0), 1), bos_id, dtype=torch.long, device=tokens.device)
    prefix = torch.cat([bos, tokens[:, :-1]], dim=1)  # (B, T): what the decoder read before each token
    src_mask = model.source_mask(src)  # (B, 1, 1, S)
    hidden = model.decode(prefix, model.encode(src, src_mask), src_mask)  # (B, T, d_model)
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
        correct += sum(vocab.decode(ids) == target for ids, (_, target) in zip(out, chunk, strict=True))
    return correct / len(pairs)
