"""Notebook 08 · debugging attention: the checks of a whole model's causality and of the shifted
targets.

The notebook's bugs are caught by the earlier notebooks' checks too (attention, heads, masks,
positions); its two exercises are graded by ``check_causal_mask`` (:mod:`.nb01_attention`) and
``check_split_heads`` (:mod:`.nb02_multi_head_attention`). ``check_causal_decoder`` has no reference
to compare with: it changes the target after position t and asks that no logits up to t move.
"""

from collections.abc import Callable

import torch
from torch import nn

from . import inputs as draw
from .engine import Case, CheckResult, Entry, Failure, Mistake, describe, is_instance, judge
from .registry import Exercise, Question

__all__ = ["check_causal_decoder", "check_shifted_targets"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _target_change_cases() -> list[Case]:
    """Pairs of target batches that agree up to position t and differ after it (source and target
    ids 1-3)."""
    gen, cases = draw.generator(), []
    for t in (0, 2):
        src, tgt = (
            torch.randint(1, 4, (2, 6), generator=gen),
            torch.randint(1, 4, (2, 5), generator=gen),
        )
        changed = tgt.clone()
        changed[:, t + 1 :] = torch.randint(1, 4, changed[:, t + 1 :].shape, generator=gen)
        cases.append(
            Case((src, tgt, changed, t), f"changing target tokens after position {t} (ids 1-3)")
        )
    return cases


def _target_row_cases() -> list[Case]:
    """Rows ``<bos> y <eos> <pad>...`` of lengths 6, then 4 and 9, so that slices written with the
    numbers of one length (``t[:, 0:5]``) show."""
    return [
        Case(
            (torch.tensor([[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0], [1, 4, 4, 9, 3, 2]]),),
            "for rows `<bos> y <eos> <pad>...` (bos=1, eos=2, pad=0)",
        ),
        Case((torch.tensor([[1, 5, 2, 0], [1, 6, 7, 2]]),), "for rows of length 4"),
        Case(
            (torch.tensor([[1, 5, 6, 7, 8, 9, 4, 3, 2], [1, 3, 2, 0, 0, 0, 0, 0, 0]]),),
            "for rows of length 9",
        ),
    ]


def _causal_decoder_run(model, case: Case) -> tuple:
    """The logits for the target and for the target changed after position t."""
    src, tgt, changed, _ = case.args
    return model(src, tgt), model(src, changed)


def _causal_decoder_verdict(logits: tuple, case: Case) -> None:
    """No reference: the logits of the first ``t + 1`` positions must not move when only later
    tokens change."""
    (before, after), (_, tgt, _, t) = logits, case.args
    if not all(
        isinstance(r, torch.Tensor) and r.dim() == 3 and r.shape[:2] == tgt.shape for r in logits
    ):
        raise Failure(
            "the model should return logits (B, T, vocab_size) with (B, T) = "
            f"{tuple(tgt.shape)}, the target's shape; got {describe(before)}."
        )
    if not (before.isfinite().all() and after.isfinite().all()):
        raise Failure(
            f"{case.about}: the logits contain NaN or inf, so nothing can be read from "
            "them. Hint: a row of scores that is all -inf (every key masked) gives NaN: "
            "check the masks' polarity."
        )
    # the largest change of each position's logits
    moved = (after - before)[:, : t + 1].abs().amax(-1)  # (B, t + 1)
    if moved.max() > 1e-4:
        sequence, position = divmod(int(moved.argmax()), t + 1)
        raise Failure(
            f"{case.about}: the logits at position {position} of sequence {sequence} "
            f"moved by {moved.max():.3g}; they must not. {CAUSAL_DECODER.hint}"
        )


def _shifted_pick(result, case=None) -> dict:
    """Any pair, tuple or list, of two integer tensors: token ids stay integers (cross-entropy's
    targets must)."""
    if not (isinstance(result, tuple | list) and len(result) == 2):
        raise Failure(
            f"return two tensors, `(decoder_input, decoder_target)`; got {describe(result)}."
        )
    parts = {"decoder input": result[0], "decoder target": result[1]}
    for part, value in parts.items():
        if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
            raise Failure(
                f"your {part} has dtype {value.dtype}: token ids are integers "
                "(torch.long); `nn.Embedding` and cross-entropy's targets refuse "
                "floats. Hint: slice the ids as they are, `tgt[:, :-1]` and `tgt[:, "
                "1:]`, without `.float()` or arithmetic that makes floats."
            )
    return parts


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

CAUSAL_DECODER = Entry(  # no reference: no position's logits may move when only later tokens change
    "check_causal_decoder",
    "your model",
    None,
    _target_change_cases,
    [],
    "The decoder sees the future, so it trains to a near-zero loss by copying the next token and "
    "then generates garbage. Hint: give the decoder's self-attention the causal mask, "
    "`tl.causal_mask(T) & padding_mask`.",
    "the logits at each position depend only on the target tokens up to it.",
    run=_causal_decoder_run,
    verdict=_causal_decoder_verdict,
)


SHIFTED_TARGETS = Entry(
    "check_shifted_targets",
    "your shift",
    lambda tgt: (tgt[:, :-1], tgt[:, 1:]),
    _target_row_cases,
    [
        Mistake(
            "the targets are not shifted: the decoder would be asked for the token it already "
            "sees, learn to copy its input to a near-zero loss, and generate garbage. Hint: "
            "input `tgt[:, :-1]`, target `tgt[:, 1:]`.",
            lambda tgt: (tgt, tgt),
        ),
        Mistake(
            "the targets are not shifted (both are `tgt[:, :-1]`). Hint: the target is the input "
            "moved one step left, `tgt[:, 1:]`.",
            lambda tgt: (tgt[:, :-1], tgt[:, :-1]),
        ),
        Mistake(
            "input and target are swapped. Hint: the decoder reads `tgt[:, :-1]` (starting with "
            "<bos>) and predicts `tgt[:, 1:]` (ending with <eos>).",
            lambda tgt: (tgt[:, 1:], tgt[:, :-1]),
        ),
    ],
    "Hint: `(tgt[:, :-1], tgt[:, 1:])`.",
    "the decoder reads <bos> y and predicts y <eos>: each position predicts the next token.",
    pick=_shifted_pick,
)

ENTRIES = (CAUSAL_DECODER, SHIFTED_TARGETS)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_causal_decoder(model) -> CheckResult:
    """``model(src (B, S), tgt (B, T)) -> logits (B, T, V)`` (token ids 1-3 are used): changing
    target tokens after position t must leave the logits at positions <= t unchanged. Runs the model
    in eval mode, then restores it."""
    if is_instance(model, type):  # False where even isinstance raises: judge's guard takes it
        return CheckResult(
            "check_causal_decoder",
            False,
            "❌ check_causal_decoder: pass a model, not its class: "
            "`check_causal_decoder(MyModel(config))`.",
        )

    # run by the engine inside its guard: a broken model cannot make the check raise
    def in_eval_mode(src, tgt):
        modes = (
            {module: module.training for module in model.modules()}
            if isinstance(model, nn.Module)
            else {}
        )
        try:
            # eval() then the call: an overridden train() that forgets `return self` still runs
            if modes:
                model.eval()
                # the inputs go to the model
                device = next((p.device for p in model.parameters()), src.device)
                src, tgt = src.to(device), tgt.to(device)
            # no gradients needed; a model built under inference_mode runs too
            with torch.no_grad():
                return model(src, tgt)
        finally:
            for module, training in modes.items():
                module.train(training)

    return judge(CAUSAL_DECODER, in_eval_mode)


def check_shifted_targets(shift: Callable) -> CheckResult:
    """Check ``shift(tgt (B, T)) -> (decoder_input, decoder_target)``: the decoder reads ``<bos> y``
    and predicts ``y <eos>``, each position the next token. Returns a CheckResult: truthy when it
    passed; it prints as one friendly paragraph."""
    return judge(SHIFTED_TARGETS, shift)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "08",
        "1",
        "my_causal_mask",
        "a causal mask: three slips predicted, then the fix",
        "check_causal_mask",
    ),
    Exercise(
        "08",
        "2",
        "my_split_heads",
        "split_heads: three candidates, decide which is right",
        "check_split_heads",
    ),
]

QUESTIONS = [Question("08", "3", "a bug the checks miss, and a property test that catches it")]
