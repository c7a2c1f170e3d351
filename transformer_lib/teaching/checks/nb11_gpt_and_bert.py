"""Notebook 11 · GPT and BERT: the checks of the next-token loss, the sampling loop of ``generate``,
BERT's masking recipe, a GPT block and a GPT's parameter count.

Sampling and masking are random: their checks compare proportions with the recipe's expectation,
so a correct recipe that spends its random numbers in another order passes, and judge separately
what proportions miss (one random token reused, a stripe of positions, randomness not drawn from
``generator``). ``check_gpt_block`` and ``check_lm_parameter_count`` grade no exercise any more.
"""

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from ..._arguments import check_positions_fit
from ...model.encoder import EncoderLayer
from ...model.lm import DecoderOnlyLM, LMConfig
from ...model.masks import causal_mask
from ...model.transformer import count_parameters
from ...training import lm_objectives as lm
from ...training.lm_objectives import expected_masking_shares, masking_shares
from . import inputs as draw
from .engine import (
    Case,
    CheckResult,
    Entry,
    Failure,
    Mistake,
    _call,
    describe,
    judge,
    one_number,
    stored_items,
)
from .registry import Exercise, Question

__all__ = [
    "check_next_token_loss",
    "check_generate",
    "check_mask_tokens",
    "check_gpt_block",
    "check_lm_parameter_count",
]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _gpt_block_cases() -> list[Case]:
    gen, layer = draw.generator(), draw.fixed(lambda: EncoderLayer(16, 4, 32, dropout=0.0))
    x, x3 = draw.randn(gen, 2, 6, 16, grad=True), draw.randn(gen, 3, 4, 16)
    return [
        Case((layer, x), "for a tl.EncoderLayer(16, 4, 32) and x (2, 6, 16)", inputs={"x": x}),
        Case((layer, x3), "for x (3, 4, 16)"),
    ]


def _token_batch_cases() -> list[Case]:
    # ids 0-4 special, 5 is <mask>
    tokens = torch.randint(6, 40, (100, 1000), generator=draw.generator())  # (B, T)
    tokens[:, -100:] = 0  # padding at the end of every row
    return [
        Case(
            (tokens, 5, 40, (0, 1, 2, 3, 4), 0.15),
            "on 100,000 tokens (V=40, mask_id=5, specials 0-4, rate 0.15)",
        ),
        Case((tokens, 5, 40, (0, 1, 2, 3, 4), 0.3), "with rate 0.3"),
    ]


def _lm_config_cases() -> list[Case]:
    base = LMConfig(vocab_size=101, d_model=128, num_heads=4, d_ff=512, num_layers=3, max_len=256)
    configs = [
        base,
        base.replace(positional="sinusoidal"),
        base.replace(norm_first=False, d_ff=300, num_layers=2),
        LMConfig.gpt2_small(),
    ]
    return [
        Case(
            (c,),
            f"for LMConfig(vocab_size={c.vocab_size}, d_model={c.d_model}, "
            f"d_ff={c.d_ff}, num_layers={c.num_layers}, max_len={c.max_len}, "
            f"positional={c.positional!r}, norm_first={c.norm_first})",
        )
        for c in configs
    ]


def _mask_tokens_variant(
    tokens, mask_id, vocab_size, specials, rate, generator, *, mistake: str = ""
):
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


