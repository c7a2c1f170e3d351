"""Notebook 07 · inference: sampling with a temperature, and the causal mask for cached decoding."""

import torch


def my_softmax_with_temperature(logits, temperature):
    """``softmax(logits / temperature)`` over the vocabulary: below 1 sharpens, above 1 flattens."""
    return (logits / temperature).softmax(dim=-1)


def my_cached_causal_mask(size_q, size_k):
    """``(T_q, T_k)`` bool: the queries are the last ``T_q`` of ``T_k`` positions, so query ``i`` sees keys
    ``j <= i + (T_k - T_q)``."""
    return torch.ones(size_q, size_k, dtype=torch.bool).tril(diagonal=size_k - size_q)


ANSWERS = {
    "3": (
        "On the date task nothing (or almost nothing) changes: every output has the same length (a date in one "
        "format), so all finished hypotheses are equally long and dividing their log-probabilities by a length "
        "term cannot reorder them. In translation the hypotheses differ in length; each extra token adds a "
        "negative log-probability, so without a penalty beam search prefers short outputs, and the length penalty "
        "decides how much longer hypotheses are favoured."
    ),
}
