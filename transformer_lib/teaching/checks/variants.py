"""The known mistakes' code that several notebooks share: attention and multi-head attention with
a knob per typical bug (every knob at its default gives the right code), and the attention and
residual sublayers the encoder and decoder layers' versions are built from. A version used by one
notebook only lives in that notebook's entry file.

An entry names a mistake by its hint and knobs, e.g. ``partial(variants.attention, fill=0.0)``, so
one version serves every check that meets the bug. A module's version takes the reference module
(holding the student's weights) first, then the module's own arguments.
"""

import math

import torch

from ...model.attention import MultiHeadAttention, combine_heads, split_heads


def attention(
    q,
    k,
    v,
    mask=None,
    *,
    scale=None,
    dim=-1,
    fill=float("-inf"),
    keep=lambda m: m,
    after_softmax=False,
    nan_rows=False,
) -> torch.Tensor:
    """``scale(q, v)``: what the scores are divided by; ``dim``: softmax's axis; ``fill``: the
    masked scores; ``keep(mask)``: the mask actually applied; ``after_softmax``: mask the weights
    instead of the scores; ``nan_rows``: a query that may see no key keeps softmax's NaN instead of
    zero weights."""
    divisor = math.sqrt(q.size(-1)) if scale is None else scale(q, v)
    scores = q @ k.transpose(-2, -1) / divisor  # (..., T_q, T_k)
    if mask is not None and not after_softmax:
        scores = scores.masked_fill(~keep(mask), fill)
    weights = scores.softmax(dim)  # (..., T_q, T_k)
    if mask is not None and after_softmax:
        weights = weights.masked_fill(~keep(mask), 0.0)
    if mask is not None and not nan_rows:
        # no allowed key: zero weights
        weights = torch.where(keep(mask).any(-1, keepdim=True), weights, 0.0)
    return weights @ v  # (..., T_q, d_v)


def multi_head_attention(
    ref: MultiHeadAttention,
    query,
    key,
    value,
    mask=None,
    *,
    merge=combine_heads,
    key_projection="w_k",
    value_projection="w_v",
    output_projection=True,
    heads_of_width_h=False,
    **knobs,
) -> torch.Tensor:
    """``heads_of_width_h``: split into d_k heads of h features each (the two numbers swapped);
    ``knobs``: those of :func:`attention`, for the bugs inside the heads."""
    heads = ref.w_q.out_features // ref.num_heads if heads_of_width_h else ref.num_heads
    q = split_heads(ref.w_q(query), heads)  # (B, h, T_q, d_k)
    k = split_heads(getattr(ref, key_projection)(key), heads)  # (B, h, T_k, d_k)
    v = split_heads(getattr(ref, value_projection)(value), heads)  # (B, h, T_k, d_k)
    heads = merge(attention(q, k, v, mask, **knobs))  # (B, T_q, d_model)
    return ref.w_o(heads) if output_projection else heads


def attend(
    attn: MultiHeadAttention, query, key, value, mask, *, heads_of_width_h=False, bare=False
):
    """A layer's attention sublayer: ``attn(...)[0]``; ``heads_of_width_h``: a module that splits
    into d_k heads of h features; ``bare``: a module that returns the output alone, so that ``[0]``
    took batch element 0."""
    if heads_of_width_h:
        out = multi_head_attention(  # (B, T_q, d_model)
            attn, query, key, value, mask, heads_of_width_h=True
        )
    else:
        out = attn(query, key, value, mask)[0]  # (B, T_q, d_model)
    # bare: (T_q, d_model), broadcast over the batch by the residual sum
    return out[0] if bare else out


def sublayer(x, sublayer, norm, pre: bool, residual: bool = True) -> torch.Tensor:
    """Post-LN ``norm(x + f(x))`` or pre-LN ``x + f(norm(x))``; ``residual=False`` forgets the
    ``x +``."""
    y = sublayer(norm(x) if pre else x)
    y = x + y if residual else y
    return y if pre else norm(y)
