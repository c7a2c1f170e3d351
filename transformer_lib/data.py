"""Data for the course's tasks: a character vocabulary, the copy and reverse tasks, date translation, and
padded batches that carry their masks.

Every task draws its training batch for step ``s`` from a generator seeded by ``(seed, s)``, so a run resumed
from a checkpoint at step ``s`` sees exactly the batches the uninterrupted run would have seen.
"""

import datetime
import itertools
import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .masks import causal_mask, padding_mask

__all__ = ["Vocab", "Batch", "make_batch", "Seq2SeqTask", "CopyTask", "DateTask", "DATE_FORMATS", "StringProgramTask"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"


class Vocab:
    """Characters <-> ids, with ``<pad>=0``, ``<bos>=1``, ``<eos>=2``, ``<unk>=3`` first."""

    def __init__(self, characters: str):
        self.itos = [PAD, BOS, EOS, UNK] + sorted(set(characters))
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.stoi.get(ch, self.unk_id) for ch in text]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Ids -> text, stopping at the first ``<eos>`` and skipping ``<pad>`` and ``<bos>``."""
        out = []
        for i in ids.tolist() if isinstance(ids, torch.Tensor) else ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return "".join(out)


@dataclass
class Batch:
    """A padded batch of source/target pairs and its masks (bool, True = may attend).

    ``tgt_in`` is ``<bos> + target`` (what the decoder reads), ``tgt_out`` is ``target + <eos>`` (what it must
    predict): "teacher forcing", one position to the right.
    """

    src: torch.Tensor  # (B, S) ids
    tgt_in: torch.Tensor  # (B, T) ids
    tgt_out: torch.Tensor  # (B, T) ids
    src_mask: torch.Tensor  # (B, 1, 1, S)
    tgt_mask: torch.Tensor  # (B, 1, T, T): causal and padding

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(*(t.to(device) for t in (self.src, self.tgt_in, self.tgt_out, self.src_mask, self.tgt_mask)))

    @property
    def num_target_tokens(self) -> int:
        return int((self.tgt_out != 0).sum())


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(pairs: Sequence[tuple[str, str]], vocab: Vocab) -> Batch:
    """(source text, target text) pairs -> a :class:`Batch`, padded to the longest of each side."""
    if not pairs:
        raise ValueError("make_batch needs at least one (source, target) pair")
    src = _pad([vocab.encode(s) for s, _ in pairs], vocab.pad_id)  # (B, S)
    tgt = _pad([vocab.encode(t, bos=True, eos=True) for _, t in pairs], vocab.pad_id)  # (B, T + 1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T) each
    src_mask = padding_mask(src, vocab.pad_id)  # (B, 1, 1, S)
    tgt_mask = padding_mask(tgt_in, vocab.pad_id) & causal_mask(tgt_in.size(1))  # (B, 1, T, T)
    return Batch(src, tgt_in, tgt_out, src_mask, tgt_mask)


class Seq2SeqTask:
    """A task is a vocabulary, a way to draw one training pair, and a fixed held-out test set."""

    vocab: Vocab
    seed: int
    test_pairs: list[tuple[str, str]]

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        raise NotImplementedError

    def train_pairs(self, step: int, batch_size: int) -> list[tuple[str, str]]:
        """The training pairs of step ``step``: the same for the same ``(seed, step)`` on every machine."""
        rng = random.Random(f"{self.seed}/train/{step}")
        return [self.sample_pair(rng) for _ in range(batch_size)]

    def train_batch(self, step: int, batch_size: int) -> Batch:
        return make_batch(self.train_pairs(step, batch_size), self.vocab)

    @property
    def max_target_length(self) -> int:
        """Longest target in the test set, plus ``<eos>``: a bound for decoding."""
        return max(len(t) for _, t in self.test_pairs) + 1


class CopyTask(Seq2SeqTask):
    """Copy (or, with ``reverse=True``, reverse) a random string: the sanity check that a model can learn."""

    def __init__(
        self,
        num_test: int = 500,
        min_len: int = 3,
        max_len: int = 10,
        alphabet: str = "abcdefghij",
        reverse: bool = False,
        seed: int = 0,
    ):
        if not 1 <= min_len <= max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        self.min_len, self.max_len, self.alphabet, self.reverse, self.seed = min_len, max_len, alphabet, reverse, seed
        self.vocab = Vocab(alphabet)
        rng = random.Random(f"{seed}/test")
        self.test_pairs = [self.sample_pair(rng) for _ in range(num_test)]

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        text = "".join(rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len)))
        return text, text[::-1] if self.reverse else text


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def _month(d: datetime.date) -> str:
    return _MONTHS[d.month - 1]


def _weekday(d: datetime.date) -> str:
    return _DAYS[d.weekday()]


# Each format writes a date one way that a person would. Two-digit years mean 1950-2049.
DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "weekday, d month yyyy": lambda d: f"{_weekday(d)}, {d.day} {_month(d)} {d.year}",
    "dd/mm/yy": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year % 100:02d}",
    "d MON yyyy": lambda d: f"{d.day} {_month(d)[:3].upper()} {d.year}",
    "month dth, yyyy": lambda d: f"{_month(d)} {_ordinal(d.day)}, {d.year}",
    "d month yyyy": lambda d: f"{d.day} {_month(d)} {d.year}",
    "Mon d, yyyy": lambda d: f"{_month(d)[:3].capitalize()} {d.day}, {d.year}",
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "the dth of month yyyy": lambda d: f"the {_ordinal(d.day)} of {_month(d)} {d.year}",
    "Wkd Mon d yyyy": lambda d: f"{_weekday(d)[:3].capitalize()} {_month(d)[:3].capitalize()} {d.day} {d.year}",
    "dd-MON-yy": lambda d: f"{d.day:02d}-{_month(d)[:3].upper()}-{d.year % 100:02d}",
    "month d yyyy": lambda d: f"{_month(d)} {d.day} {d.year}",
    "yyyy, month d": lambda d: f"{d.year}, {_month(d)} {d.day}",
}


class DateTask(Seq2SeqTask):
    """Translate dates written in one of :data:`DATE_FORMATS` to ISO ``yyyy-mm-dd``.

    The calendar days from ``first_year`` to ``last_year`` are shuffled once; the first ``num_test`` days are
    held out. Training pairs are drawn from the other days only, so no held-out date appears in training in
    *any* format: a model that scores on the test set has learned to translate, not remembered.
    """

    def __init__(self, num_test: int = 1000, first_year: int = 1950, last_year: int = 2049, seed: int = 0):
        start, end = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
        days = [start + datetime.timedelta(n) for n in range((end - start).days + 1)]
        random.Random(f"{seed}/split").shuffle(days)
        if not 0 < num_test < len(days):
            raise ValueError(f"num_test must be between 1 and {len(days) - 1}, got {num_test}")
        self.test_dates, self.train_dates = days[:num_test], days[num_test:]
        self.formats = list(DATE_FORMATS.values())
        self.seed = seed
        one_year = [datetime.date(2000, 1, 1) + datetime.timedelta(n) for n in range(366)]  # every month and weekday
        alphabet = "".join(f(d) for f in self.formats for d in one_year) + "0123456789-"
        self.vocab = Vocab(alphabet)
        rng = random.Random(f"{seed}/test")
        self.test_pairs = [(rng.choice(self.formats)(d), d.isoformat()) for d in self.test_dates]

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        day = rng.choice(self.train_dates)
        return rng.choice(self.formats)(day), day.isoformat()


class StringProgramTask(Seq2SeqTask):
    """Run a short program of string operations on a string: ``"rn:cabd"`` -> reverse, then next letter ->
    ``"ecbd"``. Harder than dates (every output character depends on the whole program and on other
    positions), so small models differ in how far a fixed budget of steps takes them (notebook 10).

    Operations (applied left to right): ``r`` reverse, ``s`` sort, ``l`` rotate left by one, ``n`` each letter
    to the next one (cyclic in ``alphabet``), ``p`` swap neighbouring pairs. Programs have 1 to
    ``max_ops`` operations; strings have ``min_len`` to ``max_len`` letters.

    Two splits are held out by construction, never drawn in training:

    - ``test_pairs`` (the dev set): strings whose CRC-32 is divisible by 10 are reserved for it, with any
      program that training also uses;
    - ``generalisation_pairs``: a fixed set of ``num_gen_programs`` programs of ``max_ops`` operations that
      training never runs, applied to reserved strings: new *compositions* of operations seen in training.
    """

    OPERATIONS = "rslnp"

    def __init__(
        self,
        num_test: int = 500,
        num_gen: int = 500,
        min_len: int = 4,
        max_len: int = 8,
        max_ops: int = 3,
        num_gen_programs: int = 12,
        alphabet: str = "abcdefgh",
        seed: int = 0,
    ):
        if not 1 <= min_len <= max_len:
            raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        if max_ops < 1:
            raise ValueError(f"max_ops must be >= 1, got {max_ops}")
        if len(set(alphabet)) != len(alphabet) or not alphabet.isalpha() or not alphabet.islower():
            raise ValueError(f"alphabet must be distinct lower-case letters, got {alphabet!r}")
        longest = ["".join(p) for p in itertools.product(self.OPERATIONS, repeat=max_ops)]
        if not 0 <= num_gen_programs < len(longest):
            raise ValueError(f"num_gen_programs must be between 0 and {len(longest) - 1}, got {num_gen_programs}")
        self.min_len, self.max_len, self.alphabet, self.seed = min_len, max_len, alphabet, seed
        random.Random(f"{seed}/programs").shuffle(longest)
        self.gen_programs = sorted(longest[:num_gen_programs])
        held_out = set(self.gen_programs)
        self.train_programs = [
            "".join(p)
            for n in range(1, max_ops + 1)
            for p in itertools.product(self.OPERATIONS, repeat=n)
            if "".join(p) not in held_out
        ]
        self.vocab = Vocab(self.OPERATIONS + alphabet + ":")
        rng = random.Random(f"{seed}/test")
        self.test_pairs = [self._pair(rng.choice(self.train_programs), self._string(rng, reserved=True))
                           for _ in range(num_test)]
        rng = random.Random(f"{seed}/generalisation")
        self.generalisation_pairs = (
            [self._pair(rng.choice(self.gen_programs), self._string(rng, reserved=True)) for _ in range(num_gen)]
            if self.gen_programs else []
        )

    @staticmethod
    def is_reserved(text: str) -> bool:
        """True for the strings kept for evaluation (about one in ten): training never draws them."""
        return zlib.crc32(text.encode()) % 10 == 0

    def run(self, program: str, text: str) -> str:
        """The program's output: each operation applied in turn, left to right."""
        for op in program:
            if op == "r":
                text = text[::-1]
            elif op == "s":
                text = "".join(sorted(text))
            elif op == "l":
                text = text[1:] + text[:1]
            elif op == "n":
                text = "".join(self.alphabet[(self.alphabet.index(ch) + 1) % len(self.alphabet)] for ch in text)
            elif op == "p":
                text = "".join(text[i : i + 2][::-1] for i in range(0, len(text), 2))
            else:
                raise ValueError(f"unknown operation {op!r}; expected one of {self.OPERATIONS!r}")
        return text

    def _string(self, rng: random.Random, reserved: bool) -> str:
        while True:
            text = "".join(rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len)))
            if self.is_reserved(text) == reserved:
                return text

    def _pair(self, program: str, text: str) -> tuple[str, str]:
        return f"{program}:{text}", self.run(program, text)

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        return self._pair(rng.choice(self.train_programs), self._string(rng, reserved=False))
