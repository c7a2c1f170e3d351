"""Self-checks for the exercises and the debugging notebook: one declarative entry per check, in one table.

Each row of :data:`CHECKS` is an :class:`~transformer_lib.check_engine.Entry`: the reference, the inputs it draws
(:mod:`~transformer_lib.check_inputs`: several shapes, causal masks and masks that differ per sequence, with and
without gradients) and the known mistakes, each a hint and the wrong version of the code that earns it: a knob of
a version in :mod:`~transformer_lib.check_variants`, shared by every check that can meet the bug. A check of a class
compares with the library's module holding the student's weights (:mod:`~transformer_lib.check_references`).
The engine (:mod:`~transformer_lib.check_engine`) runs the student's code inside its guard, compares outputs and
gradients, and names the first discrepancy and the mistake that explains it.

A check returns a :class:`CheckResult` that prints as one friendly paragraph and never raises: an error in the
student's code is reported, and a stub that raises ``NotImplementedError`` is "not implemented yet".
"""
# The table reads best as a table: one mistake per line or two, so the formatter is kept out of this file.
# fmt: off

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from .. import (
    DecoderOnlyLM,
    causal_mask,
    combine_heads,
    count_parameters,
    noam_lr,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    smoothed_targets,
    split_heads,
)
from ..lm import expected_masking_shares, masking_shares
from . import inputs as draw
from . import references, variants
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, judge, output_and_weights

__all__ = [
    "CheckResult", "CHECKS", "check_attention", "check_split_heads", "check_combine_heads",
    "check_multi_head_attention", "check_positional_encoding", "check_layer_norm", "check_feed_forward",
    "check_encoder_layer", "check_decoder_layer", "check_cross_attention", "check_causal_mask",
    "check_causal_decoder", "check_shifted_targets", "check_label_smoothing", "check_noam_lr",
    "check_temperature_softmax", "check_shard_loss", "check_table3_row", "check_gpt_block", "check_mask_tokens",
    "check_lm_parameter_count",
]


# --- how each check calls the student's code and reads its result (the engine's default: ``code(*args)``, read
# as one ``output``); the inputs themselves are drawn in check_inputs --------------------------------------------


def _causal_mask_pick(result, case: Case) -> dict:
    """A causal mask may be ``(T_q, T_k)`` or ``(1, 1, T_q, T_k)`` (any leading axes of size 1); it must be bool."""
    size_q, size_k = case.args[0], case.args[-1]
    if isinstance(result, torch.Tensor) and result.dtype != torch.bool:
        raise Failure(f"the mask has dtype {result.dtype}; masks are bool, True = may attend. Hint: "
                       "`torch.ones(T, T, dtype=torch.bool).tril()`.")
    if isinstance(result, torch.Tensor) and result.shape[-2:] == (size_q, size_k) and result.numel() == size_q * size_k:
        result = result.reshape(size_q, size_k)
    return {"mask": result}


def _causal_decoder_run(model, case: Case) -> tuple:
    """The logits for the target and for the target changed after position t."""
    src, tgt, changed, _ = case.args
    return model(src, tgt), model(src, changed)


def _causal_decoder_verdict(logits: tuple, case: Case) -> None:
    """No reference: the logits of the first ``t + 1`` positions must not move when only later tokens change."""
    (before, after), (_, tgt, _, t) = logits, case.args
    if not all(isinstance(r, torch.Tensor) and r.dim() == 3 and r.shape[:2] == tgt.shape for r in logits):
        raise Failure(f"the model should return logits (B, T, vocab_size) with (B, T) = {tuple(tgt.shape)}, the "
                      f"target's shape; got {describe(before)}.")
    if not (before.isfinite().all() and after.isfinite().all()):
        raise Failure(f"{case.about}: the logits contain NaN or inf, so nothing can be read from them. Hint: a row "
                      "of scores that is all -inf (every key masked) gives NaN: check the masks' polarity.")
    moved = (after - before)[:, :t + 1].abs().amax(-1)  # (B, t + 1): the largest change of each position's logits
    if moved.max() > 1e-4:
        sequence, position = divmod(int(moved.argmax()), t + 1)
        raise Failure(f"{case.about}: the logits at position {position} of sequence {sequence} moved by "
                      f"{moved.max():.3g}; they must not. {CHECKS['check_causal_decoder'].hint}")


def _shifted_pick(result, case=None) -> dict:
    if not (isinstance(result, tuple) and len(result) == 2):
        raise Failure(f"return two tensors, `(decoder_input, decoder_target)`; got {describe(result)}.")
    return {"decoder input": result[0], "decoder target": result[1]}