def _parameter_count_variant(
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


def _hinted(failure: Failure, hints: dict[str, str]) -> Failure:
    """The failure of a call into student code, its generic hint replaced by the first of ``hints``
    (text in the error -> hint) whose text the error contains; unchanged when none does."""
    text = str(failure)
    for clue, hint in hints.items():
        if " raised " in text and clue in text.split(" Hint:")[0]:
            return Failure(f"{text.split(' Hint:')[0]} {hint}")
    return failure


def _pair_of_tensors(result) -> bool:
    return (
        isinstance(result, tuple)
        and len(result) == 2
        and all(isinstance(t, torch.Tensor) for t in result)
    )


def _same(a, b) -> bool:
    """Two results of student code that are the same tensors (tuples searched)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(_same(x, y) for x, y in zip(a, b, strict=True))
    return False


def _reproducible(code, call, what: str, fixed: str, well_formed: Callable) -> object:
    """Run ``call(code, seed)`` for seeds 0, 0 and 1: the two seed-0 results must be equal (every
    random number comes from ``generator``) and the seed-1 result must differ (something is random
    at all; else the Failure says ``fixed``, the hint for code that draws nothing). Returns the
    first. A result that is not ``well_formed`` is returned as it is, for the pick to say what is
    wrong with it. Only for student code (the engine's guarded call); the reference and the known
    mistakes are run once."""
    first = call(code, 0)
    # the reference or a known mistake: run once
    if not (isinstance(code, partial) and code.func is _call):
        return first
    if not well_formed(first):
        return first
    again, other = call(code, 0), call(code, 1)
    if _same(first, other):
        raise Failure(
            f"{what} gave the same result for generators seeded 0 and 1: nothing in it "
            f"is random. {fixed}"
        )
    if not _same(first, again):
        raise Failure(
            f"two runs of {what} with generators seeded alike gave different results: "
            "some of its random numbers come from PyTorch's global stream, so nobody "
            "can reproduce a run. Hint: pass `generator=generator` to every "
            "`torch.rand`, `torch.randint`, `torch.multinomial` ... call."
        )
    return first


# --- the next-token loss --------------------------------------------------------------------------


def _next_token_loss(logits, tokens, pad_id):
    """The reference: logits at position t score token t + 1; targets that are padding are
    skipped."""
    targets = tokens[:, 1:].masked_fill(tokens[:, 1:] == pad_id, lm.IGNORE_INDEX)  # (B, T - 1)
    return lm.language_model_loss(logits[:, :-1], targets)  # mean over the real targets


def _per_token(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(
        targets.shape
    )


def _loss_run(code, case: Case):
    hints = {
        "view size is not compatible": "Hint: `tokens[:, 1:]` is a view that skips a column, so "
        "`.view(-1)` cannot flatten it; use `.reshape(-1)` or `.flatten()`.",
        "Expected target size": "Hint: `F.cross_entropy` wants the classes on axis 1: flatten the "
        "logits to (B * (T - 1), V) and the targets to (B * (T - 1),).",
    }
    try:
        return code(*case.args)
    except Failure as failure:
        raise _hinted(failure, hints) from None


def _loss_pick(result, case=None) -> dict:
    if isinstance(result, int | float) and not isinstance(result, bool):
        raise Failure(
            f"your loss is a Python number ({result:.4g}), not a tensor: `.item()` or "
            "`float()` cut it off from the graph, and training calls `loss.backward()` "
            "on it. Hint: return the tensor."
        )
    return {"loss": result}


# --- the sampling loop of generate ----------------------------------------------------------------


class WindowLM(nn.Module):
    """The model ``check_generate`` samples from: the logits at each position depend on the token
    there and on the first token of the window the model reads (row ``first * V + token`` of a
    table ``(V * V, V)``), so the chance of each next token is known exactly, and a loop that feeds
    the model another window (only the last token, ``max_len - 1`` tokens, the first ``max_len``)
    samples from other chances. Like ``tl.DecoderOnlyLM`` it returns logits ``(B, T, V)``, has a
    ``config`` with ``max_len``, and refuses more than ``max_len`` tokens."""

    def __init__(self, table: torch.Tensor, max_len: int):
        super().__init__()
        self.register_buffer("table", table)  # (V * V, V): the logits in each window context
        self.config = LMConfig(
            vocab_size=table.size(1),
            d_model=4,
            num_heads=1,
            d_ff=4,
            num_layers=1,
            max_len=max_len,
            pad_id=None,
        )

    def forward(self, tokens: torch.Tensor, cache=None, mask=None) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be a (B, T) tensor of ids, got {tuple(tokens.shape)}")
        check_positions_fit(type(self).__name__, 0, tokens.size(1), self.config.max_len)
        return self.table[_window_context(tokens[:, :1], tokens, self.table.size(1))]  # (B, T, V)


def _window_context(first: torch.Tensor, token: torch.Tensor, vocab: int) -> torch.Tensor:
    """The row of :class:`WindowLM`'s table for a token read in a window that starts with
    ``first``: one row per pair (first, token)."""
    return first * vocab + token


def _generate_case(
    vocab: int,
    batch: int,
    prompt_length: int,
    new: int,
    max_len: int,
    temperature: float,
    positive: bool,
    seed: int,
) -> Case:
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(vocab * vocab, vocab, generator=gen) * 1.5
    # every logit above 0: sampling from the logits themselves runs, and can be recognised
    if positive:
        table = 0.5 + 3 * torch.rand(vocab * vocab, vocab, generator=gen)
    prompt = torch.randint(vocab, (batch, prompt_length), generator=gen)
    crop = (
        "longer than max_len from the start"
        if prompt_length > max_len
        else f"longer than max_len after {max_len - prompt_length + 1} new tokens"
    )
    about = (
        "for a model whose next token depends on the first and the last token it reads "
        f"(V={vocab}, max_len={max_len}, logits {'all > 0' if positive else 'of both signs'}), a "
        f"prompt ({batch:,}, {prompt_length}) {crop}, {new} new tokens at temperature {temperature}"
    )
    return Case((WindowLM(table, max_len), prompt, new, temperature), about)


def generate_cases() -> list[Case]:
    return [
        _generate_case(3, 40_000, 3, 4, 4, 2.0, True, 0),
        _generate_case(3, 40_000, 6, 3, 4, 2.0, False, 1),
    ]


class _ExpectedChances(dict):
    """The reference's result for ``check_generate``: the exact chance of each new token in each
    window context."""


def _chances(model, temperature) -> torch.Tensor:
    return (model.table / temperature).softmax(-1).double()  # (V * V, V): P(next = b | context)


def _generate_expected(
    model, prompt, max_new_tokens, temperature, generator=None
) -> _ExpectedChances:
    """The reference: at every new position, the chance of token b in the window that starts with
    token f and ends with token l is softmax(table[f * V + l] / T)[b]."""
    return _ExpectedChances(
        {_chance_part(step): _chances(model, temperature) for step in range(max_new_tokens)}
    )


def _chance_part(step: int) -> str:
    return (
        "chance of each new token (columns) after each window (rows: f * V + l, f the first token "
        f"of the last max_len, l the last token) at new position {step + 1}"
    )


def _generate_run(code, case: Case):
    model, prompt, new, temperature = case.args
    hints = {
        "exceed max_len": f"The model reads at most max_len={model.config.max_len} tokens, and the "
        "sequence grew past it. Hint: feed the model only the last max_len tokens, `tokens[:, "
        "-model.config.max_len:]`.",
        "multinomial": "Hint: `torch.multinomial` takes probabilities (or any non-negative "
        "weights), not logits nor log-probabilities: `(logits / temperature).softmax(dim=-1)` "
        "first.",
        "probability tensor": "Hint: `torch.multinomial` takes probabilities (or any non-negative "
        "weights), not logits nor log-probabilities: `(logits / temperature).softmax(dim=-1)` "
        "first.",
    }

    def call(code, seed):
        return code(model, prompt, new, temperature, torch.Generator().manual_seed(seed))

    try:
        return _reproducible(
            code,
            call,
            "your generate",
            "Taking the most likely token is greedy decoding, not sampling. Hint: draw each new "
            "token, `torch.multinomial(probs, 1, generator=generator)`.",
            lambda result: (
                isinstance(result, torch.Tensor)
                and tuple(result.shape) == (prompt.size(0), prompt.size(1) + new)
            ),
        )
    except Failure as failure:
        raise _hinted(failure, hints) from None


def _generate_pick(result, case: Case) -> dict:
    if isinstance(result, _ExpectedChances):
        return dict(result)
    model, prompt, new, _ = case.args
    shape = (prompt.size(0), prompt.size(1) + new)
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != shape:
        raise Failure(
            f"return the prompt followed by the new tokens, {shape} = (B, T0 + "
            f"max_new_tokens); got {describe(result)}. Hint: `torch.cat([tokens, "
            "next_token], dim=1)` each step, and return `tokens`."
        )
    if result.is_floating_point() or result.dtype == torch.bool:
        raise Failure(f"the tokens must be integer ids, got dtype {result.dtype}.")
    if not torch.equal(result[:, : prompt.size(1)], prompt):
        raise Failure("the first T0 tokens of the result must be the prompt, unchanged.")
    vocab = model.config.vocab_size
    if result.min() < 0 or result.max() >= vocab:
        raise Failure(
            f"the new tokens must be ids in [0, {vocab}), got values from {result.min()} "
            f"to {result.max()}."
        )
    chances, max_len = {}, model.config.max_len
    for step in range(new):
        t = prompt.size(1) + step
        # the window the right loop feeds the model for position t, as its table row
        first, last = result[:, max(0, t - max_len)], result[:, t - 1]  # (B,) each
        context = _window_context(first, last, vocab)  # (B,)
        index = context * vocab + result[:, t]  # (B,): the pair (context, new) as one number
        pairs = torch.bincount(index, minlength=vocab**3).double().view(vocab * vocab, vocab)
        # each context's new tokens over how often it occurred
        chances[_chance_part(step)] = pairs / pairs.sum(1, keepdim=True).clamp(min=1)  # (V * V, V)
    return chances


def _sampler(
    model,
    prompt,
    max_new_tokens,
    temperature,
    generator,
    *,
    crop="last",
    position=-1,
    softmax="before",
    temperature_as="divide",
    greedy=False,
):
    """The sampling loop with a knob per classic mistake: ``crop`` ("last": right; "first",
    "none", "short": the last max_len - 1 tokens, "token": the last token only), the logits'
    ``position``, ``softmax`` ("before": right; "none": sample the logits; "after": temperature on
    the probabilities, which renormalising undoes), ``temperature_as`` ("divide", "multiply"),
    ``greedy``."""
    tokens, max_len = prompt, model.config.max_len
    for _ in range(max_new_tokens):
        context = {
            "last": tokens[:, -max_len:],
            "first": tokens[:, :max_len],
            "none": tokens,
            "short": tokens[:, -(max_len - 1) :],
            "token": tokens[:, -1:],
        }[crop]
        logits = model(context)[:, position]  # (B, V)
        scaled = logits / temperature if temperature_as == "divide" else logits * temperature
        weights = {
            "before": scaled.softmax(-1),
            "none": scaled,
            "after": logits.softmax(-1) / temperature,
        }[softmax]
        if greedy:
            new = weights.argmax(-1, keepdim=True)  # (B, 1)
        else:
            new = torch.multinomial(weights, 1, generator=generator)  # (B, 1)
        tokens = torch.cat([tokens, new], dim=1)  # (B, t + 1)
    return tokens


# --- BERT's masking recipe ------------------------------------------------------------------------


def _mask_tokens_run(code, case: Case):
    def call(code, seed):
        result = code(*case.args, torch.Generator().manual_seed(seed))
        # a tuple or list is read from its storage, 3 items at most: a subclass's __iter__ or
        # __len__ that never ends is never called
        items = stored_items(result, 2)
        return result if items is None else tuple(items)

    return _reproducible(
        code,
        call,
        "your masking",
        "A fixed pattern (every k-th position, a counter for the 80/10/10 split) gives the right "
        "shares, but the model would see the same holes in the same text every epoch. Hint: draw "
        "the picks and the split from `generator`, `torch.rand(tokens.shape, "
        "generator=generator)`.",
        lambda result: (
            _pair_of_tensors(result) and all(t.shape == case.args[0].shape for t in result)
        ),
    )


class _ExpectedShares(dict):
    """The reference's result, already shares (a student's result is a pair of tensors)."""


# This share is left out of the comparison: BERT's own code draws a random replacement from the
# whole vocabulary, special tokens and [MASK] included, and the library's recipe excludes them; both
# are right.
_EITHER_WAY = "share of random replacements that are special or mask_id"


def _mask_tokens_expected(
    tokens, mask_id, vocab_size, specials, rate, generator=None
) -> _ExpectedShares:
    """The reference of ``check_mask_tokens``: the recipe's expected shares, not one random draw
    (a correct recipe drawing in another order lies near the expectation, up to twice as far from
    another draw). Replacements drawn from the whole vocabulary, as BERT's code draws them, move
    the shares by 0.1 / V: well inside the tolerance."""
    shares = expected_masking_shares(vocab_size, mask_id, specials, rate)
    return _ExpectedShares({part: share for part, share in shares.items() if part != _EITHER_WAY})


def _largest_dependence(
    events: torch.Tensor, valid: torch.Tensor, lags: range
) -> tuple[float, int]:
    """How far ``P(event at t + lag | event at t)`` strays from ``P(event)`` over ``lags``
    (positions within a row, both valid): (the largest gap, its lag). Independent picks give gaps of
    sampling noise (0.003 here)."""
    share = events[valid].double().mean().item()
    worst = (0.0, lags[0])
    for lag in lags:
        here, there = events[:, :-lag] & valid[:, :-lag], valid[:, lag:]
        pairs = (here & there).sum().item()
        if pairs:
            gap = abs((here & there & events[:, lag:]).sum().item() / pairs - share)
            worst = max(worst, (gap, lag))
    return worst


def _pattern_failures(tokens, inputs, targets, mask_id, vocab_size, specials) -> None:
    """Raise a named Failure when the picks, the 80/10/10 split or the random replacements follow a
    pattern that the shares cannot see, or the replacements leave out ids they may take."""
    maskable = ~torch.isin(tokens, torch.tensor(specials, dtype=tokens.dtype))  # (B, T)
    picked = (targets != lm.IGNORE_INDEX) & maskable  # (B, T)
    gap, lag = _largest_dependence(picked, maskable, range(1, 21))
    if gap > 0.05:
        raise Failure(
            f"the picked positions follow a pattern: whether position t + {lag} is picked depends "
            f"on whether position t is (by {gap:.2f}; independent picks: under 0.02). Stripes "
            "(every k-th position) have the right share, but the model would only ever be asked "
            "about those positions. Hint: pick each position on its own, "
            "`torch.rand(tokens.shape, generator=generator) < rate`."
        )
    # the random replacements, in order
    replaced = inputs[picked & (inputs != tokens) & (inputs != mask_id)]
    if len(replaced) > 10:
        repeats = (replaced[1:] == replaced[:-1]).double().mean().item()
        if repeats > 0.3:
            raise Failure(
                f"your random replacements repeat one token: {repeats:.0%} of them equal "
                "the one before (drawn afresh, a few percent would). Drawing one id and "
                "putting it everywhere gives the right shares, but the model learns "
                'that one token means "replaced". Hint: one draw per position, '
                "`torch.randint(..., tokens.shape, generator=generator)`, then pick "
                "from it with `torch.where`."
            )
    _narrow_replacements(replaced, mask_id, vocab_size, specials)
    # mask, other, kept
    kind = torch.where(inputs == mask_id, 0, torch.where(inputs == tokens, 2, 1))[picked]
    if len(kind) > 1:
        before, after = kind[:-1], kind[1:]  # consecutive picked positions, in reading order
        for a in range(3):
            for b in range(3):
                follows = (
                    (after[before == a] == b).double().mean().item()
                    if (before == a).sum() >= 100
                    else None
                )
                if follows is not None and abs(follows - (kind == b).double().mean().item()) > 0.06:
                    names = ("set to mask_id", "given another token", "left unchanged")
                    raise Failure(
                        "the 80/10/10 split follows a pattern: after a picked position "
                        f"{names[a]}, the next picked one is {names[b]} {follows:.0%} of "
                        f"the time, against {(kind == b).double().mean().item():.0%} "
                        "overall. Hint: decide each picked position with its own "
                        "uniform draw, `action = torch.rand(tokens.shape, "
                        "generator=generator)`."
                    )


def _narrow_replacements(replaced, mask_id, vocab_size, specials) -> None:
    """Fail when some id that a random replacement may take (any but the specials and mask_id)
    turns up in under a quarter of its fair share, 1 / vocab_size of the replacements (about 34
    each at rate 0.15; drawn fairly, some id falls under a quarter about once in 300,000 checks):
    replacements drawn from too narrow a range, ``torch.randint(10, ...)``, or an index into the
    candidate ids used as an id."""
    replaced = replaced[(replaced >= 0) & (replaced < vocab_size)]
    if len(replaced) < 20 * vocab_size:
        return
    counts = torch.bincount(replaced, minlength=vocab_size)  # (V,)
    rare = [
        i
        for i in range(vocab_size)
        if i not in specials and i != mask_id and counts[i] < len(replaced) / vocab_size / 4
    ]
    if rare:
        shown = ", ".join(map(str, rare[:8])) + (", ..." if len(rare) > 8 else "")
        raise Failure(
            f"your random replacements (almost) never take the ids {shown}, of the "
            f"{vocab_size}: a replacement is any token of the vocabulary (as BERT draws it, "
            "`torch.randint(vocab_size, ...)`), or any that is not special. Hint: a draw of "
            "`torch.randint(len(candidates), ...)` is a position in the candidates: use it as "
            "an index, `candidates[draw]`, not as the id itself."
        )


def _mask_tokens_pick(result, case: Case) -> dict:
    """Proportions, not positions: two correct recipes draw different positions, but the same
    shares. Patterns that keep the shares (stripes, a fixed split, one reused replacement) fail with
    their own hint."""
    if isinstance(result, _ExpectedShares):
        return {part: torch.tensor(share) for part, share in result.items()}
    tokens, mask_id, vocab_size, specials, _ = case.args
    if not _pair_of_tensors(result):
        got = (
            f"({', '.join(map(describe, result))})"
            if isinstance(result, tuple)
            else describe(result)
        )
        raise Failure(
            "return a tuple (inputs, targets) of two tensors shaped like tokens "
            f"{tuple(tokens.shape)}; got {got}."
        )
    inputs, targets = result
    if inputs.shape != tokens.shape or targets.shape != tokens.shape:
        raise Failure(
            f"inputs {describe(inputs)} and targets {describe(targets)} must both have "
            f"the shape of tokens {tuple(tokens.shape)}."
        )
    shares = masking_shares(tokens, *result, mask_id, specials)
    _pattern_failures(tokens, inputs, targets, mask_id, vocab_size, specials)
    return {part: torch.tensor(share) for part, share in shares.items() if part != _EITHER_WAY}


def _lm_parameter_count(config) -> int:
    with torch.device("meta"):
        return count_parameters(DecoderOnlyLM(config))["total"]


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------


def loss_cases() -> list[Case]:
    """Right-padded rows of different lengths; the second case pads with id 2 and uses id 0 as a
    real token."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 7, generator=gen).requires_grad_()
    tokens = torch.tensor([[1, 4, 2, 6, 3, 5], [2, 3, 6, 1, 0, 0], [5, 1, 0, 0, 0, 0]])
    logits2 = torch.randn(2, 5, 9, generator=gen)
    tokens2 = torch.tensor([[4, 8, 1, 7, 3], [6, 0, 5, 2, 2]])
    return [
        Case(
            (logits, tokens, 0),
            "for logits (3, 6, 7) and tokens (3, 6) right-padded with pad_id=0 (rows of 6, "
            "4 and 2 real tokens)",
            inputs={"logits": logits},
        ),
        Case(
            (logits2, tokens2, 2),
            "for logits (2, 5, 9) and tokens (2, 5) with pad_id=2 (id 0 is a real token)",
        ),
    ]


def _masked_mean(logits, tokens, pad_id, *, by="targets", over_all=False, per_row=False):
    """The shifted loss with padding masked by hand: ``by`` which tokens ("targets": right;
    "inputs"), divided by the real targets or, ``over_all``, by every position; ``per_row``, the
    mean of each row's mean (a mistake: a short row then weighs as much as a long one)."""
    ce = _per_token(logits[:, :-1], tokens[:, 1:])  # (B, T - 1)
    keep = ((tokens[:, 1:] if by == "targets" else tokens[:, :-1]) != pad_id).float()  # (B, T - 1)
    if per_row:
        return ((ce * keep).sum(1) / keep.sum(1).clamp(min=1)).mean()
    return (ce * keep).sum() / (keep.numel() if over_all else keep.sum())


NEXT_TOKEN_LOSS = Entry(
    "check_next_token_loss",
    "your loss",
    _next_token_loss,
    loss_cases,
    [
        Mistake(
            "no shift: the logits at position t were scored against token t, the one the model "
            "is reading, so it would learn to copy its input. Hint: the logits at t predict "
            "token t + 1: `logits[:, :-1]` against `tokens[:, 1:]`.",
            lambda logits, tokens, pad_id: F.cross_entropy(
                logits.flatten(0, 1), tokens.flatten(), ignore_index=pad_id
            ),
        ),
        Mistake(
            "shifted the wrong way: `logits[:, 1:]` scored against `tokens[:, :-1]` asks each "
            "position for the token before it. Hint: `logits[:, :-1]` against `tokens[:, 1:]`.",
            lambda logits, tokens, pad_id: F.cross_entropy(
                logits[:, 1:].flatten(0, 1), tokens[:, :-1].flatten(), ignore_index=pad_id
            ),
        ),
        Mistake(
            "the loss counts padding: positions whose target is pad_id were scored, so the model "
            "learns to predict padding. Hint: `ignore_index=pad_id` in `F.cross_entropy` (or "
            "mask those targets out).",
            lambda logits, tokens, pad_id: F.cross_entropy(
                logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()
            ),
        ),
        Mistake(
            "padding was read from the inputs: a position is skipped when its *target* (the next "
            "token) is padding, whatever it reads. Hint: build the mask from `tokens[:, 1:]`.",
            partial(_masked_mean, by="inputs"),
        ),
        Mistake(
            "the mean divides by every position, padding included: the loss shrinks as padding "
            "grows. Hint: divide by the number of real targets (`ignore_index` does it for you).",
            partial(_masked_mean, over_all=True),
        ),
        Mistake(
            "the mean was taken per row, then over rows: a row's few targets then weigh as much "
            "as a long row's many. Hint: average over all non-padding targets at once, not per "
            "row then over rows (`F.cross_entropy(..., ignore_index=pad_id)` on the flattened "
            "batch does it).",
            partial(_masked_mean, per_row=True),
        ),
        Mistake(
            "the loss is a sum over tokens, not a mean: it grows with the batch and the length. "
            "Hint: the mean over the real targets (`F.cross_entropy`'s default reduction).",
            lambda logits, tokens, pad_id: F.cross_entropy(
                logits[:, :-1].flatten(0, 1),
                tokens[:, 1:].flatten(),
                ignore_index=pad_id,
                reduction="sum",
            ),
        ),
        Mistake(
            "padding was taken to be id 0; use the `pad_id` argument.",
            lambda logits, tokens, pad_id: F.cross_entropy(
                logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), ignore_index=0
            ),
        ),
    ],
    "Hint: score `logits[:, :-1]` against `tokens[:, 1:]` with `F.cross_entropy(..., "
    "ignore_index=pad_id)`, both flattened.",
    "each position's logits score the next token, padding is never a target, and the mean is over "
    "real targets.",
    pick=_loss_pick,
    run=_loss_run,
    atol=1e-5,
)


