"""Notebook 11 · GPT and BERT: the checks of a GPT block, BERT's masking recipe and a GPT's parameter count.

The masking recipe is random: its check compares proportions (the shares of <mask>, random and kept tokens
among the picked ones) with the recipe's expectation, not positions with one draw.
"""
# The entries read best as a table: one mistake per line or two, so the formatter is kept out of this file.
# fmt: off

from collections.abc import Callable
from functools import partial

import torch

from .. import DecoderOnlyLM, causal_mask, count_parameters
from ..lm import expected_masking_shares, masking_shares
from . import inputs as draw
from . import variants
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, judge, one_number
from .registry import Exercise

__all__ = ["check_gpt_block", "check_mask_tokens", "check_lm_parameter_count"]


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


def _lm_parameter_count(config) -> int:
    with torch.device("meta"):
        return count_parameters(DecoderOnlyLM(config))["total"]


# --- the entries: each check's reference, the inputs it draws, its known mistakes ---------------------------------

GPT_BLOCK = Entry(
    "check_gpt_block", "your GPT block", lambda layer, x: layer(x, causal_mask(x.size(1))), draw.gpt_block,
    [Mistake("no position may read a later one: pass the causal mask, `layer(x, tl.causal_mask(T))`.",
             lambda layer, x: layer(x)),
     Mistake("the mask is inverted: True marks what a query *may* see (keys j <= i), so use the mask as it is.",
             lambda layer, x: layer(x, ~causal_mask(x.size(1)))),
     Mistake("each position sees the future and not the past: the causal mask is lower-triangular (`.tril()`).",
             lambda layer, x: layer(x, causal_mask(x.size(1)).transpose(-1, -2)))],
    "Hint: `layer(x, tl.causal_mask(x.size(1)))`.",
    "the layer now lets each position read only itself and earlier ones: a GPT block.")


MASK_TOKENS = Entry(
    "check_mask_tokens", "your masking", _mask_tokens_expected, draw.token_batches,
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
    run=_mask_tokens_run, pick=_mask_tokens_pick, atol=0.015, rtol=0.0)


LM_PARAMETER_COUNT = Entry(
    "check_lm_parameter_count", "your count", _lm_parameter_count, draw.lm_configs,
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
    "every parameter accounted for.", pick=one_number("parameter count"), atol=0.0, rtol=0.0)

ENTRIES = (GPT_BLOCK, MASK_TOKENS, LM_PARAMETER_COUNT)


# --- the checks the notebooks call ----------------------------------------------------------------------------

def check_gpt_block(gpt_block: Callable) -> CheckResult:
    """Check ``gpt_block(layer, x (B, T, d_model)) -> (B, T, d_model)``: a ``tl.EncoderLayer`` run with the causal
    mask, so that each position reads only itself and earlier ones.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(GPT_BLOCK, gpt_block)


def check_mask_tokens(mask_tokens: Callable) -> CheckResult:
    """Check ``mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator) -> (inputs, targets)``,
    BERT's recipe: about ``rate`` of the non-special tokens picked, 80% of them <mask>, 10% random, 10% unchanged,
    and only they scored (``lm.IGNORE_INDEX`` elsewhere).
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(MASK_TOKENS, mask_tokens)


def check_lm_parameter_count(parameter_count: Callable) -> CheckResult:
    """Check ``parameter_count(config: lm.LMConfig) -> int`` against the parameters of ``tl.DecoderOnlyLM(config)``,
    for learned and sinusoidal positions, post-LN and pre-LN, up to GPT-2 small.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(LM_PARAMETER_COUNT, parameter_count)


# --- the exercises ------------------------------------------------------------------------------------------

EXERCISES = [
    Exercise("11", "1", "my_gpt_block", "an encoder layer as a GPT block: the causal mask", "check_gpt_block"),
    Exercise("11", "2", "my_mask_tokens", "BERT's 80/10/10 masking recipe", "check_mask_tokens"),
    Exercise("11", "3", "my_parameter_count", "a GPT's parameter count from its config", "check_lm_parameter_count"),
]
