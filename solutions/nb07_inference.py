"""Notebook 07 · inference: sampling with a temperature, and the causal mask for cached decoding."""

import torch


def my_softmax_with_temperature(logits, temperature):
    """``softmax(logits / temperature)`` over the vocabulary: below 1 sharpens, above 1 flattens."""
    return (logits / temperature).softmax(dim=-1)


def my_cached_causal_mask(size_q, size_k):
    """``(T_q, T_k)`` bool: the queries are the last ``T_q`` of ``T_k`` positions, so query ``i``
    sees keys ``j <= i + (T_k - T_q)``."""
    return torch.ones(size_q, size_k, dtype=torch.bool).tril(diagonal=size_k - size_q)


ANSWERS = {
    "3": (
        "In a new cell, run the call: on the date task the decoded dates should not change (or "
        "hardly). The penalty divides a finished hypothesis's log-probability by "
        "lp = ((5 + length) / 6) ** alpha (Wu et al. 2016, as in tl.beam_search); hypotheses of "
        "equal length are divided by the same number, so their order is kept. Every correct "
        "output is an ISO date of exactly 10 characters, and a trained model gives hypotheses "
        "of any other length a far lower probability, so nothing is reordered. In translation "
        "the candidates differ in length: "
        "each extra token adds a negative log-probability, so without a penalty (alpha = 0) beam "
        "search prefers short outputs, and alpha sets how far longer ones are favoured. Measured "
        "on the seed-0 recipe model and the 200 test dates of section 2: exact match 1.000 with "
        "alpha = 0, 0.6 and 2, and no output changes. (An earlier version of the library used the "
        "shortcut of section 2, stopping as soon as W outputs had finished, and there alpha "
        "mattered: short <eos> endings finished first, and with alpha = 0 one date came out "
        "empty.)"
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_softmax_with_temperature": (lambda logits, t: (logits * t).softmax(-1), "multiplied"),
    "my_cached_causal_mask": (
        lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(),
        "every cached token",
    ),
}
