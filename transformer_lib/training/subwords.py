"""Subword tokens: byte-pair encoding (BPE) by hand, then at scale with Hugging Face ``tokenizers``.

The paper encodes its sentences "using byte-pair encoding [...], which has a shared source-target
vocabulary of about 37000 tokens" (§5.1). BPE (Sennrich, Haddow and Birch, 2016, "Neural Machine
Translation of Rare Words with Subword Units") starts from single characters and repeatedly merges
the most frequent pair of adjacent symbols into a new symbol. Frequent words end up as one token,
rare words as a few pieces, and a word never seen in training is still spelled with known pieces
("lowest" = "low" + "est").

- :func:`learn_bpe` and :func:`segment` are that algorithm in a few lines of Python, for a handful
  of words.
- :class:`SubwordVocab` is the same algorithm, trained by ``tokenizers``' Rust trainer on a whole
  corpus, with the interface of the course's character :class:`~transformer_lib.training.data.Vocab`
  (``encode``, ``decode``, ``pad_id`` ...), so :func:`~transformer_lib.training.data.make_batch`,
  the :class:`~transformer_lib.model.transformer.Transformer` and the decoders work with it
  unchanged. On the same words, :func:`learn_bpe` learns the same merges, in the same order, as the
  Rust trainer (a test checks it).
"""

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

import torch

from .._arguments import check_non_negative_ints, check_positive_ints, check_token_id
from .data import BOS, EOS, PAD, UNK

__all__ = ["Merge", "learn_bpe", "segment", "SubwordVocab", "SPECIAL_TOKENS", "MIN_VOCAB_SIZE"]


# --------------------------------------------------------------------------------------------------
# BPE by hand


@dataclass(frozen=True)
class Merge:
    """One step of BPE: the adjacent symbols ``left`` and ``right`` become the symbol
    ``left + right``; ``count`` is how often the pair occurred (counting each word as many times as
    it appears) when chosen."""

    left: str
    right: str
    count: int

    @property
    def symbol(self) -> str:
        return self.left + self.right


def _merge_word(symbols: tuple[str, ...], left: str, right: str) -> tuple[str, ...]:
    """Replace every ``left, right`` in ``symbols`` by ``left + right``, scanning left to right
    (``a a a`` with the pair ``a a`` becomes ``aa a``)."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn_bpe(words: Iterable[str] | Mapping[str, int], num_merges: int) -> list[Merge]:
    """Learn up to ``num_merges`` BPE merges from ``words`` (a list, where repeats count, or
    ``{word: count}``).

    Each word starts as its characters. Every step counts the adjacent pairs of symbols over all
    words (a word that appears 5 times adds 5), merges the most frequent pair everywhere, and
    records it. Ties go to the pair of *older* symbols: the characters first, in alphabetical (code
    point) order, then merged symbols in the order they were made; the left symbol decides first,
    then the right. That is the rule of Hugging Face's ``BpeTrainer`` too, so both learn the same
    merges. Fewer merges come back when every word is one symbol.

    Words are taken as given: to learn where words start (as :class:`SubwordVocab` does, whose
    pieces carry their leading space), write the marker into the words, e.g. ``"▁low"``.
    """
    check_non_negative_ints(num_merges=num_merges)
    if isinstance(words, str):
        raise TypeError(
            "learn_bpe takes a list of words or a {word: count} dict, got one str; split it: "
            "text.split()"
        )
    counts = dict(words) if isinstance(words, Mapping) else Counter(words)
    for word, count in counts.items():
        if not isinstance(word, str) or not word:
            raise ValueError(f"every word must be a non-empty str, got {word!r}")
        check_positive_ints(**{f"the count of {word!r}": count})
    # older = smaller
    age = {ch: rank for rank, ch in enumerate(sorted({ch for word in counts for ch in word}))}
    # each word as its current symbols
    spelled = {tuple(word): count for word, count in counts.items()}
    merges: list[Merge] = []
    for _ in range(num_merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for symbols, count in spelled.items():
            for pair in pairwise(symbols):  # adjacent symbols
                pairs[pair] += count
        if not pairs:
            break
        # most frequent, then oldest
        left, right = min(pairs, key=lambda p: (-pairs[p], age[p[0]], age[p[1]]))
        merges.append(Merge(left, right, pairs[left, right]))
        age.setdefault(left + right, len(age))
        spelled = {_merge_word(symbols, left, right): count for symbols, count in spelled.items()}
    return merges


def segment(word: str, merges: Sequence[Merge]) -> list[str]:
    """Split ``word`` into BPE pieces: start from its characters and apply ``merges`` in the order
    they were learned, as :func:`learn_bpe` did during training. A word never seen in training is
    spelled with pieces that were: ``segment("lowest", merges)`` may give ``["low", "est"]``."""
    if not isinstance(word, str):
        raise TypeError(f"segment takes one word (a str), got {type(word).__name__}")
    symbols = tuple(word)
    for merge in merges:
        symbols = _merge_word(symbols, merge.left, merge.right)
    return list(symbols)


# --------------------------------------------------------------------------------------------------
# BPE at scale


SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0-3, as in data.Vocab
MIN_VOCAB_SIZE = len(SPECIAL_TOKENS) + 256 + 1  # the specials, the 256 bytes, and one merge or more


def _tokenizers():
    """Import Hugging Face ``tokenizers`` on first use, with a message that says what to install."""
    try:
        import tokenizers
    except ImportError:
        raise ImportError(
            "SubwordVocab needs Hugging Face's tokenizers package: pip install tokenizers==0.23.3 "
            "(the version in requirements.txt)"
        ) from None
    return tokenizers


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """Byte-level BPE writes each byte as a printable character (GPT-2's table: printable bytes
    stand for themselves, the others, space included, are shifted to 256 and up; a space is ``Ġ``);
    this reverses it."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars, shifted = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + shifted)] = b
            shifted += 1
    return chars


