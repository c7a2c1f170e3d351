"""Attention masks and their checks.

Convention (used everywhere in the course): a mask is a **boolean** tensor where **True means "may attend"**,
broadcastable to the attention scores ``(B, h, T_q, T_k)``:

- a padding mask is ``(B, 1, 1, T_k)``: key position ``j`` of sequence ``b`` is a real token;
- a causal mask is ``(1, 1, T_q, T_k)``: query ``i`` may look at keys ``j <= i`` (and at the whole past,
  when decoding step by step with a cache);
- combine them with ``&``.
"""

import torch

__all__ = ["padding_mask", "causal_mask", "check_mask"]


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, T)`` token ids -> ``(B, 1, 1, T)`` bool mask, True where the token is not padding."""
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be (B, T) token ids, got shape {tuple(tokens.shape)}")
    if tokens.is_floating_point():
        raise ValueError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def causal_mask(size_q: int, size_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """``(1, 1, T_q, T_k)`` bool mask, True on and below the diagonal: no query sees a later key.

    With ``T_k > T_q`` the queries are the *last* ``T_q`` positions of a sequence of length ``T_k``
    (incremental decoding with a KV cache): query ``i`` may see keys ``j <= i + (T_k - T_q)``.
    """
    size_k = size_q if size_k is None else size_k
    if size_q < 1 or size_k < size_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={size_q}, T_k={size_k}")
    allowed = torch.ones(size_q, size_k, dtype=torch.bool, device=device)
    return allowed.tril(diagonal=size_k - size_q)[None, None]  # (1, 1, T_q, T_k)


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> None:
    """Raise a ValueError unless ``mask`` is a bool tensor that broadcasts to ``scores_shape``.

    Broadcasting must not grow the scores: a mask ``(2, 7)`` against scores ``(2, 8, 5, 5)`` is refused, and
    so is a mask with more dimensions than the scores.
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "convert a 0/1 mask with `mask.bool()` or build it with tl.padding_mask / tl.causal_mask"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} cannot broadcast to scores {scores_shape}; expected a padding "
            "mask (B, 1, 1, T_k), a causal mask (1, 1, T_q, T_k), or their combination with &"
        )
