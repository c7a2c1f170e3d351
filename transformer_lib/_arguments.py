"""The one place for argument checks: every "expected X, got Y" error of the library is worded here.

One rule, one wording, one exception type: TypeError for a wrong type, ValueError for a wrong value
of the right type. Integers and reals are the abstract ones (:mod:`numbers`), so NumPy scalars pass;
``bool`` is refused where a number is meant. Tensor checks read only shapes, dtypes and devices,
except :func:`check_token_ids` (one ``aminmax``). Shapes and masks: NOTATION.md.
"""

import math
import numbers
import warnings

import torch

__all__ = [
    "check_text_pairs",
    "is_int",
    "check_positive_ints",
    "check_non_negative_ints",
    "check_probability",
    "check_positive_real",
    "check_real",
    "check_positions_fit",
    "check_choice",
    "check_bools",
    "check_heads",
    "renamed",
    "check_token_id",
    "check_token_ids",
    "check_token_batch",
    "check_floating",
    "check_qkv",
    "check_attention_inputs",
    "check_mask",
]


def is_int(value: object) -> bool:
    """An integer (Python's or NumPy's), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _type_error(name: str, value: object, expected: str) -> TypeError:
    return TypeError(f"{name} must be {expected}, got {value!r} of type {type(value).__name__}")


def _check_ints(minimum: int, values: dict) -> None:
    for name, value in values.items():
        if not is_int(value):
            raise _type_error(name, value, "an int")
        if value < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {name}={value}")


def check_positive_ints(**values: object) -> None:
    """TypeError (not an int) or ValueError (below 1) naming the first of ``values`` that is not an
    int >= 1."""
    _check_ints(1, values)


def check_non_negative_ints(**values: object) -> None:
    """TypeError (not an int) or ValueError (below 0) naming the first of ``values`` that is not an
    int >= 0."""
    _check_ints(0, values)


def check_probability(**values: object) -> None:
    """TypeError (not a real number) or ValueError (outside [0, 1)) naming the first of ``values``
    that fails: dropout rates and label smoothing."""
    for name, value in values.items():
        if not _is_real(value):
            raise _type_error(name, value, "a float in [0, 1)")
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must lie in [0, 1), got {name}={value}")


def check_positive_real(**values: object) -> None:
    """TypeError (not a real number) or ValueError (not finite, or not > 0) naming the first of
    ``values`` that fails: learning rates, epsilons, rotary bases."""
    for name, value in values.items():
        if not _is_real(value):
            raise _type_error(name, value, "a float > 0")
        if not (math.isfinite(value) and value > 0):  # also refuses NaN
            raise ValueError(f"{name} must be finite and > 0, got {name}={value}")


_REAL_RULES = {
    "finite": math.isfinite,
    "finite and >= 0": lambda value: math.isfinite(value) and value >= 0,
    "in (0, 1]": lambda value: 0.0 < value <= 1.0,
}


def check_real(name: str, value: object, rule: str, hint: str = "") -> None:
    """TypeError (not a real number) or ValueError (breaks ``rule``: "finite", "finite and >= 0"
    or "in (0, 1]"; NaN breaks each) naming ``name`` and its value: temperatures, nucleus and
    masking fractions, length penalties. ``hint`` (e.g. "(0 means greedy)") is appended to either
    message."""
    hint = f" {hint}" if hint else ""
    if not _is_real(value):
        raise TypeError(
            f"{name} must be a real number, got {value!r} of type {type(value).__name__}{hint}"
        )
    if not _REAL_RULES[rule](value):
        raise ValueError(f"{name} must be {rule}, got {name}={value}{hint}")


def check_positions_fit(owner: str, start: int, length: int, max_len: int, cause: str = "") -> None:
    """ValueError unless positions ``start .. start + length - 1`` lie in ``[0, max_len)`` of
    ``owner`` (a model or a positional encoding): the one wording of the ``max_len`` rule.
    ``cause`` (e.g. "prompt length 5 + max_new_tokens 60") says where the length comes from."""
    if start < 0 or start + length > max_len:
        cause = f" ({cause})" if cause else ""
        raise ValueError(
            f"positions {start}..{start + length - 1}{cause} exceed max_len={max_len} of {owner}; "
            "use a shorter input or a config with a larger max_len"
        )


def check_choice(name: str, value: object, choices: tuple) -> None:
    """ValueError naming ``name``, its value and the allowed ``choices`` unless ``value`` is one of
    them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {name}={value!r}")


