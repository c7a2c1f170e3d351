"""Notebook 12 · translation: the check of one BPE merge step.

The learner writes ``my_merge_step(words)``: ``words`` maps each word, spelled as a tuple of
symbols, to how often it occurs (``{("l", "o", "w"): 5, ...}``). It returns ``(pair, merged)``: the
most frequent pair of adjacent symbols, counted inside words only, at every position, and weighted
by each word's count, a tie going to the smallest ``(left, right)`` in Python's order of tuples of
str (the rule notebook 12 states; :func:`~transformer_lib.learn_bpe` breaks ties by the symbols'
age instead, which one step cannot see, and the notebook shows where the two part); and the words
with every occurrence of that pair, read left to right without overlap, merged into one symbol
(``("a", "a", "a")`` with ``("a", "a")`` becomes ``("aa", "a")``).

There is nothing to compare as tensors, so the entry has a ``verdict``: it reads whatever the
learner's code returned defensively (a list for the pair, any mapping for the words are accepted),
compares it with the rule, and names the mistake that explains a wrong answer: pairs counted across
word boundaries, once per word or without the word counts, another tie-break, only the first
occurrence merged, overlapping occurrences merged, or text replaced inside longer symbols. It reads
at most as many items as a right answer holds: a result with more is wrong, never read to its end.
"""
# The entries read best as a table: one mistake per line or two, so the formatter is kept out of
# this file. fmt: off

import operator
from collections import Counter
from collections.abc import Callable, Mapping
from itertools import islice, pairwise

from .engine import (
    Case,
    CheckResult,
    Entry,
    Failure,
    _text,
    _type_name,
    is_instance,
    judge,
    stored_items,
)
from .registry import Exercise, Question

__all__ = ["check_merge_step"]


# --- the rule, and the ways it goes wrong ---------------------------------------------------------


def _pair_counts(words: dict) -> Counter:
    """Adjacent pairs inside each word, each word weighted by its count."""
    counts: Counter = Counter()
    for symbols, count in words.items():
        for pair in pairwise(symbols):
            counts[pair] += count
    return counts


def _winners(counts: Counter) -> list[tuple[str, str]]:
    """The pair the rule picks, as a one-item list: the most frequent, ties to the smallest
    ``(left, right)`` tuple of str."""
    top = max(counts.values())
    return [min(pair for pair, count in counts.items() if count == top)]


def _best(counts: Counter) -> tuple[str, str]:
    """The most frequent pair, ties to the smallest ``(left, right)``."""
    return _winners(counts)[0]


