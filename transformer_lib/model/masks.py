"""Attention masks: padding and causal, as NOTATION.md's mask section defines them.

A mask has one dim per score axis, so none is misread: broadcasting aligns the *last* dims, and a
2-D padding mask ``(B, T_k)`` would act as ``(T_q, T_k)`` whenever ``B == T_q``. ``check_mask``
lives in ``_arguments`` and is re-exported here.
"""

import torch

from .._arguments import check_mask, check_non_negative_ints, check_positive_ints, check_token_batch

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
