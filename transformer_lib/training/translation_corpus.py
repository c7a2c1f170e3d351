"""Real English-French sentence pairs (Tatoeba) for notebook 12, shipped with the package, and their
splits.

The pairs come from tatoeba.org via www.manythings.org/anki (CC-BY 2.0; see :data:`ATTRIBUTION`).
The package ships a subset, ``data_files/tatoeba_fra_eng/pairs.tsv.gz``: every pair with at most 15
English words, in the distributor's order, its text cleaned by :func:`normalise_text`.
``tools/make_tatoeba_subset.py`` makes it from the distributor's ``fra.txt``; the file's README says
how, its size and its checksum. Nothing is downloaded.

Held-out means never seen in training, by construction. Many English sentences have several French
translations ("I'm fine.": "Tout va bien.", "Je vais bien.", "Ça va."), and many French sentences
translate several English ones ("Je vais bien." translates ten, from "I'm OK." to "I'm doing
well."). :func:`split_pairs` therefore splits whole *groups*: two pairs are in one group when they
share their English or their French sentence (compared by :func:`sentence_key`, which ignores case
and punctuation), and a group goes to one split as a whole. So no held-out English sentence and no
held-out French sentence ever appears in training, on either side. Which group is held out depends
only on a hash of its text, so the splits are the same on every machine.
"""

import gzip
import hashlib
import os
import re
import unicodedata
import zlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from .._arguments import (
    check_choice,
    check_non_negative_ints,
    check_positive_ints,
    check_text_pairs,
)
from .._package_data import package_data

__all__ = [
    "ATTRIBUTION",
    "LICENCE_URL",
    "normalise_text",
    "sentence_key",
    "split_pairs",
    "read_pairs",
    "shipped_pairs_path",
    "TatoebaCorpus",
]

ATTRIBUTION = "tatoeba.org and www.manythings.org/anki, CC-BY 2.0"
LICENCE_URL = "https://creativecommons.org/licenses/by/2.0/"

# The shipped file, and the SHA-256 of its *decompressed* text (tools/make_tatoeba_subset.py prints
# both). The check is on the text, not on the .gz bytes, which depend on the zlib that wrote them.
SHIPPED_FILE = "pairs.tsv.gz"
SHIPPED_TEXT_SHA256 = "275c7a8bc24791d7ac520b95c756a90f66e8e3c38876081994b270516a8434cb"
SHIPPED_MAX_WORDS = 15

# Typographic variants that the data mixes for one character: a model should not have to learn two
# apostrophes.
_SAME_AS = str.maketrans({"\u2019": "'", "\u2018": "'"})


