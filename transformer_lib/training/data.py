"""Data for the course's tasks: a character vocabulary, the copy and reverse tasks, date
translation, and padded batches that carry their masks.

Every task draws its training batch for step ``s`` from a generator seeded by ``(seed, s)``, so a
run resumed from a checkpoint at step ``s`` sees exactly the batches the uninterrupted run would
have seen.
"""

import datetime
import gzip
import hashlib
import io
import itertools
import random
import tarfile
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .._arguments import (
    check_non_negative_ints,
    check_positive_ints,
    check_text_pairs,
    check_token_id,
    is_int,
)
from .._package_data import package_data
from ..model.masks import causal_mask, padding_mask

__all__ = [
    "Vocab",
    "Batch",
    "make_batch",
    "Seq2SeqTask",
    "CopyTask",
    "DateTask",
    "DATE_FORMATS",
    "StringProgramTask",
    "PythonSourceCorpus",
    "PYTHON_SOURCE_FILE",
    "PYTHON_SOURCE_SHA256",
    "shipped_python_source_path",
    "read_python_source",
]

PAD, BOS, EOS, UNK, MASK = "<pad>", "<bos>", "<eos>", "<unk>", "<mask>"


class Vocab:
    """Characters <-> ids. The special tokens ``<pad>``, ``<bos>``, ``<eos>``, ``<unk>`` come first
    (ids 0-3) unless ``pad_id`` puts ``<pad>`` elsewhere; the model's ``TransformerConfig.pad_id``
    must equal ``vocab.pad_id``. ``extra_specials`` (e.g. ``<mask>`` for a masked language model)
    follow them, then the characters, sorted."""

    def __init__(self, characters: str, pad_id: int = 0, extra_specials: Sequence[str] = ()):
        specials = {PAD, BOS, EOS, UNK, *extra_specials}
        others = [BOS, EOS, UNK, *extra_specials] + sorted(set(characters) - specials)
        check_token_id("pad_id", pad_id, len(others) + 1)
        self.itos = others[:pad_id] + [PAD] + others[pad_id:]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (
            self.stoi[s] for s in (PAD, BOS, EOS, UNK)
        )

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.stoi.get(ch, self.unk_id) for ch in text]
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """One sequence of ids -> text, stopping at the first ``<eos>`` and skipping ``<pad>`` and
        ``<bos>``.

        For a batch ``(B, T)`` decode each row: ``[vocab.decode(row) for row in ids]``.
        """
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    "Vocab.decode takes one sequence (T,), got a tensor of shape "
                    f"{tuple(ids.shape)}; decode a batch row by row: [vocab.decode(row) for row in "
                    "ids]"
                )
            ids = ids.tolist()
        out = []
        for i in ids:
            if not is_int(i):  # NumPy integers are ids too
                raise TypeError(f"Vocab.decode takes a sequence of int ids, got an element {i!r}")
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return "".join(out)


@dataclass
class Batch:
    """A padded batch of source/target pairs and its masks (bool, True = may attend).

    ``tgt_in`` is ``<bos> + target`` (what the decoder reads), ``tgt_out`` is ``target + <eos>``
    (what it must predict): "teacher forcing", one position to the right.
    """

    src: torch.Tensor  # (B, S) ids
    tgt_in: torch.Tensor  # (B, T) ids
    tgt_out: torch.Tensor  # (B, T) ids
    src_mask: torch.Tensor  # (B, 1, 1, S)
    tgt_mask: torch.Tensor  # (B, 1, T, T): causal and padding
    pad_id: int  # the vocabulary's <pad>, the filler of all three id tensors

    def to(self, device: torch.device | str) -> "Batch":
        tensors = (
            t.to(device)
            for t in (self.src, self.tgt_in, self.tgt_out, self.src_mask, self.tgt_mask)
        )
        return Batch(*tensors, pad_id=self.pad_id)

    @property
    def num_target_tokens(self) -> int:
        """Target tokens the loss counts: every position of ``tgt_out`` that is not padding."""
        return int((self.tgt_out != self.pad_id).sum())


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], dtype=torch.long)


