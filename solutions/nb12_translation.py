"""Notebook 12 · translation: one step of byte-pair encoding (count, pick, merge)."""

from collections import Counter
from itertools import pairwise


def my_merge_step(words):
    """One BPE merge: count adjacent symbol pairs inside each word, weighted by the word's count;
    pick the most frequent, ties to the smallest ``(left, right)``; merge it in every word, left to
    right, without overlap."""
    counts = Counter()
    for symbols, count in words.items():
        for left, right in pairwise(symbols):  # adjacent symbols inside one word
            counts[left, right] += count
    pair = min(counts, key=lambda p: (-counts[p], p))
    merged = {}
    for symbols, count in words.items():
        out, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                out.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        merged[tuple(out)] = count
    return pair, merged


def _unweighted_merge_step(words):
    """A typical wrong answer: every word counted once, whatever its count."""
    return my_merge_step(dict.fromkeys(words, 1))[0], my_merge_step(words)[1]


ANSWERS = {
    "2": (
        "No. The measure says where the largest weight of one row lands; it does not say the "
        "output depends on it. Attention weights multiply value vectors that have already mixed "
        "information across positions (the encoder's self-attention), and the other heads and the"
        " residual path can carry the same name (Jain and Wallace, 2019; Wiegreffe and Pinter, "
        "2019). A test: intervene. Zero that head's output (or replace its weights by uniform "
        "ones) and re-translate the test sentences with copied names; do the same for a head that"
        " scored low, as a control. If the names then go wrong far more often than with the "
        "control, the head is needed for copying; if nothing changes, it attended to the name "
        "without being needed (other heads carry the same information), and the heat map alone "
        "would have misled. Section 7 found all four heads of layer 1 at 67-82%, so knocking out "
        "one may change little: knock out one at a time, then all four."
    ),
    "3": (
        "Measured with the shipped model, W = 4, on all 1,000 validation pairs (references: 6,684"
        " words): alpha = 0 gives BLEU 32.85 with 5,898 output words, 0.6 gives 33.68 (6,103 "
        "words), 1 gives 34.15 (6,241), and 2 gives 16.28 with 12,479 words; greedy decoding "
        "gives 33.13 (6,544 words). Without a penalty beam search prefers short outputs (every "
        "token adds a negative log-probability), so its outputs are the shortest and BLEU's "
        "brevity penalty bites; moderate penalties lengthen them and gain about a point. At "
        "alpha = 2 longer hypotheses are favoured so much that outputs run on (1.9 times the "
        "references' words) and BLEU collapses. Between 0 and 1 the outputs' total length grows "
        "by 6% and BLEU by 1.3: Tatoeba sentences are short, and (a hypothesis, not measured "
        "here) the penalty matters more on long news sentences like the paper's. A choice tuned "
        "on this split would be about 1 (only 0, 0.6, 1 and 2 were tried); the test split is not "
        "used to choose. One model on one split: whether another seed keeps the order of "
        "differences of a few tenths was not measured. With min_len=0, alpha = 0 leaves 18 of the "
        "1,000 outputs empty and alpha = 0.6 leaves 1: part of alpha = 0's lower BLEU is those "
        "empty outputs."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_merge_step": (_unweighted_merge_step, "add each word's count"),
}