GENERATE = Entry(
    "check_generate",
    "your generate",
    _generate_expected,
    generate_cases,
    [
        Mistake(
            "you sampled from the logits themselves (`torch.multinomial(logits, 1)`): "
            "multinomial reads them as weights, so a logit twice as large is twice as likely, "
            "where the model means e^2 times. Hint: `probs = (logits / "
            "temperature).softmax(dim=-1)`, then sample from `probs`.",
            partial(_sampler, softmax="none"),
        ),
        Mistake(
            "you always took the most likely token: that is greedy decoding, not sampling. Hint: "
            "`torch.multinomial(probs, 1, generator=generator)`.",
            partial(_sampler, greedy=True),
        ),
        Mistake(
            "the temperature was ignored or applied to the probabilities (sampling renormalises "
            "them, so dividing the probabilities changes nothing). Hint: divide the logits before "
            "the softmax, `(logits / temperature).softmax(dim=-1)`.",
            partial(_sampler, softmax="after"),
        ),
        Mistake(
            "you multiplied by the temperature; divide: a high temperature should flatten.",
            partial(_sampler, temperature_as="multiply"),
        ),
        Mistake(
            "the next token was sampled from the first position's logits; the last position's "
            "predict what comes next. Hint: `model(context)[:, -1]`.",
            partial(_sampler, position=0),
        ),
        Mistake(
            "the model was fed the *first* max_len tokens: once the text is longer it keeps "
            "predicting what follows an old token. Hint: the last max_len tokens, `tokens[:, "
            "-model.config.max_len:]`.",
            partial(_sampler, crop="first"),
        ),
        Mistake(
            "the model was fed only the last token: a language model predicts from its whole "
            "context, up to max_len tokens (this test model reads the first token of its window "
            "too). Hint: `model(tokens[:, -model.config.max_len:])[:, -1]`.",
            partial(_sampler, crop="token"),
        ),
        Mistake(
            "the model was fed the last max_len - 1 tokens, one too few (an off-by-one in the "
            "crop). Hint: `tokens[:, -model.config.max_len:]`, all max_len of them.",
            partial(_sampler, crop="short"),
        ),
    ],
    "Hint: each step, `logits = model(tokens[:, -max_len:])[:, -1] / temperature` (B, V), `probs "
    "= logits.softmax(dim=-1)`, `torch.multinomial(probs, 1, generator=generator)` (B, 1), "
    "appended with `torch.cat`.",
    "each new token is drawn from softmax(logits / temperature) at the last position of the last "
    "max_len tokens, and the text grows past max_len with the model never fed more than max_len "
    "tokens.",
    # atol: 4.9 standard deviations of one chance or more (40,000 rows; each window's share is
    # above 0.085); the classic mistakes land 0.067 (sampling the logits) to 0.5 away
    run=_generate_run,
    pick=_generate_pick,
    atol=0.04,
    rtol=0.0,
)