def make_batch(pairs: Sequence[tuple[str, str]], vocab: Vocab) -> Batch:
    """(source text, target text) pairs -> a :class:`Batch`, padded to the longest of each side."""
    if not pairs:
        raise ValueError("make_batch needs at least one (source, target) pair")
    check_text_pairs("make_batch", pairs)
    src = _pad([vocab.encode(s) for s, _ in pairs], vocab.pad_id)  # (B, S)
    tgt = _pad([vocab.encode(t, bos=True, eos=True) for _, t in pairs], vocab.pad_id)  # (B, T + 1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T) each
    src_mask = padding_mask(src, vocab.pad_id)  # (B, 1, 1, S)
    tgt_mask = padding_mask(tgt_in, vocab.pad_id) & causal_mask(tgt_in.size(1))  # (B, 1, T, T)
    return Batch(src, tgt_in, tgt_out, src_mask, tgt_mask, pad_id=vocab.pad_id)


class Seq2SeqTask(ABC):
    """A task is a vocabulary, a way to draw one training pair, and two fixed held-out splits.

    ``valid_pairs`` is what a recipe is tuned on (learning rate, steps, label smoothing...);
    ``test_pairs`` is read once, at the end, to report the result. Both are disjoint from training
    *by construction*: no held-out source can ever be drawn as a training pair, so a score on them
    measures generalisation.
    """

    vocab: Vocab
    seed: int
    valid_pairs: list[tuple[str, str]]
    test_pairs: list[tuple[str, str]]

    @abstractmethod
    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        """One training pair drawn with ``rng``; never a held-out one."""

    def train_pairs(self, step: int, batch_size: int) -> list[tuple[str, str]]:
        """The training pairs of step ``step``: the same for the same ``(seed, step)`` on every
        machine."""
        rng = random.Random(f"{self.seed}/train/{step}")
        return [self.sample_pair(rng) for _ in range(batch_size)]

    def train_batch(self, step: int, batch_size: int) -> Batch:
        return make_batch(self.train_pairs(step, batch_size), self.vocab)


def _check_split_size(name: str, value: int, minimum: int) -> None:
    (check_positive_ints if minimum else check_non_negative_ints)(**{name: value})


class CopyTask(Seq2SeqTask):
    """Copy (or, with ``reverse=True``, reverse) a random string: the sanity check that a model can
    learn.

    ``num_test`` and ``num_valid`` distinct strings are drawn first and held out; training draws
    every other string of ``min_len`` to ``max_len`` letters and redraws any held-out one, so no
    test or validation string is ever trained on (which leaves the short strings, of which there are
    few, slightly rarer in training).
    """

    def __init__(
        self,
        num_test: int = 500,
        min_len: int = 3,
        max_len: int = 10,
        alphabet: str = "abcdefghij",
        reverse: bool = False,
        seed: int = 0,
        num_valid: int = 500,
        pad_id: int = 0,
    ):
        if not alphabet:
            raise ValueError("alphabet must hold at least one character, got an empty string")
        if not 1 <= min_len <= max_len:
            raise ValueError(
                f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
            )
        _check_split_size("num_test", num_test, 1)
        _check_split_size("num_valid", num_valid, 0)
        self.min_len, self.max_len, self.reverse, self.seed = min_len, max_len, reverse, seed
        self.alphabet = "".join(sorted(set(alphabet)))
        num_strings = sum(len(self.alphabet) ** n for n in range(min_len, max_len + 1))
        if 2 * (num_test + num_valid) > num_strings:
            raise ValueError(
                f"num_test + num_valid = {num_test + num_valid} is more than half of the "
                f"{num_strings} possible strings of {min_len}-{max_len} letters from "
                f"{self.alphabet!r}: too little would be left to train on"
            )
        self.vocab = Vocab(self.alphabet, pad_id=pad_id)
        rng = random.Random(f"{seed}/held-out")
        held_out: dict[str, None] = {}  # insertion-ordered set
        while len(held_out) < num_test + num_valid:
            held_out[self._random_string(rng)] = None
        strings = list(held_out)
        self.held_out = frozenset(strings)
        self.test_pairs = [self._pair(s) for s in strings[:num_test]]
        self.valid_pairs = [self._pair(s) for s in strings[num_test:]]

    def _random_string(self, rng: random.Random) -> str:
        return "".join(
            rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len))
        )

    def _pair(self, text: str) -> tuple[str, str]:
        return text, text[::-1] if self.reverse else text

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        text = self._random_string(rng)
        while text in self.held_out:
            text = self._random_string(rng)
        return self._pair(text)


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
    "Wkd Mon d yyyy": lambda d: (
        f"{_weekday(d)[:3].capitalize()} {_month(d)[:3].capitalize()} {d.day} {d.year}"
    ),
    "dd-MON-yy": lambda d: f"{d.day:02d}-{_month(d)[:3].upper()}-{d.year % 100:02d}",
    "month d yyyy": lambda d: f"{_month(d)} {d.day} {d.year}",
    "yyyy, month d": lambda d: f"{d.year}, {_month(d)} {d.day}",
}