def check_bools(**values: object) -> None:
    """TypeError naming the first of ``values`` that is not ``True`` or ``False`` (0 and 1 are
    refused: a switch is a bool)."""
    for name, value in values.items():
        if not isinstance(value, bool):
            raise _type_error(name, value, "True or False")


def check_heads(
    d_model: int,
    num_heads: int,
    n_kv_heads: int | None = None,
    d_k: int | None = None,
    d_v: int | None = None,
    rope: bool = False,
) -> None:
    """The head layout's three rules, one wording each (attention and both configs call this).

    ``d_model`` divisible by ``num_heads`` unless ``d_k`` and ``d_v`` are both set; ``num_heads``
    divisible by ``n_kv_heads`` (each key/value head serves a whole group of query heads); with
    rotary positions (``rope``), an even ``d_k``. ValueError naming the values otherwise.
    """
    check_positive_ints(d_model=d_model, num_heads=num_heads)
    if (d_k is None or d_v is None) and d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}; "
            "choose another num_heads or set d_k and d_v"
        )
    if n_kv_heads is not None:
        check_positive_ints(n_kv_heads=n_kv_heads)
        if num_heads % n_kv_heads:
            raise ValueError(
                f"num_heads={num_heads} is not divisible by n_kv_heads={n_kv_heads}: each "
                "key/value head serves a whole group of query heads (n_kv_heads=1: multi-query; "
                "None: one per query head)"
            )
    for name, width in (("d_k", d_k), ("d_v", d_v)):
        if width is not None:
            check_positive_ints(**{name: width})
    if rope:
        width = d_k if d_k is not None else d_model // num_heads
        given = "" if d_k is not None else f" (d_model // num_heads = {d_model} // {num_heads})"
        if width % 2:
            raise ValueError(
                "rotary positions rotate pairs of features: d_k must be even, "
                f"got d_k={width}{given}"
            )


UNSET = object()


def renamed(owner: str, old: str, new: str, old_value: object, new_value: object) -> object:
    """The value of a renamed argument: ``new_value``, or ``old_value`` (given under the deprecated
    name ``old``) with a DeprecationWarning. Both given: TypeError. ``old_value`` is ``UNSET``
    when the old name was not used."""
    if old_value is UNSET:
        return new_value
    if new_value is not None:
        raise TypeError(
            f"{owner} got both {new}={new_value!r} and its old name {old}={old_value!r}"
        )
    warnings.warn(
        f"{owner}: {old} is deprecated, use {new} (the name LMConfig and TransformerConfig use)",
        DeprecationWarning,
        stacklevel=3,
    )
    return old_value


def check_text_pairs(caller: str, pairs: object, what: str = "(source text, target text) pairs"):
    """Every element of ``pairs`` is a ``(str, str)`` pair, tuple or list: a bare string of two
    letters would otherwise unpack as one. ``caller`` and ``what`` word the TypeError."""
    for pair in pairs:
        if not (
            isinstance(pair, tuple | list)
            and len(pair) == 2
            and all(isinstance(t, str) for t in pair)
        ):
            raise TypeError(f"{caller} takes {what}, got an element {pair!r}")


def check_token_id(
    name: str, value: object, vocab_size: int, sizes: str = "", hint: str = ""
) -> None:
    """TypeError (not an int) or ValueError (outside ``[0, vocab_size)``) for one token id such as
    ``pad_id``.

    ``sizes`` (e.g. "src_vocab_size=12, tgt_vocab_size=6") says where ``vocab_size`` comes from;
    ``hint`` (e.g. "(or None for ...)") is appended to either message."""
    hint = f" {hint}" if hint else ""
    if not is_int(value):
        raise TypeError(
            f"{name} must be an int, got {value!r} of type {type(value).__name__}{hint}"
        )
    if not 0 <= value < vocab_size:
        where = f" ({sizes})" if sizes else ""
        raise ValueError(f"{name} must lie in [0, {vocab_size}){where}, got {name}={value}{hint}")