GPT_BLOCK = Entry(
    "check_gpt_block",
    "your GPT block",
    lambda layer, x: layer(x, causal_mask(x.size(1))),
    _gpt_block_cases,
    [
        Mistake(
            "no position may read a later one: pass the causal mask, `layer(x, "
            "tl.causal_mask(T))`.",
            lambda layer, x: layer(x),
        ),
        Mistake(
            "the mask is inverted: True marks what a query *may* see (keys j <= i), so use the "
            "mask as it is.",
            lambda layer, x: layer(x, ~causal_mask(x.size(1))),
        ),
        Mistake(
            "each position sees the future and not the past: the causal mask is lower-triangular "
            "(`.tril()`).",
            lambda layer, x: layer(x, causal_mask(x.size(1)).transpose(-1, -2)),
        ),
    ],
    "Hint: `layer(x, tl.causal_mask(x.size(1)))`.",
    "the layer now lets each position read only itself and earlier ones: a GPT block.",
)


MASK_TOKENS = Entry(
    "check_mask_tokens",
    "your masking",
    _mask_tokens_expected,
    _token_batch_cases,
    [
        Mistake(
            "every picked position became mask_id; BERT's recipe keeps 10% unchanged and gives "
            "10% a random token, because <mask> never appears when the model is used.",
            partial(_mask_tokens_variant, mistake="all masked"),
        ),
        Mistake(
            "the targets keep every token, so the loss would score positions the model can see "
            "(and copy). Hint: `lm.IGNORE_INDEX` at positions that were not picked.",
            partial(_mask_tokens_variant, mistake="targets everywhere"),
        ),
        Mistake(
            "the positions not picked have target 0, which is a token id: the loss would score "
            "them. Hint: `lm.IGNORE_INDEX` (-100), which cross-entropy skips.",
            partial(_mask_tokens_variant, mistake="ignored as 0"),
        ),
        Mistake(
            "special_ids were ignored: special tokens (padding) were picked. Only positions "
            "whose token is not special may be picked.",
            partial(_mask_tokens_variant, mistake="no specials"),
        ),
    ],
    "Hint: pick with `torch.rand(shape, generator=generator) < rate` where the token is not "
    "special; then split the picked ones 80/10/10 with a second uniform draw.",
    "about 15% picked, 80% of them <mask>, 10% random, 10% unchanged, and only they are scored.",
    # atol: about 4 standard deviations of the <mask> share at rate 0.15 (13,500 picked positions)
    run=_mask_tokens_run,
    pick=_mask_tokens_pick,
    atol=0.015,
    rtol=0.0,
)