def normalise_text(text: str) -> str:
    """One spelling for what reads the same: Unicode NFC (an accented letter is one code point, as
    typed on a keyboard), every kind of space (French typography's narrow no-break space before
    ``! ? ; :``, the no-break space, the thin space) a plain space, invisible characters (zero-width
    space, soft hyphen) gone, typographic apostrophes ``’ ‘`` as ``'``, runs of spaces as one, no
    space at either end.

    The shipped pairs are already normalised; apply it to a sentence you type before translating it,
    so that it is spelled the way the training text was.
    """
    if not isinstance(text, str):
        raise TypeError(f"normalise_text takes a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).translate(_SAME_AS)
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if category == "Zs" or ch in "\t\n\r\f\v":
            kept.append(" ")
        elif category not in (
            "Cf",
            "Cc",
        ):  # format and control characters: invisible, or breaking the TSV
            kept.append(ch)
    return " ".join("".join(kept).split())


_NOT_A_WORD = re.compile(r"[\W_]+")


def sentence_key(text: str) -> str:
    """What two sentences must share to count as *the same sentence* when splitting: the words,
    lower-cased (``casefold``), without punctuation. "Run!" and "Run." have one key, ``"run"``, so
    they never straddle training and test."""
    return " ".join(_NOT_A_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


def _group_of(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """For each pair, the name of its group: the smallest English key among the pairs linked to it
    through a shared English or French key (union-find over the sentences, so the name does not
    depend on pair order)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        root = node
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while parent[node] != root:  # path compression: later finds are one step
            parent[node], node = root, parent[node]
        return root

    english = ["en:" + sentence_key(en) for en, _ in pairs]
    for en_node, (_, fr) in zip(english, pairs, strict=True):
        a, b = find(en_node), find("fr:" + sentence_key(fr))
        if a != b:
            parent[max(a, b)] = min(a, b)  # "en:" < "fr:", so an English key names every group
    return [find(node) for node in english]


def split_pairs(
    pairs: Sequence[tuple[str, str]], num_valid: int = 1000, num_test: int = 1000, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """``(english, french)`` pairs -> ``{"train": [...], "valid": [...], "test": [...]}``, split by
    group.

    Groups (see the module docstring) are put in the order of the SHA-256 of
    ``f"{seed}/{group name}"``, a shuffle that every machine repeats. Whole groups go to ``valid``
    until it holds at least ``num_valid`` pairs, then to ``test`` until it holds at least
    ``num_test``; the rest is training. A split may exceed its size by less than one group. Within a
    split, pairs keep their input order.
    """
    check_non_negative_ints(num_valid=num_valid, num_test=num_test)
    check_text_pairs("split_pairs", pairs, "(english, french) pairs of str")
    groups = _group_of(pairs)
    sizes: dict[str, int] = {}
    for group in groups:
        sizes[group] = sizes.get(group, 0) + 1
    if num_valid + num_test >= len(pairs):
        raise ValueError(
            f"num_valid + num_test = {num_valid + num_test} leaves nothing to train on: there are "
            f"{len(pairs)} pairs"
        )
    order = sorted(sizes, key=lambda g: hashlib.sha256(f"{seed}/{g}".encode()).hexdigest())
    split_of_group, filled = {}, {"valid": 0, "test": 0}
    for group in order:
        split = (
            "valid"
            if filled["valid"] < num_valid
            else "test"
            if filled["test"] < num_test
            else "train"
        )
        split_of_group[group] = split
        if split != "train":
            filled[split] += sizes[group]
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for pair, group in zip(pairs, groups, strict=True):
        splits[split_of_group[group]].append(tuple(pair))
    return splits


def shipped_pairs_path() -> Path:
    """Where the package keeps the shipped pairs (inside the installed package: no network
    needed)."""
    return package_data("tatoeba_fra_eng", SHIPPED_FILE)


def read_pairs(path: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """The ``English<TAB>French`` lines of a UTF-8 file (gzip-compressed if its name ends in
    ``.gz``) as pairs.

    Without ``path``, the shipped subset, checked against its SHA-256 so that a damaged or edited
    copy is reported instead of silently changing the splits.
    """
    shipped = path is None
    path = shipped_pairs_path() if shipped else Path(path)
    if not path.is_file():
        hint = (
            " (the package data is missing: reinstall transformer_lib, or run "
            "tools/make_tatoeba_subset.py)"
        )
        raise FileNotFoundError(f"no pairs file at {path}{hint if shipped else ''}")
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path} is not a readable UTF-8 (gzip) text file: {type(exc).__name__}: {exc}"
        ) from None
    if shipped and hashlib.sha256(raw).hexdigest() != SHIPPED_TEXT_SHA256:
        raise ValueError(
            f"{path} does not hold the shipped pairs (its text's SHA-256 is "
            f"{hashlib.sha256(raw).hexdigest()}, expected {SHIPPED_TEXT_SHA256}): restore it, or "
            "remake it with tools/make_tatoeba_subset.py"
        )
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(
                f"{path}, line {number}: expected English<TAB>French, got {len(fields)} fields: "
                f"{line!r}"
            )
        pairs.append((fields[0], fields[1]))
    return pairs


@lru_cache(maxsize=4)
def _shipped_splits(num_valid: int, num_test: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """The shipped pairs, split, read once per process (a second corpus, e.g. of shorter pairs, is
    instant)."""
    return split_pairs(read_pairs(), num_valid, num_test, seed)


class TatoebaCorpus:
    """The shipped English-French pairs, split into ``train_pairs``, ``valid_pairs`` and
    ``test_pairs``.

    Each split is a list of ``(source, target)`` pairs: ``(English, French)`` for
    ``direction="en-fr"`` (the paper's direction), ``(French, English)`` for ``"fr-en"``. The split
    is made on all shipped pairs by :func:`split_pairs` (groups held out whole, by a hash);
    ``max_words`` then keeps, in every split, only pairs with at most that many English words (a
    smaller corpus for a CPU; the held-out pairs stay held out). The recipe is tuned on
    ``valid_pairs``; ``test_pairs`` is read once, at the end. Pairs keep the shipped order, which is
    by English length: shuffle (or batch by length) before training.
    """

    DIRECTIONS = ("en-fr", "fr-en")

    def __init__(
        self,
        max_words: int = SHIPPED_MAX_WORDS,
        direction: str = "en-fr",
        num_valid: int = 1000,
        num_test: int = 1000,
        seed: int = 0,
        path: str | os.PathLike | None = None,
    ):
        check_positive_ints(max_words=max_words)
        check_choice("direction", direction, self.DIRECTIONS)
        self.max_words, self.direction, self.seed = max_words, direction, seed
        splits = (
            _shipped_splits(num_valid, num_test, seed)
            if path is None
            else split_pairs(read_pairs(path), num_valid, num_test, seed)
        )
        flip = direction == "fr-en"
        for name, pairs in splits.items():
            kept = [
                (fr, en) if flip else (en, fr) for en, fr in pairs if len(en.split()) <= max_words
            ]
            setattr(self, f"{name}_pairs", kept)
        self.train_pairs: list[tuple[str, str]]
        self.valid_pairs: list[tuple[str, str]]
        self.test_pairs: list[tuple[str, str]]
        self.attribution = ATTRIBUTION

    def __repr__(self) -> str:
        sizes = ", ".join(
            f"{name}={len(getattr(self, name + '_pairs')):,}" for name in ("train", "valid", "test")
        )
        return (
            f"TatoebaCorpus({self.direction}, max_words={self.max_words}: {sizes}; {ATTRIBUTION})"
        )