def _number(part: str) -> Callable:
    """Reads a Python, NumPy (``np.float32`` is no ``float``) or one-element torch number as a tensor ``part``."""
    def pick(result, case=None) -> dict:
        if result is None:
            return {part: None}  # the engine says "a missing `return`?"
        try:
            if isinstance(result, bool | str | bytes):
                raise TypeError
            value = float(result.detach() if isinstance(result, torch.Tensor) else result)
        except (TypeError, ValueError, RuntimeError):
            raise Failure(f"your {part} should be one number, got {describe(result)} {result!r:.60}.") from None
        return {part: torch.tensor(value, dtype=torch.float64)}
    return pick


def _shard_run(loss, case: Case):
    """What DDP's gradient averaging amounts to: the mean over the processes of each one's loss."""
    shards, tokens, world_size = case.args
    losses = [loss(logits, target, tokens, world_size) for logits, target in shards]
    wrong = [value for value in losses if not (isinstance(value, torch.Tensor) and value.dim() == 0)]
    if wrong:
        raise Failure(f"return one scalar tensor per process (0-dim, as `loss.backward()` needs), got "
                       f"{describe(wrong[0])}.")
    return sum(losses) / world_size


def _mask_tokens_run(code, case: Case):
    return code(*case.args, torch.Generator().manual_seed(0))


class _ExpectedShares(dict):
    """The reference's result, already shares (a student's result is a pair of tensors)."""


def _mask_tokens_expected(tokens, mask_id, vocab_size, specials, rate, generator=None) -> _ExpectedShares:
    """The reference of ``check_mask_tokens``: the recipe's expected shares, not one random draw of it. A correct
    recipe that spends its random numbers in another order lands about one standard deviation from the
    expectation, but up to twice as far from another draw (on 100,000 tokens one draw of the <mask> share sits
    at 0.790, 0.010 from the 0.8 it aims at). A recipe whose replacements never repeat the original token is as
    right: it lands 0.1 / candidates (0.003 here) above the expectation, well inside the tolerance."""
    return _ExpectedShares(expected_masking_shares(vocab_size, mask_id, specials, rate))


def _mask_tokens_pick(result, case: Case) -> dict:
    """Proportions, not positions: two correct recipes draw different positions, but the same shares."""
    if isinstance(result, _ExpectedShares):
        return {part: torch.tensor(share) for part, share in result.items()}
    tokens, mask_id, _, specials, _ = case.args
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)):
        got = f"({', '.join(map(describe, result))})" if isinstance(result, tuple) else describe(result)
        raise Failure(f"return a tuple (inputs, targets) of two tensors shaped like tokens {tuple(tokens.shape)}; "
                      f"got {got}.")
    inputs, targets = result
    if inputs.shape != tokens.shape or targets.shape != tokens.shape:
        raise Failure(f"inputs {describe(inputs)} and targets {describe(targets)} must both have the shape of tokens "
                      f"{tuple(tokens.shape)}.")
    return {part: torch.tensor(share) for part, share in masking_shares(tokens, *result, mask_id, specials).items()}


def _own_row_verdict(answer, case: Case) -> str:
    """Notebook 10 has no reference: the row is trained for one seed and the outcome reported next to the
    prediction (:func:`transformer_lib.experiments.judge_own_row`)."""
    from .. import experiments  # on use: experiments needs train.py

    results = case.args[0] if case.args[0] is not None else experiments.read_results(experiments.COMMITTED_CSV)
    try:
        return experiments.judge_own_row(answer, results)
    except (TypeError, ValueError) as exc:
        raise Failure(f"{exc}.") from None
    except Exception as exc:  # the row itself failed to build or train (out of memory, say): a message, not a crash
        raise Failure(f"your row could not be trained ({type(exc).__name__}: {str(exc).strip()[:200]}). Hint: keep "
                      "the row close to the base model's sizes.") from None


def _lm_parameter_count(config) -> int:
    with torch.device("meta"):
        return count_parameters(DecoderOnlyLM(config))["total"]


# --- known mistakes shared by several checks: (hint, the knobs of a version in check_variants that make it) ---