LM_PARAMETER_COUNT = Entry(
    "check_lm_parameter_count",
    "your count",
    _lm_parameter_count,
    _lm_config_cases,
    [
        Mistake(
            "the output projection was counted as a matrix of its own; it is the token embedding "
            "(tied).",
            partial(_parameter_count_variant, tied=False),
        ),
        Mistake(
            "the biases are missing: each of the 4 attention projections has d_model, the "
            "feed-forward d_ff + d_model.",
            partial(_parameter_count_variant, biases=False),
        ),
        Mistake(
            "learned positions add max_len x d_model parameters (sinusoids add none).",
            partial(_parameter_count_variant, positions=False),
        ),
        Mistake(
            "each block has two LayerNorms of 2 x d_model (gain and shift).",
            partial(_parameter_count_variant, norms=False),
        ),
        Mistake(
            "a pre-LN stack (norm_first=True) ends with a final LayerNorm: 2 x d_model more.",
            partial(_parameter_count_variant, final_norm=False),
        ),
    ],
    "Hint: embedding V x d_model, positions (learned) max_len x d_model, per block 4 (d_model^2 + "
    "d_model) + 2 d_model d_ff + d_ff + d_model + 4 d_model, and 2 d_model for the final norm of "
    "a pre-LN stack.",
    "every parameter accounted for.",
    pick=one_number("parameter count"),
    atol=0.0,
    rtol=0.0,
)

