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
        "One example: an attention that adds 1e-3 to every score before the softmax. Softmax is unchanged by a "
        "constant shift, so it is not even a bug. A real one: a multi-head module whose heads share W_Q (one "
        "nn.Linear(d_model, d_k) reused for every head). The check copies weights through w_q and would report a "
        "shape error, not the cause. Another: dropout applied to the attention weights in eval mode; the checks "
        "call modules in eval mode, so only a property test (outputs identical across two eval calls, different "
        "in train mode) catches it. In general: for each bug, name the property any correct version has that the "
        "bug breaks, and test that property."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_causal_mask": (lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
    "my_split_heads": (lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
}
