"""The known mistakes' code: a version of each block with a knob per typical bug (every knob at its
default gives the right code).

An entry names a mistake by its hint and knobs, e.g. ``partial(variants.attention, fill=0.0)``, so
one version serves every check that meets the bug. A module's version takes the reference module
(holding the student's weights) first, then the module's own arguments.
"""

import math

import torch
import torch.nn.functional as F

from ...model.attention import MultiHeadAttention, combine_heads, split_heads
from ...model.decoder import DecoderLayer
from ...model.encoder import EncoderLayer
from ...model.masks import causal_mask
from ...training import lm_objectives as lm


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
    # (..., T_q, T_k)
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if scale is None else scale(q, v))
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


def _attend(
    attn: MultiHeadAttention, query, key, value, mask, *, heads_of_width_h=False, bare=False
):
    """A layer's attention sublayer: ``attn(...)[0]``; ``heads_of_width_h``: a module that splits
    into d_k heads of h features; ``bare``: a module that returns the output alone, so that ``[0]``
    took batch element 0."""
    if heads_of_width_h:
        # (B, T_q, d_model)
        out = multi_head_attention(attn, query, key, value, mask, heads_of_width_h=True)
    else:
        out = attn(query, key, value, mask)[0]  # (B, T_q, d_model)
    # bare: (T_q, d_model), broadcast over the batch by the residual sum
    return out[0] if bare else out


def _sublayer(x, sublayer, norm, pre: bool, residual: bool = True) -> torch.Tensor:
    """Post-LN ``norm(x + f(x))`` or pre-LN ``x + f(norm(x))``; ``residual=False`` forgets the ``x
    +``."""
    y = sublayer(norm(x) if pre else x)
    y = x + y if residual else y
    return y if pre else norm(y)


def encoder_layer(
    ref: EncoderLayer,
    x,
    mask=None,
    *,
    swap=False,
    skip=(),
    use_mask=True,
    one_norm=False,
    **attention,
) -> torch.Tensor:
    """``skip``: the sublayers ("self", "feed-forward") whose residual ``x +`` is forgotten;
    ``one_norm``: the attention's LayerNorm used in both sublayers; ``attention``: the knobs of
    :func:`_attend`."""
    pre = ref.residual_attn.norm_first != swap
    x = _sublayer(
        x,
        lambda y: _attend(ref.self_attn, y, y, y, mask if use_mask else None, **attention),
        ref.residual_attn.norm,
        pre,
        "self" not in skip,
    )
    norm = ref.residual_attn.norm if one_norm else ref.residual_ff.norm
    return _sublayer(x, ref.feed_forward, norm, pre, "feed-forward" not in skip)


def decoder_layer(
    ref: DecoderLayer,
    x,
    memory,
    tgt_mask=None,
    memory_mask=None,
    *,
    swap=False,
    skip=(),
    self_mask="tgt",
    cross_mask="memory",
    queries_from_memory=False,
    **attention,
) -> torch.Tensor:
    """``skip``: the sublayers ("self", "cross", "feed-forward") whose residual ``x +`` is
    forgotten; ``self_mask`` and ``cross_mask``: which mask each attention gets ("tgt", "memory",
    "none", or "causal": a causal mask of the layer's own, without the target's padding);
    ``attention``: the knobs of :func:`_attend`."""
    masks = {"tgt": tgt_mask, "memory": memory_mask, "none": None, "causal": causal_mask(x.size(1))}
    pre = ref.residual_self.norm_first != swap
    x = _sublayer(
        x,
        lambda y: _attend(ref.self_attn, y, y, y, masks[self_mask], **attention),
        ref.residual_self.norm,
        pre,
        "self" not in skip,
    )
    cross = (
        (lambda y: _attend(ref.cross_attn, memory, y, y, masks[cross_mask], **attention))
        if (queries_from_memory)
        else (lambda y: _attend(ref.cross_attn, y, memory, memory, masks[cross_mask], **attention))
    )
    x = _sublayer(x, cross, ref.residual_cross.norm, pre, "cross" not in skip)
    return _sublayer(x, ref.feed_forward, ref.residual_ff.norm, pre, "feed-forward" not in skip)


def label_smoothing(
    target, vocab_size, eps, pad_id, *, others=2, pad_column=True, pad_rows=True
) -> torch.Tensor:
    """``eps`` spread over ``V - others`` tokens; ``pad_column``: <pad> gets none; ``pad_rows``:
    padding rows zero."""
    dist = torch.full((target.numel(), vocab_size), eps / (vocab_size - others))  # (N, V)
    if pad_column:
        dist[:, pad_id] = 0.0
    dist.scatter_(1, target.reshape(-1, 1), 1.0 - eps)
    if pad_rows:
        dist[target.reshape(-1) == pad_id] = 0.0
    return dist


def shard_loss(logits, target, tokens, world_size, *, scale=True, ignore=0) -> torch.Tensor:
    """One process's loss: summed over its tokens but ``ignore``, over all ``tokens``, times
    ``world_size``."""
    total = F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=ignore, reduction="sum"
    )
    return total * (world_size if scale else 1) / tokens


def mask_tokens(tokens, mask_id, vocab_size, specials, rate, generator, *, mistake: str = ""):
    """The library's recipe, then the ``mistake``: "no specials", "all masked", "ignored as 0",
    "targets everywhere"."""
    inputs, targets = lm.mask_tokens(
        tokens, mask_id, vocab_size, () if mistake == "no specials" else specials, rate, generator
    )
    if mistake == "all masked":
        inputs = torch.where(targets != lm.IGNORE_INDEX, mask_id, tokens)
    if mistake == "ignored as 0":
        targets = torch.where(targets != lm.IGNORE_INDEX, targets, 0)
    return inputs, tokens.clone() if mistake == "targets everywhere" else targets


def lm_parameter_count(
    config, *, biases=True, tied=True, positions=True, norms=True, final_norm=True
) -> int:
    """The parameter count of a decoder-only LM, written out, with a knob per forgotten piece."""
    d, f = config.d_model, config.d_ff
    block = (
        4 * d * d
        + (4 * d if biases else 0)
        + 2 * d * f
        + ((f + d) if biases else 0)
        + (4 * d if norms else 0)
    )
    total = config.vocab_size * d * (1 if tied else 2) + config.num_layers * block
    total += config.max_len * d if positions and config.positional == "learned" else 0
    return total + (2 * d if final_norm and config.norm_first else 0)
