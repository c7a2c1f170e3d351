"""Notebook 08 · debugging attention: the fixed versions of the two exercises' bugs."""

import torch


def my_causal_mask(size):
    """The fix of the ``.triu()`` mistake: ``.tril()`` keeps the diagonal and the past."""
    return torch.ones(size, size, dtype=torch.bool).tril()


def my_split_heads(x, num_heads):
    """The fix of ``x.reshape(B, h, T, d_k)``: view as ``(B, T, h, d_k)``, then swap T and h."""
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)  # (B, h, T, d_k)


ANSWERS = {
    "3": (
        "One that passes today: an attention that clamps the scaled scores to [-10, 10] before the "
        "softmax, 'for "
        "safety' (scores.clamp(-10, 10)). check_attention draws q, k, v from a standard normal, so "
        "the scaled scores "
        "stay well inside that range and every case matches the library. On inputs with large "
        "scores (q and k "
        "multiplied by 30) the clamp flattens the softmax: the weights differ from the library's "
        "by up to 0.75 (run "
        "it). A property that catches it needs no reference: scaling q up should sharpen each row "
        "toward one-hot, "
        "so with q * 100 the largest weight of a row whose best score is well ahead must be close "
        "to 1; the clamped "
        "version stays far from it. In general: a check tries a few small cases, in eval mode, in "
        "float32 on the "
        "CPU; a bug that only shows outside them (large values, long sequences, another dtype, "
        "training mode) can "
        "pass, and a property test aimed at that region catches it."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_causal_mask": (lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
    "my_split_heads": (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
}