class DateTask(Seq2SeqTask):
    """Translate dates written in one of :data:`DATE_FORMATS` to ISO ``yyyy-mm-dd``.

    The calendar days from ``first_year`` to ``last_year`` are shuffled once; the first ``num_test``
    days are the test split, the next ``num_valid`` the validation split. Training pairs are drawn
    from the other days only, so no held-out date appears in training in *any* format: a model that
    scores on the test set has learned to translate, not remembered.
    """

    def __init__(
        self,
        num_test: int = 1000,
        first_year: int = 1950,
        last_year: int = 2049,
        seed: int = 0,
        num_valid: int = 500,
        pad_id: int = 0,
    ):
        if not datetime.MINYEAR <= first_year <= last_year <= datetime.MAXYEAR:
            raise ValueError(
                f"need {datetime.MINYEAR} <= first_year <= last_year <= {datetime.MAXYEAR}, "
                f"got first_year={first_year}, last_year={last_year}"
            )
        _check_split_size("num_test", num_test, 1)
        _check_split_size("num_valid", num_valid, 0)
        start, end = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
        days = [start + datetime.timedelta(n) for n in range((end - start).days + 1)]
        random.Random(f"{seed}/split").shuffle(days)
        if num_test + num_valid >= len(days):
            raise ValueError(
                f"num_test + num_valid must be below the {len(days)} days of "
                f"{first_year}-{last_year}, got num_test={num_test}, num_valid={num_valid}"
            )
        held_out = num_test + num_valid
        self.test_dates, self.valid_dates, self.train_dates = (
            days[:num_test],
            days[num_test:held_out],
            days[held_out:],
        )
        self.formats = list(DATE_FORMATS.values())
        self.seed = seed
        # every month and weekday
        one_year = [datetime.date(2000, 1, 1) + datetime.timedelta(n) for n in range(366)]
        alphabet = "".join(f(d) for f in self.formats for d in one_year) + "0123456789-"
        self.vocab = Vocab(alphabet, pad_id=pad_id)
        rng = random.Random(f"{seed}/test")
        self.test_pairs = [(rng.choice(self.formats)(d), d.isoformat()) for d in self.test_dates]
        rng = random.Random(f"{seed}/valid")
        self.valid_pairs = [(rng.choice(self.formats)(d), d.isoformat()) for d in self.valid_dates]

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        day = rng.choice(self.train_dates)
        return rng.choice(self.formats)(day), day.isoformat()