_ATTENTION_BUGS = [  # (hint, the knobs of variants.attention that make the bug), for attention and multi-head attention
    ("you did not divide the scores by sqrt(d_k). Hint: `q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))`.",
     {"scale": lambda q, v: 1.0}),
    ("you divided the scores by d_k instead of sqrt(d_k). Hint: `/ math.sqrt(q.size(-1))`.",
     {"scale": lambda q, v: q.size(-1)}),
    ("the scores were divided by sqrt(d_v), the width of the values; the scaling belongs to the dot products of "
     "queries and keys. Hint: `/ math.sqrt(q.size(-1))`, d_k.", {"scale": lambda q, v: math.sqrt(v.size(-1))}),
    ("the mask was applied after the softmax: the masked weights are 0, but each row no longer sums to 1. Hint: "
     "mask the scores with float('-inf') before the softmax.", {"after_softmax": True}),
    ("softmax ran over the queries (dim=-2), so the columns sum to 1, not the rows. Hint: `scores.softmax(dim=-1)`, "
     "over the keys.", {"dim": -2}),
    ("the mask changed nothing. Hint: `masked_fill` returns a new tensor: write `scores = scores.masked_fill(~mask, "
     "float('-inf'))`, and check that you used the mask at all.", {"keep": torch.ones_like}),
    ("the mask has the opposite polarity: you blocked where it is True. In this course True means 'may attend' (as in "
     "F.scaled_dot_product_attention; nn.MultiheadAttention uses True = blocked). Hint: `scores.masked_fill(~mask, "
     "float('-inf'))`.", {"keep": lambda m: ~m}),
    ("masked scores were set to 0, but exp(0) = 1 still gives them weight. Hint: fill with float('-inf') so softmax "
     "gives exactly 0.", {"fill": 0.0}),
    ("every sequence got the first sequence's mask, but each row of a batch is padded differently. Hint: keep the "
     "mask's batch axis, (B, 1, 1, T_k), and let it broadcast over heads and queries.",
     {"keep": lambda m: m[:1].expand_as(m)}),
]
_LAYER_BUGS = [  # (hint, the knobs of variants.encoder_layer / variants.decoder_layer)
    ("post-LN and pre-LN are swapped. norm_first=False (the paper) normalises after the residual sum, `norm(x + "
     "sublayer(x))`; norm_first=True normalises the sublayer's input, `x + sublayer(norm(x))`.", {"swap": True}),
    ("the residual connection around the attention is missing. Hint: add the sublayer's input back, `x + ...`.",
     {"skip": {"self"}}),
    ("the residual connection around the cross-attention is missing. Hint: `x + cross_attn(...)`.",
     {"skip": {"cross"}}),
    ("the residual connection around the feed-forward network is missing. Hint: `x + feed_forward(...)`.",
     {"skip": {"feed-forward"}}),
]
_ENCODER_BUGS = [("the self-attention ignored its mask. Hint: pass it on: `self.self_attn(x, x, x, mask)`.",
                  {"use_mask": False})]
_DECODER_BUGS = [
    ("the two masks were swapped: the self-attention needs tgt_mask (causal, over the target) and the "
     "cross-attention memory_mask (the source's padding). Hint: `self.self_attn(x, x, x, tgt_mask)` and "
     "`self.cross_attn(x, memory, memory, memory_mask)`.", {"self_mask": "memory", "cross_mask": "tgt"}),
    ("the self-attention got memory_mask, the source's padding: over the target it needs tgt_mask, which is "
     "causal. Hint: `self.self_attn(x, x, x, tgt_mask)`.", {"self_mask": "memory"}),
    ("the cross-attention's queries came from the memory and its keys and values from x: the decoder asks (queries) "
     "and the encoder's memory answers (keys, values). Hint: `self.cross_attn(x, memory, memory, memory_mask)`.",
     {"queries_from_memory": True}),
    ("the self-attention ignored the target mask, so each position sees the future. Hint: `self.self_attn(x, x, x, "
     "tgt_mask)`.", {"self_mask": "none"}),
    ("the cross-attention got the wrong mask: it needs memory_mask, the source's padding (its keys come from the "
     "memory). Hint: `self.cross_attn(x, memory, memory, memory_mask)`.", {"cross_mask": "tgt"}),
    ("the cross-attention ignored memory_mask, so queries attend to the source's padding. Hint: `self.cross_attn(x, "
     "memory, memory, memory_mask)`.", {"cross_mask": "none"}),
]


def _bugs(version: Callable, bugs: list) -> list[Mistake]:
    return [Mistake(hint, partial(version, **knobs)) for hint, knobs in bugs]


# --- the table: every check, its reference, its inputs and its known mistakes -----------------------------