ENTRIES = (NEXT_TOKEN_LOSS, GENERATE, MASK_TOKENS, GPT_BLOCK, LM_PARAMETER_COUNT)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_next_token_loss(next_token_loss: Callable) -> CheckResult:
    """Check ``next_token_loss(logits (B, T, V), tokens (B, T), pad_id) -> loss``: the mean
    cross-entropy of the logits at each position against the *next* token, over the targets that are
    not ``pad_id``, as a tensor (its gradient with respect to the logits is compared too). Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(NEXT_TOKEN_LOSS, next_token_loss)


def check_generate(generate: Callable) -> CheckResult:
    """Check the sampling loop ``generate(model, prompt, max_new_tokens, temperature, generator)``,
    ``prompt (B, T0)`` -> ``(B, T0 + max_new_tokens)``: crop to the last ``max_len`` tokens, sample
    from ``softmax(logits / temperature)`` with ``generator``, append. On a model whose next token
    depends on the first and the last token of the window it reads, it compares each token's chance
    in each window (40,000 rows) with the exact value, and reruns with seeds.
    Returns a CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(GENERATE, generate)


def check_gpt_block(gpt_block: Callable) -> CheckResult:
    """Check ``gpt_block(layer, x (B, T, d_model)) -> (B, T, d_model)``: a ``tl.EncoderLayer`` run
    with the causal mask, so that each position reads only itself and earlier ones. Returns a
    CheckResult: truthy when it passed; it prints as one friendly paragraph."""
    return judge(GPT_BLOCK, gpt_block)


