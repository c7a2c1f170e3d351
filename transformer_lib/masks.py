"""Attention masks and their checks.

Convention (used everywhere in the course): a mask is a **boolean** tensor where **True means "may attend"**,
with **one dimension per axis of the attention scores** ``(B, h, T_q, T_k)``, each of that size or 1:

- a padding mask is ``(B, 1, 1, T_k)``: key position ``j`` of sequence ``b`` is a real token;
- a causal mask is ``(1, 1, T_q, T_k)``: query ``i`` may look at keys ``j <= i`` (and at the whole past,
  when decoding step by step with a cache);
- combine them with ``&``.

Why the rank must match: broadcasting aligns the *last* dimensions, so a 2-D padding mask ``(B, T_k)`` would
be read as ``(T_q, T_k)`` whenever ``B == T_q``, silently masking the wrong keys. With one dimension per axis
there is no such reading; a mask of another rank raises. (For attention on 3-D tensors ``(B, T, d)`` the scores
are ``(B, T_q, T_k)`` and the mask is 3-D, e.g. ``padding_mask(tokens, pad_id)[:, 0]``.)
"""

import torch

from ._arguments import is_int

__all__ = ["padding_mask", "causal_mask", "check_mask"]


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """``(B, T)`` token ids -> ``(B, 1, 1, T)`` bool mask, True where the token is not padding."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a (B, T) tensor of token ids, got {type(tokens).__name__}")
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be (B, T) token ids, got shape {tuple(tokens.shape)}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    if not is_int(pad_id):
        raise TypeError(f"pad_id must be an int, got {pad_id!r} of type {type(pad_id).__name__}")
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, T)


def causal_mask(size_q: int, size_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """``(1, 1, T_q, T_k)`` bool mask, True on and below the diagonal: no query sees a later key.

    With ``T_k > T_q`` the queries are the *last* ``T_q`` positions of a sequence of length ``T_k``
    (incremental decoding with a KV cache): query ``i`` may see keys ``j <= i + (T_k - T_q)``.
    """
    size_k = size_q if size_k is None else size_k
    for name, size in (("size_q", size_q), ("size_k", size_k)):
        if not is_int(size):
            raise TypeError(f"causal_mask needs int sizes, got {name}={size!r} of type {type(size).__name__}")
    if size_q < 1 or size_k < size_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={size_q}, T_k={size_k}")
    allowed = torch.ones(size_q, size_k, dtype=torch.bool, device=device)
    return allowed.tril(diagonal=size_k - size_q)[None, None]  # (1, 1, T_q, T_k)


def _mask_advice(rank: int) -> dict[str, str]:
    """The wording ``check_mask`` uses for scores of ``rank`` 3 ``(B, T_q, T_k)`` or 4 ``(B, h, T_q, T_k)``:
    the scores, the padding and causal mask shapes that fit them, and how to build the padding mask."""
    if rank == 3:
        return {
            "scores": "(B, T_q, T_k)",
            "padding": "(B, 1, T_k)",
            "causal": "(1, T_q, T_k)",
            "build": "tl.padding_mask(tokens, pad_id)[:, 0], which gives (B, 1, T_k)",
        }
    return {
        "scores": "(B, h, T_q, T_k)",
        "padding": "(B, 1, 1, T_k)",
        "causal": "(1, 1, T_q, T_k)",
        "build": "tl.padding_mask(tokens, pad_id), which gives (B, 1, 1, T_k)",
    }


def check_mask(mask: torch.Tensor, scores_shape: tuple[int, ...], device: torch.device | None = None) -> None:
    """Raise unless ``mask`` is a bool tensor with the scores' rank that broadcasts to ``scores_shape``.

    TypeError for something that is not a bool tensor; ValueError for the wrong rank (a ``(B, T_k)`` mask
    against 4-D scores), a shape that does not broadcast or would grow the scores (``(2, 1, 1, 7)`` against
    scores ``(2, 8, 5, 5)``), or a mask on another ``device`` than the scores. Reads only metadata.
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}; "
            "convert a 0/1 mask with `mask.bool()` or build it with tl.padding_mask / tl.causal_mask"
        )
    advice = _mask_advice(len(scores_shape))
    if mask.dim() != len(scores_shape):
        leading = ", ".join(["None"] * (len(scores_shape) - 2))
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} has {mask.dim()} dims but the scores {scores_shape} have "
            f"{len(scores_shape)}: a mask needs one dim per score axis (size 1 to broadcast), so that a padding "
            "mask (B, T_k) is never mistaken for (T_q, T_k). "
            + (
                f"A (T_q, T_k) mask shared by every sequence: mask[{leading}]. "
                f"A padding mask (B, T_k): {advice['build']}. "
                if mask.dim() == 2 and len(scores_shape) > 2
                else ""
            )
            + f"For scores {advice['scores']}: padding {advice['padding']}, causal {advice['causal']}"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} cannot broadcast to scores {scores_shape}; expected a padding "
            f"mask {advice['padding']}, a causal mask {advice['causal']}, or their combination with &"
        )
    if device is not None and mask.device != device:
        raise ValueError(f"mask is on {mask.device} but the scores are on {device}: move it with `mask.to({device!r})`")