CHECKS: dict[str, Entry] = {
    "check_attention": Entry(
        "your attention", lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask), draw.attention,
        [*_bugs(variants.attention, _ATTENTION_BUGS),
         Mistake("you returned (weights, output): the output comes first, `return weights @ v, weights`.",
                 lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, mask)[::-1])],
        "Hint: scores = q k^T / sqrt(d_k); masked scores -inf; weights = softmax over the last axis; output = "
        "weights @ v.",
        "matches the library on 2 shapes, without a mask, with a causal mask and with padding that differs per "
        "sequence; gradients match too.", pick=output_and_weights),
    "check_split_heads": Entry(
        "your split_heads", split_heads, partial(draw.numbered, [((2, 3, 8), (2,)), ((1, 5, 12), (3,))]),
        [Mistake("the heads axis must come before T: you returned (B, T, h, d). Hint: `.transpose(1, 2)` after the "
                 "view.", lambda x, h: x.view(x.size(0), x.size(1), h, -1)),
         Mistake("the shape is right but tokens are scrambled: reshaping straight to (B, h, T, d) cuts *across* "
                 "tokens. Hint: `x.view(B, T, h, d).transpose(1, 2)`.",
                 lambda x, h: x.reshape(x.size(0), h, x.size(1), -1))],
        "Hint: head i must hold features i*d .. (i+1)*d - 1 of every token.",
        "splits (B, T, h*d) into (B, h, T, d) with every feature in its head."),
    "check_combine_heads": Entry(
        "your combine_heads", combine_heads, partial(draw.numbered, [((2, 2, 3, 4), ()), ((1, 3, 5, 2), ())]),
        [Mistake("the shape is right, but reshaping (B, h, T, d) straight to (B, T, h*d) glues *different tokens* into "
                 "one vector: a silent bug, the model still runs. Hint: `x.transpose(1, 2).reshape(B, T, h * d)`: "
                 "transpose back first.", lambda x: x.reshape(x.size(0), x.size(2), -1))],
        "Hint: combine must undo split_heads exactly.",
        "puts every head's features back next to each other, token by token."),
    "check_multi_head_attention": Entry(
        "your module", references.multi_head_attention, draw.multi_head_attention,
        [Mistake("scores were divided by sqrt(d_model); each head works in d_k = d_model / h dimensions. Hint: divide "
                 "by sqrt(d_k), the width of one head's queries.",
                 partial(variants.multi_head_attention, scale=lambda q, v: math.sqrt(q.size(1) * q.size(-1)))),
         Mistake("heads were merged with a reshape that did not transpose back, mixing tokens. Hint: "
                 "`out.transpose(1, 2).reshape(B, T, d_model)`.",
                 partial(variants.multi_head_attention, merge=lambda x: x.reshape(x.size(0), x.size(2), -1))),
         Mistake("the output projection w_o was not applied: after combining the heads, `self.w_o(...)` mixes what "
                 "the heads found.", partial(variants.multi_head_attention, output_projection=False)),
         Mistake("the keys were projected with w_q: queries, keys and values each have their own projection. Hint: "
                 "`self.w_k(key)`.", partial(variants.multi_head_attention, key_projection="w_q")),
         Mistake("the values were projected with w_k: queries, keys and values each have their own projection. "
                 "Hint: `self.w_v(value)`.", partial(variants.multi_head_attention, value_projection="w_k")),
         *_bugs(variants.multi_head_attention, _ATTENTION_BUGS)],
        "Hint: test split, attention and combine alone, each against its check.",
        "equals the library's MultiHeadAttention (with the same weights) for self-, causal, padded and "
        "cross-attention; gradients match and reach every parameter.", builds=True, pick=output_and_weights),
    "check_positional_encoding": Entry(
        "your encoding", lambda d_model, max_len: sinusoidal_encoding(d_model=d_model, max_len=max_len),
        draw.positional_tables,
        [Mistake("you swapped the arguments: the order is (d_model, max_len), like PositionalEncoding(d_model, "
                 "max_len). Hint: `def my_sinusoidal_encoding(d_model, max_len)`.",
                 lambda d, n: sinusoidal_encoding(d_model=n, max_len=d)),
         Mistake("the table is transposed: rows are positions, (max_len, d_model).",
                 lambda d, n: sinusoidal_encoding(d_model=d, max_len=n).T),
         Mistake("sin and cos are swapped: even features 2i get sin, odd ones 2i+1 get cos.", lambda d, n:
                 sinusoidal_encoding(d_model=d, max_len=n)[:, torch.arange(d).view(-1, 2).flip(1).flatten()])],
        "Hint: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...); the pair (2i, 2i+1) shares a "
        "frequency.", "the table matches the paper's formula, with the arguments (d_model, max_len)."),
    "check_positional_encoding_module": Entry(
        "your module", references.positional_encoding, partial(draw.floats, [(3, 6, 16), (2, 9, 16)], ((16, 50), {})),
        [Mistake("every sequence in the batch got a different encoding, and every position in a sequence the same one: "
                 "the encodings were added along the batch axis. Hint: the table must be (1, max_len, d_model) and "
                 "added as `x + pe[:, :x.size(1)]`.", lambda ref, x: x + ref.pe[0, :x.size(0), None])],
        "Hint: added to x, your module should give x + PE[:T], the same for every sequence.",
        "stores the table as a buffer and adds the same encodings to every sequence, along the positions.",
        builds=True),
    "check_layer_norm": Entry(
        "your LayerNorm", references.layer_norm, partial(draw.floats, [(3, 4, 8), (5, 8)], ((8,), {})),
        [Mistake("you used the unbiased variance (dividing by d_model - 1). Hint: `x.var(-1, unbiased=False, "
                 "keepdim=True)`, as nn.LayerNorm does.", lambda ref, x: (x - x.mean(-1, keepdim=True)) / torch.sqrt(
                     x.var(-1, keepdim=True) + ref.eps) * ref.weight + ref.bias),
         Mistake("the gain and shift are not applied. Hint: `... * self.weight + self.bias`.",
                 lambda ref, x: F.layer_norm(x, x.shape[-1:], eps=ref.eps)),
         Mistake("you normalised over the tokens, not over each token's features. Hint: mean and variance over dim=-1 "
                 "with keepdim=True.", lambda ref, x: (x - x.mean(-2, keepdim=True)) / torch.sqrt(
                     x.var(-2, unbiased=False, keepdim=True) + ref.eps) * ref.weight + ref.bias)],
        "Hint: (x - mean) / sqrt(var + eps) * gain + shift, over the last axis.",
        "normalises each token over its features like nn.LayerNorm; gradients match.", builds=True),
    "check_feed_forward": Entry(
        "your feed-forward", references.feed_forward, partial(draw.floats, [(2, 5, 8), (7, 8)], ((8, 32), {})),
        [Mistake("without the ReLU, two linear layers are just one linear layer. Hint: torch.relu between.",
                 lambda ref, x: ref.linear2(ref.linear1(x)))],
        "Hint: linear2(relu(linear1(x))).", "two linear layers around a ReLU, the same at every position.",
        builds=True),
    "check_encoder_layer": Entry(
        "your encoder layer", references.encoder_layer, partial(draw.layers, decoder=False),
        _bugs(variants.encoder_layer, _LAYER_BUGS + _ENCODER_BUGS),
        "Hint: self-attention then feed-forward, each `norm(x + sublayer(x))` (or `x + sublayer(norm(x))` with "
        "norm_first=True).", "equals tl.EncoderLayer with the same weights, post-LN and pre-LN, with per-sequence "
        "padding; gradients match.", builds=True),
    "check_decoder_layer": Entry(
        "your decoder layer", references.decoder_layer, partial(draw.layers, decoder=True),
        _bugs(variants.decoder_layer, _LAYER_BUGS + _DECODER_BUGS),
        "Hint: masked self-attention, cross-attention to the memory, feed-forward; each in its residual sublayer.",
        "equals tl.DecoderLayer with the same weights, post-LN and pre-LN, with causal and per-sequence masks; "
        "gradients match.", builds=True),
    "check_cross_attention": Entry(
        "your cross-attention", lambda attn, x, memory, mask: attn(x, memory, memory, mask), draw.cross_attention,
        [Mistake("the queries come from the decoder's x, the keys and values from the encoder's memory. Hint: "
                 "`attn(x, memory, memory, memory_mask)`.", lambda attn, x, m, mask: attn(m, x, x, mask)),
         Mistake("memory_mask was not used: queries attend to the source's padding. Hint: pass it as the mask.",
                 lambda attn, x, m, mask: attn(x, m, m)),
         Mistake("the mask has the opposite polarity: in this course True means 'may attend'.",
                 lambda attn, x, m, mask: attn(x, m, m, ~mask)),
         Mistake("every sequence got the first sequence's memory mask: keep its batch axis (B, 1, 1, T_src).",
                 lambda attn, x, m, mask: attn(x, m, m, mask[:1]))],
        "Hint: `attn(x, memory, memory, memory_mask)[0]`.",
        "queries from the decoder, keys and values from the memory, the source's padding masked.",
        pick=output_and_weights),
    "check_causal_mask": Entry(
        "your causal mask", lambda size: causal_mask(size)[0, 0], partial(draw.causal_masks, with_cache=False),
        [Mistake("the mask is inverted: True should mark what a query *may* see (j <= i).",
                 lambda t: ~causal_mask(t)[0, 0]),
         Mistake("this lets each token see the future and not the past: use `.tril()`, not `.triu()`.",
                 lambda t: torch.ones(t, t, dtype=torch.bool).triu()),
         Mistake("a token must be allowed to see itself: the diagonal belongs to the mask.",
                 lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1))],
        "Hint: query i may attend to keys j <= i (1 = may attend).", "lets each position see itself and the past only.",
        pick=_causal_mask_pick),
    "check_causal_mask_cached": Entry(
        "your causal mask", lambda size_q, size_k: causal_mask(size_q, size_k)[0, 0],
        partial(draw.causal_masks, with_cache=True),
        [Mistake("for T_q new queries among T_k positions, query i is position i + T_k - T_q: it sees every cached "
                 "token. Hint: `.tril(diagonal=T_k - T_q)`.", lambda q, k: torch.ones(q, k, dtype=torch.bool).tril()),
         Mistake("the mask is inverted: True should mark what a query *may* see.",
                 lambda q, k: ~causal_mask(q, k)[0, 0])],
        "Hint: query i is position i + T_k - T_q and may see keys up to there.",
        "lets each new query see the cache, itself and the past only.", pick=_causal_mask_pick),
    "check_causal_decoder": Entry(  # no reference: no position's logits may move when only later tokens change
        "your model", None, draw.target_changes, [],
        "The decoder sees the future, so it trains to a near-zero loss by copying the next token and then generates "
        "garbage. Hint: give the decoder's self-attention the causal mask, `tl.causal_mask(T) & padding_mask`.",
        "the logits at each position depend only on the target tokens up to it.", run=_causal_decoder_run,
        verdict=_causal_decoder_verdict),
    "check_shifted_targets": Entry(
        "your shift", lambda tgt: (tgt[:, :-1], tgt[:, 1:]), draw.target_rows,
        [Mistake("the targets are not shifted: the decoder would be asked for the token it already sees, learn to copy "
                 "its input to a near-zero loss, and generate garbage. Hint: input `tgt[:, :-1]`, target `tgt[:, 1:]`.",
                 lambda tgt: (tgt, tgt)),
         Mistake("the targets are not shifted (both are `tgt[:, :-1]`). Hint: the target is the input moved one step "
                 "left, `tgt[:, 1:]`.", lambda tgt: (tgt[:, :-1], tgt[:, :-1])),
         Mistake("input and target are swapped. Hint: the decoder reads `tgt[:, :-1]` (starting with <bos>) and "
                 "predicts `tgt[:, 1:]` (ending with <eos>).", lambda tgt: (tgt[:, 1:], tgt[:, :-1]))],
        "Hint: `(tgt[:, :-1], tgt[:, 1:])`.",
        "the decoder reads <bos> y and predicts y <eos>: each position predicts the next token.", pick=_shifted_pick),
    "check_label_smoothing": Entry(
        "your label smoothing", smoothed_targets, draw.smoothing_targets,
        [Mistake("a row whose target is padding should be all zero, so it adds nothing to the loss.",
                 partial(variants.label_smoothing, pad_rows=False)),
         Mistake("<pad> got probability; it is never a correct answer. Hint: set column pad_id to 0 and spread eps "
                 "over V - 2 tokens.", partial(variants.label_smoothing, others=1, pad_column=False)),
         Mistake("eps was spread over V - 1 tokens; <pad> gets none, so it goes to V - 2: eps / (V - 2) each.",
                 partial(variants.label_smoothing, others=1)),
         Mistake("padding was taken to be id 0; use the `pad_id` argument.",
                 lambda target, v, eps, pad_id: variants.label_smoothing(target, v, eps, 0))],
        "Hint: 1 - eps on the target, eps / (V - 2) on every other token but <pad>, rows of padding all zero.",
        "1 - eps on the target, eps spread over the rest, nothing on padding.", atol=1e-6),
    "check_noam_lr": Entry(
        "your schedule", noam_lr, draw.schedule_steps,
        [Mistake("the warm-up rises too fast: it is step * warmup**-1.5.",
                 lambda s, d, w: d**-0.5 * min(s**-0.5, s / w)),
         Mistake("the factor d_model**-0.5 is missing.", lambda s, d, w: min(s**-0.5, s * w**-1.5))],
        "Hint: d_model**-0.5 * min(step**-0.5, step * warmup**-1.5).",
        "rises linearly during warm-up, peaks at step = warmup, then decays as 1/sqrt(step).",
        pick=_number("learning rate"), atol=0.0, rtol=1e-6),
    "check_temperature_softmax": Entry(
        "your function", lambda logits, t: (logits / t).softmax(-1),
        partial(draw.floats, [(2, 5), (2, 5), (3, 4)], extra=(0.1, 1.0, 5.0)),
        [Mistake("you multiplied by the temperature; divide: a high temperature should flatten.",
                 lambda logits, t: (logits * t).softmax(-1)),
         Mistake("softmax ran over the wrong axis. Hint: `.softmax(dim=-1)`, over the vocabulary.",
                 lambda logits, t: (logits / t).softmax(0))],
        "Hint: `(logits / temperature).softmax(dim=-1)`.", "low temperatures sharpen, high ones flatten."),
    "check_shard_loss": Entry(
        "your function", variants.shard_loss, draw.shards,
        [Mistake("you averaged over each process's own tokens. With unequal shards the average of those means is not "
                 "the mean over all tokens. Hint: sum over this shard's non-pad tokens and divide by `global_tokens`.",
                 lambda logits, target, n, w: F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0)),
         Mistake("the processes' average is world_size times too small: DDP divides the summed gradients by "
                 "`world_size`, so multiply your loss by `world_size` to undo it.",
                 partial(variants.shard_loss, scale=False)),
         Mistake("padding was counted in the loss. Hint: `ignore_index=0`.",
                 partial(variants.shard_loss, ignore=-100))],
        "Hint: cross-entropy summed over this shard's non-pad tokens (`reduction='sum', ignore_index=0`), times "
        "`world_size`, divided by `global_tokens`.",
        "the processes' average equals the big batch's mean over all tokens, however unequal.", run=_shard_run,
        pick=lambda result, case=None: {"loss": result}),
    "check_gpt_block": Entry(
        "your GPT block", lambda layer, x: layer(x, causal_mask(x.size(1))), draw.gpt_block,
        [Mistake("no position may read a later one: pass the causal mask, `layer(x, tl.causal_mask(T))`.",
                 lambda layer, x: layer(x)),
         Mistake("the mask is inverted: True marks what a query *may* see (keys j <= i), so use the mask as it is.",
                 lambda layer, x: layer(x, ~causal_mask(x.size(1)))),
         Mistake("each position sees the future and not the past: the causal mask is lower-triangular (`.tril()`).",
                 lambda layer, x: layer(x, causal_mask(x.size(1)).transpose(-1, -2)))],
        "Hint: `layer(x, tl.causal_mask(x.size(1)))`.",
        "the layer now lets each position read only itself and earlier ones: a GPT block."),
    "check_mask_tokens": Entry(
        "your masking", _mask_tokens_expected, draw.token_batches,
        [Mistake("every picked position became mask_id; BERT's recipe keeps 10% unchanged and gives 10% a random "
                 "token, because <mask> never appears when the model is used.",
                 partial(variants.mask_tokens, mistake="all masked")),
         Mistake("the targets keep every token, so the loss would score positions the model can see (and copy). Hint: "
                 "`lm.IGNORE_INDEX` at positions that were not picked.",
                 partial(variants.mask_tokens, mistake="targets everywhere")),
         Mistake("the positions not picked have target 0, which is a token id: the loss would score them. Hint: "
                 "`lm.IGNORE_INDEX` (-100), which cross-entropy skips.",
                 partial(variants.mask_tokens, mistake="ignored as 0")),
         Mistake("special_ids were ignored: special tokens (padding) were picked, or drawn as random replacements. "
                 "Only positions whose token is not special may be picked, and a replacement is never special nor "
                 "mask_id.",
                 partial(variants.mask_tokens, mistake="no specials"))],
        "Hint: pick with `torch.rand(shape, generator=generator) < rate` where the token is not special; then split "
        "the picked ones 80/10/10 with a second uniform draw.",
        "about 15% picked, 80% of them <mask>, 10% random, 10% unchanged, and only they are scored.",
        # atol: about 4 standard deviations of the <mask> share at rate 0.15 (13,500 picked positions)
        run=_mask_tokens_run, pick=_mask_tokens_pick, atol=0.015, rtol=0.0),
    "check_lm_parameter_count": Entry(
        "your count", _lm_parameter_count, draw.lm_configs,
        [Mistake("the output projection was counted as a matrix of its own; it is the token embedding (tied).",
                 partial(variants.lm_parameter_count, tied=False)),
         Mistake("the biases are missing: each of the 4 attention projections has d_model, the feed-forward d_ff + "
                 "d_model.", partial(variants.lm_parameter_count, biases=False)),
         Mistake("learned positions add max_len x d_model parameters (sinusoids add none).",
                 partial(variants.lm_parameter_count, positions=False)),
         Mistake("each block has two LayerNorms of 2 x d_model (gain and shift).",
                 partial(variants.lm_parameter_count, norms=False)),
         Mistake("a pre-LN stack (norm_first=True) ends with a final LayerNorm: 2 x d_model more.",
                 partial(variants.lm_parameter_count, final_norm=False))],
        "Hint: embedding V x d_model, positions (learned) max_len x d_model, per block 4 (d_model^2 + d_model) + "
        "2 d_model d_ff + d_ff + d_model + 4 d_model, and 2 d_model for the final norm of a pre-LN stack.",
        "every parameter accounted for.", pick=_number("parameter count"), atol=0.0, rtol=0.0),
    "check_table3_row": Entry(  # no reference: the row is trained and the outcome set next to the prediction
        "your my_table3_row()", None, draw.own_row, run=lambda my_row, case: my_row(), verdict=_own_row_verdict),
}