class StringProgramTask(Seq2SeqTask):
    """Run a short program of string operations on a string: ``"rn:cabd"`` -> reverse, then next
    letter -> ``"ecbd"``. Harder than dates (every output character depends on the whole program and
    on other positions), so small models differ in how far a fixed budget of steps takes them
    (notebook 10).

    Operations (applied left to right): ``r`` reverse, ``s`` sort, ``l`` rotate left by one, ``n``
    each letter to the next one (cyclic in ``alphabet``), ``p`` swap neighbouring pairs. Programs
    have 1 to ``max_ops`` operations; strings have ``min_len`` to ``max_len`` letters.

    Three splits are held out by construction: each string belongs to one split by its CRC-32
    (remainder 0 of 10: validation, 1: test, 2: generalisation), and training redraws any string
    with those remainders.

    - ``valid_pairs`` (the dev set that notebook 10 scores) and ``test_pairs``: unseen strings under
      programs that training also runs;
    - ``generalisation_pairs``: unseen strings under ``num_gen_programs`` programs of ``max_ops``
      operations that compute functions no training program computes: new *compositions* of the
      operations it has seen, not new spellings of a function it was taught (``srr``, sort then
      reverse twice, is ``s``).

    Whether two programs compute the same function is decided on :attr:`PROBES` strings, the same
    for every seed (drawn from ``random.Random("probes")`` over all lengths): two programs that
    differ on a probe are certainly different functions; two that agree on every probe are treated
    as one function. A wrong merge could only hold out more programs, never let a training program
    compute a held-out function. (A canonical form would need a rewrite rule for every way two
    operations interact, e.g. sort and next letter commute except when a letter wraps round;
    probing is simpler and exact in the direction that matters. With the default settings, 50
    probes already find the same 65 functions among the 155 programs as 3,000 do.) A program is
    held out together with every other spelling of its function, and only when no program with
    fewer operations computes that function.
    """

    OPERATIONS = "rslnp"
    PROBES = 64
    _SPLITS = {"valid": 0, "test": 1, "generalisation": 2}

    def __init__(
        self,
        num_test: int = 500,
        num_valid: int = 500,
        num_gen: int = 500,
        min_len: int = 4,
        max_len: int = 8,
        max_ops: int = 3,
        num_gen_programs: int = 12,
        alphabet: str = "abcdefgh",
        seed: int = 0,
        pad_id: int = 0,
    ):
        if not 1 <= min_len <= max_len:
            raise ValueError(
                f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
            )
        check_positive_ints(max_ops=max_ops)
        if (
            not alphabet
            or len(set(alphabet)) != len(alphabet)
            or not (alphabet.isalpha() and alphabet.islower())
        ):
            raise ValueError(f"alphabet must be distinct lower-case letters, got {alphabet!r}")
        _check_split_size("num_test", num_test, 1)
        _check_split_size("num_valid", num_valid, 0)
        _check_split_size("num_gen", num_gen, 0)
        self.min_len, self.max_len, self.alphabet, self.seed = min_len, max_len, alphabet, seed
        programs = [
            "".join(p)
            for n in range(1, max_ops + 1)
            for p in itertools.product(self.OPERATIONS, repeat=n)
        ]
        held_out = self._programs_to_hold_out(programs, max_ops, num_gen_programs)
        self.gen_programs = sorted(held_out)
        self.train_programs = [p for p in programs if p not in held_out]
        self.vocab = Vocab(self.OPERATIONS + alphabet + ":", pad_id=pad_id)
        self.valid_pairs = self._held_out("valid", self.train_programs, num_valid)
        self.test_pairs = self._held_out("test", self.train_programs, num_test)
        self.generalisation_pairs = self._held_out(
            "generalisation", self.gen_programs, num_gen if held_out else 0
        )

    def _programs_to_hold_out(
        self, programs: list[str], max_ops: int, num_gen_programs: int
    ) -> list[str]:
        """``num_gen_programs`` programs of ``max_ops`` operations, whole functions at a time (every
        spelling of a function together), chosen in an order seeded by :attr:`seed` among the
        functions that no shorter program computes."""
        function_of = self.functions(programs)
        shorter = {function_of[p] for p in programs if len(p) < max_ops}
        spellings: dict[tuple[str, ...], list[str]] = {}  # a new function -> its programs
        for program in programs:
            if len(program) == max_ops and function_of[program] not in shorter:
                spellings.setdefault(function_of[program], []).append(program)
        eligible = min(sum(map(len, spellings.values())), len(programs) - 1)
        if not 0 <= num_gen_programs <= eligible:
            raise ValueError(
                f"num_gen_programs must be between 0 and {eligible} (the programs of {max_ops} "
                f"operations whose function no shorter program computes), got {num_gen_programs}"
            )
        longest = [p for p in programs if len(p) == max_ops]
        random.Random(f"{self.seed}/programs").shuffle(longest)
        held_out: list[str] = []
        for program in longest:  # whole functions, in a seeded order, until the count is reached
            new = spellings.get(function_of[program], [])
            if program not in held_out and len(held_out) + len(new) <= num_gen_programs:
                held_out += new
        if len(held_out) != num_gen_programs:
            raise ValueError(
                f"cannot hold out exactly num_gen_programs={num_gen_programs} programs with every "
                f"spelling of their functions (got {len(held_out)}); choose another count"
            )
        return held_out

    @classmethod
    def split_of(cls, text: str) -> str:
        """Which split a string belongs to: ``"valid"``, ``"test"``, ``"generalisation"`` or
        ``"train"``."""
        remainder = zlib.crc32(text.encode()) % 10
        return next((name for name, r in cls._SPLITS.items() if r == remainder), "train")

    def functions(self, programs: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Each program's function, as its outputs on the :attr:`PROBES` probe strings: two
        programs with different tuples certainly compute different functions."""
        rng = random.Random("probes")  # one fixed set: the split must not depend on the seed's luck
        probes = [self._random_string(rng) for _ in range(self.PROBES)]
        return {program: tuple(self.run(program, text) for text in probes) for program in programs}

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
                text = "".join(
                    self.alphabet[(self.alphabet.index(ch) + 1) % len(self.alphabet)] for ch in text
                )
            elif op == "p":
                text = "".join(text[i : i + 2][::-1] for i in range(0, len(text), 2))
            else:
                raise ValueError(f"unknown operation {op!r}; expected one of {self.OPERATIONS!r}")
        return text

    def _random_string(self, rng: random.Random) -> str:
        return "".join(
            rng.choice(self.alphabet) for _ in range(rng.randint(self.min_len, self.max_len))
        )

    def _string(self, rng: random.Random, split: str) -> str:
        while True:
            text = self._random_string(rng)
            if self.split_of(text) == split:
                return text

    def _pair(self, program: str, text: str) -> tuple[str, str]:
        return f"{program}:{text}", self.run(program, text)

    def _held_out(self, split: str, programs: list[str], count: int) -> list[tuple[str, str]]:
        rng = random.Random(f"{self.seed}/{split}")
        return [self._pair(rng.choice(programs), self._string(rng, split)) for _ in range(count)]

    def sample_pair(self, rng: random.Random) -> tuple[str, str]:
        return self._pair(rng.choice(self.train_programs), self._string(rng, "train"))


# The Python source notebook 11 trains on: a fixed snapshot of CPython 3.11.7's top-level
# standard-library files, shipped in data_files/python_stdlib/ (its README says how it was made).
PYTHON_SOURCE_VERSION = "3.11.7"
PYTHON_SOURCE_FILE = f"python_stdlib_{PYTHON_SOURCE_VERSION}.tar.gz"
PYTHON_SOURCE_ATTRIBUTION = (
    f"CPython {PYTHON_SOURCE_VERSION}'s standard library, Copyright (c) 2001-2023 Python Software "
    "Foundation; All Rights Reserved; PSF License Version 2"
)
# the SHA-256 of the uncompressed tar file
PYTHON_SOURCE_SHA256 = "ff8f02a2005df922b31a62a08f88d0049062b2b97b711cc4435e406d8740e68e"


def shipped_python_source_path() -> Path:
    """Where the package keeps the Python source snapshot (inside the installed package: no
    network needed)."""
    return package_data("python_stdlib", PYTHON_SOURCE_FILE)


def read_python_source() -> dict[str, str]:
    """The shipped snapshot's files as ``{name: text}``, in name order, checked against
    :data:`PYTHON_SOURCE_SHA256` so that a damaged or edited copy is reported instead of silently
    changing the corpus."""
    path = shipped_python_source_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"no Python source snapshot at {path} (the package data is missing: reinstall "
            "transformer_lib, or run tools/make_python_stdlib_snapshot.py)"
        )
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(
            f"{path} is not a readable gzip file: {type(exc).__name__}: {exc}"
        ) from None
    if hashlib.sha256(raw).hexdigest() != PYTHON_SOURCE_SHA256:
        raise ValueError(
            f"{path} does not hold the shipped Python source (its tar file's SHA-256 is "
            f"{hashlib.sha256(raw).hexdigest()}, expected {PYTHON_SOURCE_SHA256}): restore it, "
            "or remake it with tools/make_python_stdlib_snapshot.py"
        )
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        members = sorted(tar.getmembers(), key=lambda member: member.name)
        return {m.name: tar.extractfile(m).read().decode("utf-8") for m in members}


class PythonSourceCorpus:
    """Real text, shipped with the package: the source files of Python's standard library.

    The ``*.py`` files at the top of CPython 3.11.7's standard library, a snapshot in
    ``data_files/python_stdlib/`` (PSF licence; see its README), are read as characters and split
    into train, validation and test **by file**, never by line: the model is never scored on the
    rest of a file it trained on (different files may still hold similar code, which a split by
    file cannot rule out). Which split a file falls in depends only on its name (a hash), and the
    snapshot is the same whatever Python runs it, so the corpus is the same on every machine.
    ``root=`` a folder reads that folder's top-level ``*.py`` files instead (your own code, say).

    The vocabulary is the characters seen at least ``min_count`` times in the training files, plus
    ``<mask>`` for the masked language model; rarer characters (a few accented letters, symbols)
    become ``<unk>``. Characters keep the vocabulary tiny and every string encodable; subword
    tokenization (BPE, as GPT-2 uses) would make each token carry more text, so a context of ``T``
    tokens would reach further back.

    Attributes: ``source`` (the snapshot file or the folder read), ``files`` (split -> the names
    of its files, in name order), ``text`` (split -> its files' text, joined by newlines),
    ``vocab`` and ``mask_id``.
    """

    SPLITS = ("train", "valid", "test")

    def __init__(
        self,
        root: str | Path | None = None,
        fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
        min_count: int = 20,
        min_chars: int = 100_000,
        seed: int = 0,
    ):
        if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-9:
            raise ValueError(
                f"fractions must be three positive numbers summing to 1, got {fractions}"
            )
        if root is None:
            self.source = shipped_python_source_path()
            sources = read_python_source()
        else:
            self.source = Path(root)
            if not self.source.is_dir():
                raise FileNotFoundError(
                    f"no folder at {self.source}; pass root= a folder of .py files, or leave it "
                    "out for the shipped Python source"
                )
            sources = {
                path.name: path.read_text(encoding="utf-8", errors="replace")
                for path in sorted(self.source.glob("*.py"))
            }
        self.seed = seed
        self.files: dict[str, list[str]] = {name: [] for name in self.SPLITS}
        for name in sorted(sources):
            self.files[self._split_of(name, fractions)].append(name)
        self.text = {
            split: "\n".join(sources[name] for name in names) for split, names in self.files.items()
        }
        for name in self.SPLITS:
            if len(self.text[name]) < min_chars * fractions[self.SPLITS.index(name)]:
                raise ValueError(
                    f"{self.source} holds too little Python source: the {name} split has "
                    f"{len(self.files[name])} files and {len(self.text[name]):,} characters; "
                    f"{len(sources)} .py files were found, and the corpus needs at least "
                    f"{min_chars:,} characters in all"
                )
        counts: dict[str, int] = {}
        for ch in self.text["train"]:
            counts[ch] = counts.get(ch, 0) + 1
        self.vocab = Vocab(
            "".join(ch for ch, n in counts.items() if n >= min_count), extra_specials=(MASK,)
        )
        self.mask_id = self.vocab.stoi[MASK]
        self._ids: dict[str, torch.Tensor] = {}

    @staticmethod
    def _split_of(name: str, fractions: tuple[float, float, float]) -> str:
        """The split of file ``name``: a hash of the name read as a number in [0, 1)."""
        u = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) / 16**8
        return (
            "train" if u < fractions[0] else "valid" if u < fractions[0] + fractions[1] else "test"
        )

    def ids(self, split: str) -> torch.Tensor:
        """The whole split as one ``(N,)`` tensor of character ids (computed once)."""
        if split not in self.SPLITS:
            raise ValueError(f"split must be one of {self.SPLITS}, got {split!r}")
        if split not in self._ids:
            self._ids[split] = torch.tensor(self.vocab.encode(self.text[split]), dtype=torch.long)
        return self._ids[split]

    def batch(
        self, split: str, step: int, batch_size: int, length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` windows of ``length + 1`` characters at positions drawn from
        ``(seed, split, step)``.

        Returns ``(inputs (B, T), next_chars (B, T))``: the window without its last character, and
        the same window shifted left by one (the characters a language model must predict).
        """
        data = self.ids(split)
        if not 1 <= length < len(data):
            raise ValueError(
                f"length must be in [1, {len(data) - 1}] for the {split} split, got {length}"
            )
        generator = torch.Generator().manual_seed(
            random.Random(f"{self.seed}/{split}/{step}").getrandbits(62)
        )
        starts = torch.randint(len(data) - length, (batch_size,), generator=generator)  # (B,)
        windows = torch.stack([data[s : s + length + 1] for s in starts.tolist()])  # (B, T + 1)
        return windows[:, :-1], windows[:, 1:]
