"""Batches of sentence pairs of similar length, each within a budget of tokens (paper §5.1).

"Sentence pairs were batched together by approximate sequence length. Each training batch contained
a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens." Real
sentences vary in length: a batch of a fixed number of pairs wastes most of its positions on padding
when a short and a long sentence meet, and its memory varies with its longest pair. Grouping pairs
of similar length and filling each batch up to a *token* budget keeps padding low and every batch
about the same size in memory: many short pairs, or a few long ones.

:class:`LengthBatches` does it for a list of pairs and a vocabulary (a character ``Vocab`` or a
:class:`~transformer_lib.training.subwords.SubwordVocab`) and hands out the library's
:class:`~transformer_lib.training.data.Batch`, made by
:func:`~transformer_lib.training.data.make_batch`, so ``Trainer`` takes them as they are:
``trainer.fit(batches, num_steps)``.
"""

import random
from collections.abc import Iterator, Sequence

from .._arguments import check_non_negative_ints, check_positive_ints, check_text_pairs
from .data import Batch, make_batch

__all__ = ["LengthBatches"]


class LengthBatches:
    """Every pair once per epoch, in batches of similar lengths that hold at most ``max_tokens``
    tokens.

    A batch of ``B`` pairs becomes tensors ``src (B, S)`` and ``tgt_in (B, T)``, ``S`` the longest
    source and ``T`` the longest target plus one (``<bos>``); it *costs* ``B * (S + T)`` tokens,
    padding included, and that is what must stay ``<= max_tokens`` (the paper's budget in these
    terms: NOTATION.md; a CPU wants a few thousand).

    Epoch ``e`` is planned from ``random.Random(f"{seed}/epoch/{e}")``: the pairs are shuffled, then
    sorted (stably) by source and target length, so pairs of equal lengths meet in a new order each
    epoch; batches are filled greedily along that order; then the batches are shuffled, so training
    does not see short sentences first and long ones last. The plan is the same on every machine.

    ``by_length=False`` skips the sort: batches are filled along the shuffled order, within the same
    budget. That is the baseline that shows what sorting saves (compare :meth:`padding_fraction`),
    not a way to train.

    ``batches(step)`` (or calling the object) is the batch of training step ``step``, counting
    across epochs, the form that :meth:`Trainer.fit <transformer_lib.training.train.Trainer.fit>`
    takes: a resumed run sees the same batches as an uninterrupted one. ``epoch(e)`` iterates over
    one epoch's batches.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        vocab,
        max_tokens: int,
        seed: int = 0,
        by_length: bool = True,
    ):
        check_positive_ints(max_tokens=max_tokens)
        if not isinstance(by_length, bool):
            raise TypeError(f"by_length must be True or False, got {by_length!r}")
        if not pairs:
            raise ValueError("LengthBatches needs at least one (source, target) pair")
        check_text_pairs("LengthBatches", pairs)
        self.pairs, self.vocab, self.max_tokens, self.seed = list(pairs), vocab, max_tokens, seed
        self.by_length = by_length
        encode_all = getattr(vocab, "encode_batch", None) or (
            lambda texts: [vocab.encode(t) for t in texts]
        )
        self.src_lengths = [
            len(ids) for ids in encode_all([s for s, _ in self.pairs])
        ]  # S of each pair alone
        self.tgt_lengths = [
            len(ids) + 1 for ids in encode_all([t for _, t in self.pairs])
        ]  # T: + <bos> or <eos>
        too_long = [
            i
            for i in range(len(self.pairs))
            if self.src_lengths[i] + self.tgt_lengths[i] > max_tokens
        ]
        if too_long:
            i = max(too_long, key=lambda j: self.src_lengths[j] + self.tgt_lengths[j])
            raise ValueError(
                f"{len(too_long)} pair(s) do not fit in a batch of max_tokens={max_tokens} even "
                f"alone; the longest, {self.pairs[i]!r}, costs {self.src_lengths[i]} source + "
                f"{self.tgt_lengths[i]} target tokens: raise max_tokens to at least "
                f"{self.src_lengths[i] + self.tgt_lengths[i]} or leave such pairs out"
            )
        self._plans: dict[
            int, list[list[int]]
        ] = {}  # the last epoch planned (recomputed when asked again)
        self._epoch_starts = [0]  # step at which epoch e starts, for the epochs planned so far

    def plan(self, epoch: int) -> list[list[int]]:
        """Epoch ``epoch``'s batches as lists of pair indices, in the order training reads them."""
        check_non_negative_ints(epoch=epoch)
        if epoch in self._plans:
            return self._plans[epoch]
        rng = random.Random(f"{self.seed}/epoch/{epoch}")
        order = list(range(len(self.pairs)))
        rng.shuffle(order)
        if self.by_length:
            # stable: ties keep the shuffle
            order.sort(key=lambda i: (self.src_lengths[i], self.tgt_lengths[i]))
        plan, batch, longest_src, longest_tgt = [], [], 0, 0
        for i in order:
            src, tgt = max(longest_src, self.src_lengths[i]), max(longest_tgt, self.tgt_lengths[i])
            if (
                batch and (len(batch) + 1) * (src + tgt) > self.max_tokens
            ):  # adding pair i would overflow
                plan.append(batch)
                batch, src, tgt = [], self.src_lengths[i], self.tgt_lengths[i]
            batch.append(i)
            longest_src, longest_tgt = src, tgt
        plan.append(batch)
        rng.shuffle(plan)
        self._plans = {epoch: plan}
        return plan

    def num_batches(self, epoch: int = 0) -> int:
        """How many batches epoch ``epoch`` has (it can differ a little from epoch to epoch)."""
        return len(self.plan(epoch))

    def make(self, indices: Sequence[int]) -> Batch:
        """The :class:`~transformer_lib.training.data.Batch` of the pairs at ``indices``."""
        return make_batch([self.pairs[i] for i in indices], self.vocab)

    def epoch(self, epoch: int = 0) -> Iterator[Batch]:
        """Epoch ``epoch``'s batches, one :class:`~transformer_lib.training.data.Batch` at a
        time."""
        for indices in self.plan(epoch):
            yield self.make(indices)

    def locate(self, step: int) -> tuple[int, int]:
        """``(epoch, index of the batch within it)`` of training step ``step`` (steps count from
        0)."""
        check_non_negative_ints(step=step)
        while self._epoch_starts[-1] <= step:  # plan epochs until one ends after this step
            self._epoch_starts.append(
                self._epoch_starts[-1] + self.num_batches(len(self._epoch_starts) - 1)
            )
        epoch = max(e for e, start in enumerate(self._epoch_starts) if start <= step)
        return epoch, step - self._epoch_starts[epoch]

    def batch(self, step: int) -> Batch:
        """The batch of training step ``step``, counting across epochs:
        ``trainer.fit(batches.batch, n)``."""
        epoch, index = self.locate(step)
        return self.make(self.plan(epoch)[index])

    __call__ = batch

    def padding_fraction(self, epoch: int = 0) -> float:
        """The share of an epoch's ``src`` and ``tgt_in`` positions that are padding (computed from
        lengths)."""
        padded = real = 0
        for indices in self.plan(epoch):
            src = max(self.src_lengths[i] for i in indices)
            tgt = max(self.tgt_lengths[i] for i in indices)
            padded += len(indices) * (src + tgt)
            real += sum(self.src_lengths[i] + self.tgt_lengths[i] for i in indices)
        return 1 - real / padded

    def __len__(self) -> int:
        """The number of pairs (every epoch holds each of them once)."""
        return len(self.pairs)

    def __repr__(self) -> str:
        return (
            f"LengthBatches({len(self.pairs):,} pairs, max_tokens={self.max_tokens:,}"
            f"{'' if self.by_length else ', not sorted by length'}: epoch 0 has "
            f"{self.num_batches(0):,} batches, {self.padding_fraction(0):.1%} padding)"
        )