# --- the checks the notebooks call -----------------------------------------------------------------------


def _judge(key: str, student) -> CheckResult:
    """The check ``CHECKS[key]``; a variant's key (``_module``, ``_cached``) reports under the check's name."""
    return judge(key.removesuffix("_module").removesuffix("_cached"), CHECKS[key], student)


def _check(entry: str, form: str) -> Callable[[object], CheckResult]:
    """The public check for ``CHECKS[entry]``; ``form`` is the call form the student's code must have."""
    def check(code) -> CheckResult:
        return _judge(entry, code)

    check.__name__ = check.__qualname__ = entry
    check.__doc__ = f"Check {form}. Returns a CheckResult: truthy when it passed; prints a friendly message."
    return check


check_attention = _check("check_attention", "``attention(q, k, v, mask=None) -> (output, weights)`` or ``output``")
check_split_heads = _check("check_split_heads", "``split(x (B, T, h * d), num_heads) -> (B, h, T, d)``")
check_combine_heads = _check("check_combine_heads", "``combine(x (B, h, T, d)) -> (B, T, h * d)``")
check_multi_head_attention = _check("check_multi_head_attention", "the class ``MyMHA(d_model, num_heads)``: "
                                    "``w_q, w_k, w_v, w_o``, ``forward(query, key, value, mask=None)``")