def check_token_ids(name: str, tokens: object, vocab_size: int) -> None:
    """TypeError unless ``tokens`` is an integer tensor; ValueError if an id lies outside
    ``[0, vocab_size)``.

    The one check that reads the data (one ``aminmax``, one sync on a GPU): an id out of range would
    otherwise end in a device-side assert there, or an IndexError deep inside ``nn.Embedding`` on
    the CPU."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"{name} must be a tensor of integer ids, got {type(tokens).__name__}")
    if tokens.is_floating_point() or tokens.dtype == torch.bool or tokens.is_complex():
        raise TypeError(f"{name} must be integer ids, got dtype {tokens.dtype}")
    if tokens.numel():
        low, high = torch.stack(torch.aminmax(tokens)).tolist()
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name} must lie in [0, {vocab_size}), got min={low}, max={high}")


def check_token_batch(**tensors: object) -> None:
    """TypeError unless each of ``tensors`` is an integer tensor; ValueError unless it is
    ``(B, T)``.

    The one rule for batches of token ids (model inputs, the tokens of a padding mask); metadata
    only."""
    for name, tokens in tensors.items():
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(
                f"{name} must be a (B, T) tensor of token ids, got {type(tokens).__name__}"
            )
        if tokens.dim() != 2:
            raise ValueError(f"{name} must be (B, T) token ids, got shape {tuple(tokens.shape)}")
        if tokens.is_floating_point() or tokens.dtype == torch.bool or tokens.is_complex():
            raise TypeError(f"{name} must be integer ids, got dtype {tokens.dtype}")


def check_floating(**tensors: object) -> None:
    """TypeError unless every argument is a floating-point tensor, all of one dtype; names the
    culprits."""
    for name, x in tensors.items():
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor, got dtype {x.dtype}; token ids become "
                "vectors through an embedding first, and a 0/1 tensor can be converted with "
                "`.float()`"
            )
    dtypes = [x.dtype for x in tensors.values()]
    if len(set(dtypes)) > 1:
        names = ", ".join(tensors)
        raise TypeError(
            f"{names} must share one dtype, got {', '.join(map(str, dtypes))}; "
            "convert with `.to(...)`"
        )


def check_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[int, ...]:
    """Check scaled dot-product attention's arguments; return the scores' shape ``(..., T_q, T_k)``.

    Args:
        q: ``(..., T_q, d_k)``; floating point, as ``k`` and ``v``.
        k: ``(..., T_k, d_k)``; of ``q``'s dtype.
        v: ``(..., T_k, d_v)``; of ``q``'s dtype. The leading dims of all three broadcast.
        mask: optional; checked by :func:`check_mask` against the scores.
    """
    check_floating(q=q, k=k, v=v)
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise ValueError(
            f"q, k, v must be at least (T, d); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1):
        raise ValueError(
            f"queries and keys must have the same width d_k: q is {tuple(q.shape)} "
            f"(d_k={q.size(-1)}), k is {tuple(k.shape)} (d_k={k.size(-1)})"
        )
    if k.size(-2) != v.size(-2):
        raise ValueError(
            "keys and values must have the same length T_k: "
            f"k is {tuple(k.shape)}, v is {tuple(v.shape)}"
        )
    if q.size(-2) == 0 or k.size(-2) == 0:
        raise ValueError(
            f"empty sequence: T_q={q.size(-2)}, T_k={k.size(-2)}; attention needs T >= 1"
        )
    try:
        leading = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading (batch, head) dims of q {tuple(q.shape)}, k {tuple(k.shape)} and v "
            f"{tuple(v.shape)} do not match"
        ) from None
    scores_shape = (*leading, q.size(-2), k.size(-2))  # (..., T_q, T_k)
    if mask is not None:
        check_mask(mask, scores_shape, device=q.device)
    return scores_shape


def check_attention_inputs(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    d_model: int,
    num_heads: int,
    cached: int,
    weight_dtype: torch.dtype,
) -> None:
    """Check ``MultiHeadAttention.forward``'s arguments (metadata only, so it is free).

    Args:
        query: ``(B, T_q, d_model)``, floating point.
        key: ``(B, T_k_new, d_model)``, of ``query``'s dtype.
        value: ``(B, T_k_new, d_model)``, of ``query``'s dtype.
        mask: optional; checked against the scores ``(B, h, T_q, cached + T_k_new)``.
        d_model: the module's width.
        num_heads: ``h``.
        cached: how many key/value positions the cache already holds.
        weight_dtype: the weights' dtype, which the inputs must have unless autocast is on.
    """
    check_floating(query=query, key=key, value=value)
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.dim() != 3 or x.size(-1) != d_model:
            raise ValueError(
                f"{name} must be (B, T, d_model={d_model}), got shape {tuple(x.shape)}"
            )
    if query.dtype != weight_dtype and not torch.is_autocast_enabled(query.device.type):
        raise TypeError(
            f"the inputs have dtype {query.dtype} but the module's weights have {weight_dtype}: "
            f"convert the module (`.to({query.dtype})`) or the inputs (`.to({weight_dtype})`), or "
            "run under torch.autocast"
        )
    if not query.size(0) == key.size(0) == value.size(0):
        raise ValueError(
            "query, key and value must have one batch size B, "
            f"got query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)} "
            "(in cross-attention: the target batch and the encoder memory's batch must match)"
        )
    if key.size(1) != value.size(1):
        raise ValueError(
            f"key and value must have one length T_k, got {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if query.size(1) == 0 or key.size(1) == 0:
        raise ValueError(
            f"empty sequence: T_q={query.size(1)}, T_k={key.size(1)}; attention needs T >= 1"
        )
    if mask is not None:
        check_mask(
            mask,
            (query.size(0), num_heads, query.size(1), cached + key.size(1)),
            device=query.device,
        )


def _mask_advice(rank: int) -> dict[str, str]:
    """``check_mask``'s wording for scores of ``rank`` 3 or 4: the scores' shape, the padding and
    causal masks that fit them, and how to build the padding mask."""
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


def check_mask(
    mask: torch.Tensor, scores_shape: tuple[int, ...], device: torch.device | None = None
) -> None:
    """Raise unless ``mask`` is a bool tensor of the scores' rank that broadcasts to
    ``scores_shape`` without growing it, on ``device`` (metadata only; NOTATION.md, masks).

    TypeError for a non-bool mask; ValueError for a wrong rank, shape or device. Public as
    ``tl.masks.check_mask``; notebook 01 prints the rank message, so its wording is fixed.
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(
            f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}; convert a 0/1 "
            "mask with `mask.bool()` or build it with tl.padding_mask / tl.causal_mask"
        )
    advice = _mask_advice(len(scores_shape))
    if mask.dim() != len(scores_shape):
        leading = ", ".join(["None"] * (len(scores_shape) - 2))
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} has {mask.dim()} dims but the scores "
            f"{scores_shape} have {len(scores_shape)}: a mask needs one dim per score axis (size 1 "
            "to broadcast), so that a padding mask (B, T_k) is never mistaken for (T_q, T_k). "
            + (
                f"A (T_q, T_k) mask shared by every sequence: mask[{leading}]. "
                f"A padding mask (B, T_k): {advice['build']}. "
                if mask.dim() == 2 and len(scores_shape) > 2
                else ""
            )
            + f"For scores {advice['scores']}: padding {advice['padding']}, causal "
            f"{advice['causal']}"
        )
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} cannot broadcast to scores {scores_shape}; "
            f"expected a padding mask {advice['padding']}, a causal mask {advice['causal']}, or "
            "their combination with &"
        )
    if device is not None and mask.device != device:
        raise ValueError(
            f"mask is on {mask.device} but the scores are on {device}: move it with "
            f"`mask.to({device!r})`"
        )