def check_mask_tokens(mask_tokens: Callable) -> CheckResult:
    """Check BERT's recipe
    ``mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator) -> (inputs, targets)``:
    ``rate`` of the non-special tokens picked, 80/10/10 <mask>, random, unchanged, only they scored;
    each position picked on its own, each replacement drawn afresh, every random number from
    ``generator``. Returns a CheckResult: truthy when it passed; it prints as one friendly
    paragraph."""
    return judge(MASK_TOKENS, mask_tokens)


def check_lm_parameter_count(parameter_count: Callable) -> CheckResult:
    """Check ``parameter_count(config: LMConfig) -> int`` against the parameters of
    ``tl.DecoderOnlyLM(config)``, for learned and sinusoidal positions, post-LN and pre-LN, up to
    GPT-2 small. Returns a CheckResult: truthy when it passed; it prints as one friendly
    paragraph."""
    return judge(LM_PARAMETER_COUNT, parameter_count)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "11",
        "1",
        "my_next_token_loss",
        "the next-token loss: shift by one, skip padding",
        "check_next_token_loss",
    ),
    Exercise(
        "11",
        "2",
        "my_generate",
        "the sampling loop of generate: crop, temperature, softmax, sample",
        "check_generate",
    ),
    Exercise("11", "3", "my_mask_tokens", "BERT's 80/10/10 masking recipe", "check_mask_tokens"),
]

QUESTIONS = [Question("11", "4", "why a masked language model is awkward for writing text")]