check_layer_norm = _check("check_layer_norm", "the class ``MyLayerNorm(d_model)``, with a learned gain and shift")
check_feed_forward = _check("check_feed_forward", "the class ``MyFeedForward(d_model, d_ff)``: ``linear1, linear2``")
check_encoder_layer = _check("check_encoder_layer", "the class ``MyEncoderLayer(d_model, num_heads, d_ff, "
                             "norm_first=False)`` with ``forward(x, mask=None)``")
check_decoder_layer = _check("check_decoder_layer", "the class ``MyDecoderLayer(d_model, num_heads, d_ff, "
                             "norm_first=False)`` with ``forward(x, memory, tgt_mask=None, memory_mask=None)``")
check_cross_attention = _check("check_cross_attention", "``cross_attention(attn, x, memory, memory_mask) -> output``")
check_shifted_targets = _check("check_shifted_targets", "``shift(tgt (B, T)) -> (decoder_input, decoder_target)``")
check_label_smoothing = _check("check_label_smoothing", "``make_targets(target, vocab_size, eps, pad_id) -> (N, V)``")
check_noam_lr = _check("check_noam_lr", "``schedule(step, d_model, warmup) -> float``, steps counted from 1")
check_temperature_softmax = _check("check_temperature_softmax", "``softmax_with_temperature(logits, temperature)``")
check_gpt_block = _check("check_gpt_block", "``gpt_block(layer, x (B, T, d_model)) -> (B, T, d_model)``")
check_mask_tokens = _check("check_mask_tokens", "``mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, "
                           "generator) -> (inputs, targets)``")
