"""Attention masks: padding and causal (the check, ``check_mask``, lives in ``_arguments`` and is
re-exported).

Convention (used everywhere in the course): a mask is a **boolean** tensor where **True means "may
attend"**, with **one dimension per axis of the attention scores** ``(B, h, T_q, T_k)``, each of
that size or 1:

- a padding mask is ``(B, 1, 1, T_k)``: key position ``j`` of sequence ``b`` is a real token;
- a causal mask is ``(1, 1, T_q, T_k)``: query ``i`` may look at keys ``j <= i`` (and at the whole
  past, when decoding step by step with a cache);
- combine them with ``&``.

Why the rank must match: broadcasting aligns the *last* dimensions, so a 2-D padding mask ``(B,
T_k)`` would be read as ``(T_q, T_k)`` whenever ``B == T_q``, silently masking the wrong keys. With
one dimension per axis there is no such reading; a mask of another rank raises. (For attention on
3-D tensors ``(B, T, d)`` the scores are ``(B, T_q, T_k)`` and the mask is 3-D, e.g.
``padding_mask(tokens, pad_id)[:, 0]``.)
"""

import torch

from ._arguments import check_mask, check_non_negative_ints, check_positive_ints, check_token_batch

__all__ = ["padding_mask", "causal_mask", "check_mask"]


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, T)`` token ids -> ``(B, 1, 1, T)`` bool mask, True where the token is not padding."""
    check_token_batch(tokens=tokens)
    check_non_negative_ints(pad_id=pad_id)
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def causal_mask(
    size_q: int, size_k: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """``(1, 1, T_q, T_k)`` bool mask, True on and below the diagonal: no query sees a later key.

    With ``T_k > T_q`` the queries are the *last* ``T_q`` positions of a sequence of length ``T_k``
    (incremental decoding with a KV cache): query ``i`` may see keys ``j <= i + (T_k - T_q)``.
    """
    size_k = size_q if size_k is None else size_k
    check_positive_ints(size_q=size_q, size_k=size_k)
    if size_k < size_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={size_q}, T_k={size_k}")
    allowed = torch.ones(size_q, size_k, dtype=torch.bool, device=device)
    return allowed.tril(diagonal=size_k - size_q)[None, None]  # (1, 1, T_q, T_k)
