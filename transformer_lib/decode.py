"""Generating target sequences from a trained :class:`~transformer_lib.model.Transformer`.

All three strategies run the encoder once and then the decoder one token at a time. With ``use_cache=True``
(the default) each step feeds only the newest token and the decoder's :class:`~transformer_lib.DecoderCache`
supplies the keys and values of the earlier ones; without it each step re-reads the whole prefix. Both give the
same tokens; the cache turns the work per step from O(t) tokens into O(1).
"""

from collections.abc import Callable, Sequence

import torch

from .data import Vocab, make_batch
from .model import Transformer

__all__ = ["greedy_decode", "sample_decode", "beam_search", "exact_match"]


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
        return self.model.output_projection(hidden[:, -1]).log_softmax(dim=-1)  # (B, V)

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


def sample_decode(
    model: Transformer,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """Draw each token from ``softmax(logits / temperature)``: near 0 it is greedy, above 1 more random."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 (use greedy_decode for 0), got {temperature}")

    def choose(log_probs: torch.Tensor) -> torch.Tensor:
        probs = (log_probs / temperature).softmax(dim=-1)  # (B, V)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    return _generate(model, src, max_len, bos_id, eos_id, choose, use_cache)


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
) -> list[list[int]]:
    """Keep the ``beam_width`` most likely prefixes at every step; return each source's best finished one.

    Hypotheses are ranked by ``log P / lp`` with the GNMT length penalty ``lp = ((5 + length) / 6) ** alpha``
    (``alpha = length_penalty``; the paper uses 0.6), so longer outputs are not punished merely for having
    more factors below 1. Sources are searched one at a time, which keeps the bookkeeping readable.
    Returns token lists without ``<bos>``, each ending in ``<eos>`` unless ``max_len`` cut it.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    model.eval()

    def normalised(score: float, length: int) -> float:
        return score / (((5 + length) / 6) ** length_penalty)

    results = []
    for row in src:
        stepper = _Stepper(model, row[None], use_cache)
        beams = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (W, t): live prefixes
        scores = torch.zeros(1, device=src.device)  # (W,): their log-probabilities
        finished: list[tuple[float, list[int]]] = []
        for _ in range(max_len):
            log_probs = scores[:, None] + stepper.log_probs(beams)  # (W, V)
            top_scores, top_index = log_probs.flatten().topk(beam_width)  # best W continuations of all W * V
            origin, token = top_index // log_probs.size(1), top_index % log_probs.size(1)
            keep = []
            for score, o, t in zip(top_scores.tolist(), origin.tolist(), token.tolist(), strict=True):
                if t == eos_id:
                    finished.append((normalised(score, beams.size(1)), beams[o, 1:].tolist() + [eos_id]))
                else:
                    keep.append((score, o, t))
            if len(finished) >= beam_width or not keep:
                break
            index = torch.tensor([o for _, o, _ in keep], device=src.device)
            stepper.reorder(index)
            beams = torch.cat([beams[index], torch.tensor([[t] for *_, t in keep], device=src.device)], dim=1)
            scores = torch.tensor([s for s, _, _ in keep], device=src.device)
        if not finished:  # max_len reached: rank the live prefixes instead
            finished = [
                (normalised(s, beams.size(1) - 1), b[1:].tolist()) for s, b in zip(scores.tolist(), beams, strict=True)
            ]
        results.append(max(finished, key=lambda f: f[0])[1])
    return results


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
    max_len = max_len if max_len is not None else max(len(t) for _, t in pairs) + 1
    device = next(model.parameters()).device
    correct = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        src = make_batch(chunk, vocab).src.to(device)
        out = greedy_decode(model, src, max_len, vocab.bos_id, vocab.eos_id)
        correct += sum(vocab.decode(ids) == target for ids, (_, target) in zip(out, chunk, strict=True))
    return correct / len(pairs)