check_lm_parameter_count = _check("check_lm_parameter_count", "``parameter_count(config: lm.LMConfig) -> int``")
check_shard_loss = _check("check_shard_loss", "``shard_loss(logits, target, global_tokens, world_size) -> scalar``, "
                          "the loss one data-parallel process backpropagates")


def check_positional_encoding(encoding) -> CheckResult:
    """A function ``encoding(d_model, max_len) -> (max_len, d_model)`` table, or a class ``encoding(d_model, max_len)``
    that stores the table as a buffer and whose ``forward(x (B, T, d_model))`` adds it to ``x``."""
    module = isinstance(encoding, type | nn.Module)  # an instance goes to the module entry, which says "the class"
    return _judge("check_positional_encoding_module" if module else "check_positional_encoding", encoding)


def check_causal_mask(make_mask: Callable, with_cache: bool = False) -> CheckResult:
    """``make_mask(T) -> bool (T, T)``, or with leading axes of size 1 such as ``(1, 1, T, T)``, True where query i
    may see key j <= i; with_cache=True: ``make_mask(T_q, T_k)`` for the last ``T_q`` of ``T_k`` positions (KV
    cache): query i sits at ``i + T_k - T_q``."""
    return _judge("check_causal_mask_cached" if with_cache else "check_causal_mask", make_mask)