def _merge(symbols: tuple, pair: tuple) -> tuple:
    """Every ``left, right`` in ``symbols`` as one symbol, scanning left to right without
    overlap."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def reference_merge_step(words: dict) -> tuple[tuple[str, str], dict]:
    """The rule the check grades by (the notebook's model answer is written independently, in
    solutions/)."""
    pair = _best(_pair_counts(words))
    return pair, {_merge(symbols, pair): count for symbols, count in words.items()}


def _pairs_across_words(words: dict) -> Counter:
    """Mistake: the words run together as one sequence (each repeated by its count), so the last
    symbol of one word and the first of the next count as a pair."""
    sequence = [
        symbol for symbols, count in words.items() for _ in range(count) for symbol in symbols
    ]
    return Counter(pairwise(sequence))


def _pairs_unweighted(words: dict) -> Counter:
    """Mistake: each word counted once, whatever its count."""
    return _pair_counts(dict.fromkeys(words, 1))


def _pairs_once_per_word(words: dict) -> Counter:
    """Mistake: a pair counted once per word (``set(zip(...))``), however often the word holds
    it."""
    counts: Counter = Counter()
    for symbols, count in words.items():
        for pair in set(pairwise(symbols)):
            counts[pair] += count
    return counts


def _merge_first_only(symbols: tuple, pair: tuple) -> tuple:
    """Mistake: only the first occurrence of the pair in each word merged."""
    for i in range(len(symbols) - 1):
        if (symbols[i], symbols[i + 1]) == pair:
            return (*symbols[:i], pair[0] + pair[1], *symbols[i + 2 :])
    return symbols


def _merge_overlapping(symbols: tuple, pair: tuple) -> tuple:
    """Mistake: after a merge the scan moves on by one symbol, not two, so ``a a a`` becomes
    ``aa aa``."""
    out, i, merged_last = [], 0, False
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(pair[0] + pair[1])
            merged_last = True
        elif not merged_last:
            out.append(symbols[i])
        else:
            merged_last = False
        i += 1
    return tuple(out)


def _merge_right_to_left(symbols: tuple, pair: tuple) -> tuple:
    """Mistake: the scan runs from the right, so ``a a a`` becomes ``a aa``."""
    mirrored = tuple(s[::-1] for s in reversed(symbols))  # the word read backwards, each symbol too
    merged = _merge(mirrored, (pair[1][::-1], pair[0][::-1]))
    return tuple(s[::-1] for s in reversed(merged))


def _merge_as_text(symbols: tuple, pair: tuple) -> tuple:
    """Mistake: the pair replaced in the space-joined text, where ``"b c"`` also matches the end of
    ``"ab c"``."""
    return tuple(" ".join(symbols).replace(f"{pair[0]} {pair[1]}", pair[0] + pair[1]).split(" "))


# --- the cases ------------------------------------------------------------------------------------


def _cases() -> list[Case]:
    def case(words: dict, about: str) -> Case:
        return Case((words,), about)

    return [
        case(
            {tuple("low"): 5, tuple("lower"): 2, tuple("newest"): 6, tuple("widest"): 3},
            "the words low ×5, lower ×2, newest ×6, widest ×3",
        ),
        case(
            {tuple("aaa"): 3, tuple("ba"): 1},
            "the words aaa ×3, ba ×1 (the pair a a overlaps itself in aaa)",
        ),
        case({tuple("abc"): 1, tuple("abd"): 1, tuple("ef"): 5}, "the words abc ×1, abd ×1, ef ×5"),
        case({tuple("ea"): 1, tuple("eb"): 1, tuple("ec"): 1}, "the words ea, eb, ec, once each"),
        case({tuple("ba"): 2, tuple("ab"): 2}, "the words ba ×2, ab ×2 (a tie)"),
        case(
            {("b", "c"): 3, ("ab", "c"): 1, ("x", "y", "z"): 1},
            "words already partly merged: (b, c) ×3, (ab, c) ×1, (x, y, z) ×1",
        ),
        case(
            {tuple("ababab"): 1, tuple("cd"): 2},
            "the words ababab ×1, cd ×2 (a b occurs 3 times in one word)",
        ),
        case(
            {("ab", "c"): 2, ("b", "c"): 2},
            "the words (ab, c) ×2, (b, c) ×2 (a tie between a merged symbol and a character)",
        ),
        case(
            {("a", "bd"): 1, ("ab", "c"): 1, ("e",): 4},
            "the words (a, bd) ×1, (ab, c) ×1, (e,) ×4 (a tie; both pairs spell abc or abd)",
        ),
    ]


# --- the verdict ----------------------------------------------------------------------------------


def _as_pair(value) -> tuple[str, str]:
    items = stored_items(value, 2)
    if is_instance(value, str) or items is None or len(items) != 2:
        raise Failure(
            f"the pair should be two symbols, e.g. ('e', 's'), got {_text(value, repr)[:60]}."
        )
    if not all(is_instance(symbol, str) for symbol in items):
        raise Failure(f"the pair should hold two str symbols, got {_text(value, repr)[:60]}.")
    return tuple(str.__str__(symbol) for symbol in items)


def _as_words(value, words: dict) -> dict:
    """The merged words as a plain dict of plain tuples of str, read from storage where ``value``
    is a dict, else at most one item more than ``words`` holds: a mapping that never ends is
    wrong, not read forever."""
    if not is_instance(value, Mapping):
        raise Failure(
            "the merged words should be a dict {tuple of symbols: count}, got "
            f"{_type_name(value)}."
        )
    longest = max(map(len, words))
    pairs = dict.items(value) if issubclass(type(value), dict) else value.items()
    merged, read = {}, 0
    for item in islice(pairs, len(words) + 1):
        read += 1
        symbols, count = (stored_items(item, 2) or [None, None, None])[:2]
        spelled = stored_items(symbols, longest)
        if (
            spelled is None
            or not issubclass(type(symbols), tuple)
            or len(spelled) > longest
            or not all(is_instance(s, str) for s in spelled)
        ):
            raise Failure(
                "each merged word should be a tuple of str symbols, no longer than the word "
                f"was, got the key {_text(symbols, repr)[:60]}."
            )
        try:
            count = operator.index(count)
        except Exception:
            raise Failure(
                f"each merged word's count should be an int, got {_text(count, repr)[:60]}."
            ) from None
        merged[tuple(str.__str__(s) for s in spelled)] = count
    if read > len(words) or len(merged) < read:
        raise Failure(
            f"your merged words hold more than the {len(words)} words given: a merge changes "
            "how each word is spelled, never how many words there are."
        )
    return merged


def _spelling(words: dict) -> dict:
    return {"".join(symbols): count for symbols, count in words.items()}


_TIE_RULE = (
    "a tie goes to the smallest (left, right) in Python's order of tuples of str: compare the left "
    "symbols, then the right ones, as min(counts, key=lambda p: (-counts[p], p)) does. Not the "
    "max, not the first pair met (Counter.most_common keeps the order pairs were first seen), and "
    "not `left + right` as text, which differs once symbols are merged ('a' + 'bd' against "
    "'ab' + 'c')"
)


def _judge_pair(pair, want_pair, words: dict, counts, case: Case) -> None:
    """Raise a Failure naming why the learner's pair is not the rule's ``want_pair``."""
    shown = f"{case.about}: you picked {pair}, the rule picks {want_pair}"
    if pair not in counts:
        raise Failure(
            f"{shown}. {pair} never occurs inside one word: count pairs inside each word only "
            "(a word's last symbol and the next word's first are not neighbours)."
        )
    if pair == _best(_pairs_across_words(words)):
        raise Failure(
            f"{shown}: count pairs inside each word only, not across the end of one word and "
            "the start of the next."
        )
    if pair == _best(_pairs_unweighted(words)):
        raise Failure(
            f"{shown} ({want_pair} occurs {counts[want_pair]} times, {pair} {counts[pair]}): "
            "add each word's count, not 1 per word."
        )
    if pair == _best(_pairs_once_per_word(words)):
        raise Failure(
            f"{shown} ({want_pair} occurs {counts[want_pair]} times, {pair} {counts[pair]}): "
            "a pair that occurs k times in one word counts k times (times the word's count); "
            "counting a word's distinct pairs, `set(zip(...))`, counts it once."
        )
    if counts[pair] == counts[want_pair]:
        raise Failure(f"{shown}: both occur {counts[pair]} times, and {_TIE_RULE}.")
    raise Failure(
        f"{shown} ({want_pair} occurs {counts[want_pair]} times, {pair} {counts[pair]}): "
        "count every adjacent pair in every word, weighted by the word's count."
    )


# (a wrong way of merging, its hint): one row per mistake
# fmt: off
_MERGE_MISTAKES = [
    (_merge_overlapping,
     "after merging symbols i and i + 1, carry on at i + 2: occurrences that overlap (a a a) "
     "merge once, from the left"),
    (_merge_as_text,
     "replacing the text 'x y' in the joined word also matches inside longer symbols ('b c' "
     "inside 'ab c'): compare whole symbols, symbols[i] == left and symbols[i + 1] == right"),
    (_merge_first_only,
     "merge every occurrence of the pair in a word, not only the first: ('a', 'b', 'a', 'b') "
     "with ('a', 'b') becomes ('ab', 'ab')"),
    (_merge_right_to_left,
     "you merged from the right; scan left to right, so ('a', 'a', 'a') becomes ('aa', 'a')"),
]
# fmt: on


def _judge_merged(merged: dict, want_words: dict, pair, words: dict, case: Case) -> None:
    """Raise a Failure naming why the learner's merged words (for the rule's pair) are wrong."""
    for version, hint in _MERGE_MISTAKES:
        if merged == {version(symbols, pair): count for symbols, count in words.items()}:
            raise Failure(f"{case.about}: your merged words are not the rule's. Hint: {hint}.")
    if _spelling(merged) != _spelling(want_words):
        raise Failure(
            f"{case.about}: your merged words spell {_spelling(merged)}, not "
            f"{_spelling(want_words)}: a merge joins two neighbours into one symbol; it never "
            "adds, drops or repeats letters, and each word keeps its count. Hint: after merging "
            "symbols i and i + 1, carry on at i + 2."
        )
    wrong = next((symbols for symbols in words if _merge(symbols, pair) not in merged), None)
    if wrong is None:
        raise Failure(
            f"{case.about}: your merged words hold more than the words given: {len(merged)} words, "
            f"expected {len(want_words)}."
        )
    raise Failure(
        f"{case.about}: {wrong} should become {_merge(wrong, pair)}; merge every occurrence of "
        f"{pair}, left to right, in every word, and keep each word's count."
    )


def _verdict(result, case: Case) -> str:
    """The merge step's verdict: "" when ``(pair, merged)`` is the rule's, else a Failure naming the
    mistake in the pair or in the merged words."""
    words = case.args[0]
    if result is None:
        raise Failure(
            f"{case.about}: your function returned None (a missing `return`?); return (pair, "
            "merged)."
        )
    items = stored_items(result, 2)
    if items is None or len(items) != 2:
        many = "" if items is None else f" of {len(items)}{' or more' * (len(items) > 2)} items"
        raise Failure(
            f"{case.about}: return two things, (pair, merged), got {_type_name(result)}{many}."
        )
    pair, merged = _as_pair(items[0]), _as_words(items[1], words)
    counts = _pair_counts(words)
    winners = _winners(counts)
    want_pair = pair if pair in winners else winners[0]
    want_words = {_merge(symbols, want_pair): count for symbols, count in words.items()}
    if pair != want_pair:
        _judge_pair(pair, want_pair, words, counts, case)
    if merged != want_words:
        _judge_merged(merged, want_words, pair, words, case)
    return ""


MERGE_STEP = Entry(
    "check_merge_step",
    "your merge_step",
    None,
    _cases,
    verdict=_verdict,
    success="the most frequent pair, counted inside words and weighted by their counts, ties to "
    "the smallest (left, right), merged everywhere from the left.",
)

ENTRIES = (MERGE_STEP,)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_merge_step(merge_step: Callable) -> CheckResult:
    """Check ``merge_step(words) -> (pair, merged)`` for one step of BPE on
    ``{tuple of symbols: count}``; see the module docstring for the rule. Returns a CheckResult:
    truthy when it passed; it prints as one paragraph."""
    return judge(MERGE_STEP, merge_step)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise("12", "1", "my_merge_step", "one step of BPE: count, pick, merge", "check_merge_step"),
]

QUESTIONS = [
    Question("12", "2", "does the head that lands on copied names make the model copy them?"),
    Question("12", "3", "experiment: the length penalty on the validation split"),
]