class SubwordVocab:
    """A byte-level BPE vocabulary shared by source and target (the paper's shared vocabulary),
    trained with Hugging Face ``tokenizers``, with the interface of
    :class:`~transformer_lib.training.data.Vocab`.

    Ids: ``<pad>=0, <bos>=1, <eos>=2, <unk>=3`` as in ``Vocab``, then the 256 bytes, then the merged
    pieces in the order they were learned. The text is put in Unicode NFC, cut before each word's
    leading space and between letters, digits and punctuation (GPT-2's rule), and each piece's UTF-8
    bytes are merged by BPE. So:

    - every string can be encoded, with no ``<unk>``: a character never seen in training (Chinese,
      an emoji) becomes its bytes;
    - ``decode(encode(s)) == s`` for every NFC string ``s``: spaces are part of the pieces, so
      nothing has to guess where they were. (Text typed with decomposed accents comes back
      composed.)
    - ``<pad>``, ``<bos>`` ... written *in* a sentence are ordinary text, never the special ids.

    Why Hugging Face ``tokenizers`` and not SentencePiece (Kudo and Richardson, 2018), which also
    trains BPE: its pipeline is the one this docstring describes, in separate named parts
    (normaliser, pre-tokeniser, BPE model, decoder) that a notebook can show one at a time; the
    trained vocabulary and its merges are one readable JSON file (SentencePiece writes a protobuf
    ``.model``); byte-level BPE needs no ``<unk>`` and no character coverage setting; its trainer
    learns the same merges as :func:`learn_bpe`; and it is the tokenizer library that students meet
    again in Hugging Face ``transformers``. It installs as a binary wheel on Linux, macOS and
    Windows.

    Make one with :meth:`train` (on the *training* split only) or :meth:`load`; keep it with
    :meth:`save`.
    """

    def __init__(self, tokenizer):
        """Wrap a ``tokenizers.Tokenizer`` whose first four ids are :data:`SPECIAL_TOKENS`; prefer
        :meth:`train` or :meth:`load`."""
        tk = _tokenizers()
        if not isinstance(tokenizer, tk.Tokenizer):
            raise TypeError(
                f"SubwordVocab wraps a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
            )
        if not isinstance(tokenizer.model, tk.models.BPE) or not isinstance(
            tokenizer.decoder, tk.decoders.ByteLevel
        ):
            raise ValueError(
                "SubwordVocab needs a byte-level BPE tokenizer (as SubwordVocab.train makes), got "
                f"a {type(tokenizer.model).__name__} model with decoder "
                f"{type(tokenizer.decoder).__name__}"
            )
        found = [tokenizer.id_to_token(i) for i in range(len(SPECIAL_TOKENS))]
        if found != list(SPECIAL_TOKENS):
            raise ValueError(f"the tokenizer's ids 0-3 must be {list(SPECIAL_TOKENS)}, got {found}")
        # "<eos>" typed in a sentence is text, not the end of it
        tokenizer.encode_special_tokens = True
        self.tokenizer = tokenizer
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(len(SPECIAL_TOKENS))
        self._size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._itos: list[str] | None = None  # every token's text, made on first use

    # -- making, saving, loading

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2
    ) -> "SubwordVocab":
        """Learn a vocabulary of ``vocab_size`` ids (specials and bytes included) from ``texts``:
        give it the source *and* target sentences of the training split, never a held-out one.

        Merges stop early when no pair occurs ``min_frequency`` times, so ``len(vocab)`` may be
        smaller than ``vocab_size`` on a small corpus. The result is the same on every run and
        machine.
        """
        tk = _tokenizers()
        check_positive_ints(vocab_size=vocab_size, min_frequency=min_frequency)
        if vocab_size < MIN_VOCAB_SIZE:  # the wording of _arguments' minimum rule, with its reason
            raise ValueError(
                f"vocab_size must be >= {MIN_VOCAB_SIZE} (4 special tokens, 256 bytes and at least "
                f"one merge), got vocab_size={vocab_size}"
            )
        if isinstance(texts, str):
            raise TypeError(
                "SubwordVocab.train takes a list of sentences, got one str; wrap it: [text]"
            )
        texts = list(texts)
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"SubwordVocab.train takes sentences (str), got an element {bad!r}")
        if not any(texts):
            raise ValueError(
                "SubwordVocab.train needs at least one non-empty sentence to learn from"
            )
        tokenizer = tk.Tokenizer(tk.models.BPE())
        tokenizer.normalizer = tk.normalizers.NFC()
        tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(
            add_prefix_space=False, use_regex=True
        )
        tokenizer.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),  # ids 0-3, in this order
            # all 256 bytes, seen or not: no <unk>
            initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts, trainer)
        return cls(tokenizer)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the whole tokenizer (pipeline, vocabulary, merges) as one JSON file; returns the
        path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.tokenizer.to_str(pretty=True), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SubwordVocab":
        """Read a file written by :meth:`save`."""
        tk = _tokenizers()
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        try:
            tokenizer = tk.Tokenizer.from_str(path.read_text(encoding="utf-8"))
        except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
            raise ValueError(
                f"{path} is not a tokenizers JSON file written by SubwordVocab.save: {exc}"
            ) from None
        return cls(tokenizer)

    # -- the Vocab interface

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return (
            f"SubwordVocab({len(self)} tokens: byte-level BPE, <pad>={self.pad_id} "
            f"<bos>={self.bos_id} <eos>={self.eos_id} <unk>={self.unk_id})"
        )

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        """``text`` -> token ids, with ``<bos>`` in front and ``<eos>`` at the end if asked. ``""``
        -> ``[]``."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}: {text!r}")
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_id] * bos + ids + [self.eos_id] * eos

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """``[encode(t) for t in texts]``, computed in one call (in parallel, in Rust)."""
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None or isinstance(texts, str):
            raise TypeError(
                "encode_batch takes a list of str, got an element "
                f"{bad if bad is not None else texts!r}"
            )
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """One sequence of ids -> text, stopping at the first ``<eos>`` and skipping ``<pad>`` and
        ``<bos>``, as :meth:`Vocab.decode <transformer_lib.training.data.Vocab.decode>` does. Bytes
        that do not form a whole UTF-8 character (a model can emit those) become ``�``.

        For a batch ``(B, T)`` decode each row: ``[vocab.decode(row) for row in ids]``.
        """
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    "SubwordVocab.decode takes one sequence (T,), got a tensor of shape "
                    f"{tuple(ids.shape)}; decode a batch row by row: [vocab.decode(row) for row in "
                    "ids]"
                )
            ids = ids.tolist()
        kept = []
        for i in ids:
            check_token_id("id", i, len(self))
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                kept.append(int(i))
        return self.tokenizer.decode(kept, skip_special_tokens=False)

    # -- looking at tokens

    def token_text(self, token_id: int) -> str:
        """The text one token stands for, e.g. ``" beaucoup"`` (a leading space is part of a piece).
        A piece that holds only part of a character's UTF-8 bytes shows them as ``<0xE4>``; specials
        are their names."""
        check_token_id("token_id", token_id, len(self))
        token = self.tokenizer.id_to_token(int(token_id))
        if token_id < len(SPECIAL_TOKENS):
            return token
        raw = bytes(_unicode_to_byte()[ch] for ch in token)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(f"<0x{b:02X}>" for b in raw)

    def pieces(self, text: str) -> list[str]:
        """``text`` as the texts of its tokens:
        ``pieces("Je t'aime.") == ["Je", " t", "'", "aime", "."]`` (whatever this vocabulary
        learned). Joined, they give back ``text`` unless a piece splits a character."""
        return [self.token_text(i) for i in self.encode(text)]

    @property
    def itos(self) -> list[str]:
        """Every token's text by id (:meth:`token_text`), like ``Vocab.itos``: labels for plots of
        attention. Made once, on first use."""
        if self._itos is None:
            self._itos = [self.token_text(i) for i in range(len(self))]
        return self._itos

    def merges(self) -> list[tuple[str, str]]:
        """The learned merges in order, as pairs of token texts (the rows of :func:`learn_bpe`, at
        scale)."""
        model = json.loads(self.tokenizer.to_str())["model"]
        pairs = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        to_text = _unicode_to_byte()
        return [
            tuple(
                bytes(to_text[ch] for ch in side).decode("utf-8", errors="replace") for side in pair
            )
            for pair in pairs
        ]