def check_causal_decoder(model) -> CheckResult:
    """``model(src (B, S), tgt (B, T)) -> logits (B, T, V)`` (token ids 1-3 are used): changing target tokens after
    position t must leave the logits at positions <= t unchanged. Runs the model in eval mode, then restores it."""
    if isinstance(model, type):
        return CheckResult("check_causal_decoder", False, "❌ check_causal_decoder: pass a model, not its class: "
                           "`check_causal_decoder(MyModel(config))`.")

    def in_eval_mode(src, tgt):  # run by the engine inside its guard: a broken model cannot make the check raise
        modes = {module: module.training for module in model.modules()} if isinstance(model, nn.Module) else {}
        try:
            with torch.no_grad():  # no gradients needed; a model built under inference_mode runs too
                return model.eval()(src, tgt) if modes else model(src, tgt)
        finally:
            for module, training in modes.items():
                module.train(training)

    return _judge("check_causal_decoder", in_eval_mode)


def check_table3_row(my_row: Callable, results=None) -> CheckResult:
    """Notebook 10: ``my_row() -> (row, prediction)``, a Table 3 row of the learner's own and a prediction of its
    dev perplexity next to the base row's ("lower", "same", "higher" or a number). It has no reference to compare
    with: it trains the row for one seed (about 10 s of CPU time) and reports the outcome next to the prediction.
    ``results``: the committed runs (default: the repository's ``results/table3.csv``)."""
    return judge("check_table3_row", replace(CHECKS["check_table3_row"], cases=partial(draw.own_row, results)), my_row)
