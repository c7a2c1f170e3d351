"""The checks of notebook 13: the reference solutions pass, every named mistake earns its own hint,
both rotary layouts pass and are named, and hostile input gives a message, never an exception."""

import math
from functools import partial

import numpy as np
import pytest
import torch
from torch import nn

import transformer_lib as tl
from solutions import nb13_modern_decoder as solution
from transformer_lib.teaching.checks import nb13_modern_decoder as nb13


def _first_words(hint: str) -> str:
    return hint[:40]


# --- RMSNorm --------------------------------------------------------------------------------------


def rms_class(version):
    class Wrong(nn.Module):
        def __init__(self, d_model, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return version(self, x)

    return Wrong


@pytest.mark.parametrize("mistake", nb13.RMS_NORM.mistakes, ids=range(len(nb13.RMS_NORM.mistakes)))
def test_each_rms_norm_mistake_gets_its_hint(mistake):
    result = tl.checks.check_rms_norm(rms_class(mistake.version))
    assert not result and _first_words(mistake.hint) in result.message, result.message


def test_rms_norm_with_a_shift_is_told_it_has_none():
    class WithShift(solution.MyRMSNorm):
        def __init__(self, d_model, eps=1e-5):
            super().__init__(d_model, eps)
            self.bias = nn.Parameter(torch.zeros(d_model))

    result = tl.checks.check_rms_norm(WithShift)
    assert not result and "no shift" in result.message


# --- rotary attention -----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(nb13.LAYOUTS))
def test_both_rotary_layouts_pass_and_are_named(layout):
    result = tl.checks.check_rotary_attention(partial(nb13.rotary_attention, layout=layout))
    assert result and nb13.LAYOUTS[layout] in result.message, result.message


def test_the_solution_with_the_library_is_interleaved():
    result = tl.checks.check_rotary_attention(solution.my_rotary_attention)
    assert result and "interleaved" in result.message


@pytest.mark.parametrize("layout", list(nb13.LAYOUTS))
@pytest.mark.parametrize(
    ("hint", "knobs"), nb13._ROTARY_MISTAKES, ids=range(len(nb13._ROTARY_MISTAKES))
)
def test_each_rotary_mistake_gets_its_hint_in_either_layout(hint, knobs, layout):
    result = tl.checks.check_rotary_attention(
        partial(nb13.rotary_attention, layout=layout, **knobs)
    )
    assert (
        not result
        and _first_words(hint) in result.message
        and nb13.LAYOUTS[layout] in result.message
    ), result.message


# --- SwiGLU ---------------------------------------------------------------------------------------


def swiglu_class(version):
    class Wrong(solution.MySwiGLU):
        linear1 = property(lambda self: self.up)  # the names the mistakes read (the library's)
        linear2 = property(lambda self: self.down)

        def forward(self, x):
            return version(self, x)

    return Wrong


@pytest.mark.parametrize("mistake", nb13.SWIGLU.mistakes, ids=range(len(nb13.SWIGLU.mistakes)))
def test_each_swiglu_mistake_gets_its_hint(mistake):
    result = tl.checks.check_swiglu(swiglu_class(mistake.version))
    assert not result and _first_words(mistake.hint) in result.message, result.message


def test_swiglu_with_biases_is_told_to_drop_them():
    class Biased(solution.MySwiGLU):
        def __init__(self, d_model, d_ff):
            super().__init__(d_model, d_ff)
            self.gate = nn.Linear(d_model, d_ff)

    result = tl.checks.check_swiglu(Biased)
    assert not result and "bias-free" in result.message


# --- grouped-query heads and the budget -----------------------------------------------------------


@pytest.mark.parametrize(
    "mistake", nb13.REPEAT_KV.mistakes, ids=range(len(nb13.REPEAT_KV.mistakes))
)
def test_each_repeat_kv_mistake_gets_its_hint(mistake):
    result = tl.checks.check_repeat_kv(mistake.version)
    assert not result and _first_words(mistake.hint) in result.message, result.message


def test_repeat_kv_matches_the_library_grouping():
    """The reference is the grouping tl.MultiHeadAttention uses: its output equals multi-head
    attention whose key/value projections are the grouped ones repeated with the solution."""
    torch.manual_seed(0)
    gqa = tl.MultiHeadAttention(16, 4, n_kv_heads=2).eval()
    full = tl.MultiHeadAttention(16, 4).eval()
    with torch.no_grad():
        full.w_q.load_state_dict(gqa.w_q.state_dict())
        full.w_o.load_state_dict(gqa.w_o.state_dict())
        for name in ("w_k", "w_v"):
            weight = getattr(gqa, name).weight.view(1, 2, 4, 16)  # (1, h_kv, d_k, d_model)
            getattr(full, name).weight.copy_(solution.my_repeat_kv(weight, 4).reshape(16, 16))
            getattr(full, name).bias.copy_(
                solution.my_repeat_kv(getattr(gqa, name).bias.view(1, 2, 4, 1), 4).flatten()
            )
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(full(x, x, x)[0], gqa(x, x, x)[0])


@pytest.mark.parametrize(
    "mistake", nb13.KV_HEADS_FOR_BUDGET.mistakes, ids=range(len(nb13.KV_HEADS_FOR_BUDGET.mistakes))
)
def test_each_budget_mistake_gets_its_hint(mistake):
    result = tl.checks.check_kv_heads_for_budget(mistake.version)
    assert not result and _first_words(mistake.hint) in result.message, result.message


# --- hostile input --------------------------------------------------------------------------------


class Raises(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        raise RuntimeError("boom")


class Unprintable:
    def __repr__(self):
        raise RuntimeError

    __str__ = __repr__


HOSTILE = [
    None,
    42,
    "text",
    Raises,
    Raises.__init__,
    lambda *a: "text",
    lambda *a: Unprintable(),
    lambda *a: torch.full((1,), float("nan")),
    lambda *a: (None, None),
    lambda *a: 1 / 0,
    nn.Linear,
    lambda *a: torch.zeros(2, 2, dtype=torch.bool),
    solution.MySwiGLU(8, 12),
]
CHECKS = [
    "check_rms_norm",
    "check_rotary_attention",
    "check_swiglu",
    "check_repeat_kv",
    "check_kv_heads_for_budget",
]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("code", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_gives_a_message_never_an_exception(check, code):
    result = getattr(tl.checks, check)(code)
    assert (
        isinstance(result, tl.checks.CheckResult) and not result and result.message.startswith("❌")
    ), result


# --- the budget that holds no key/value head (issue 36) -------------------------------------------


def test_a_budget_below_one_head_raises_in_the_reference_as_in_the_notebook():
    config = tl.lm.LMConfig.llama_like(100, d_model=128, num_heads=8, num_layers=4)
    with pytest.raises(ValueError, match="at least 512 bytes"):
        nb13._kv_heads_for_budget(config, 500, torch.float32)
    assert tl.checks.check_kv_heads_for_budget(solution.my_kv_heads_for_budget)


def test_a_value_error_subclass_passes_too():
    class BudgetError(ValueError):
        pass

    def strict(config, budget_bytes, dtype):
        try:
            return solution.my_kv_heads_for_budget(config, budget_bytes, dtype)
        except ValueError as exc:
            raise BudgetError(str(exc)) from None

    assert tl.checks.check_kv_heads_for_budget(strict)


def test_returning_zero_for_a_budget_below_one_head_is_named():
    def zero(config, budget_bytes, dtype):
        try:
            return solution.my_kv_heads_for_budget(config, budget_bytes, dtype)
        except ValueError:
            return 0

    result = tl.checks.check_kv_heads_for_budget(zero)
    assert not result and "asks for a ValueError" in result.message, result.message
    assert "returned 0" in result.message


def test_raising_where_a_head_fits_is_named():
    def always(config, budget_bytes, dtype):
        raise ValueError("no budget")

    result = tl.checks.check_kv_heads_for_budget(always)
    assert not result and "at least one key/value head" in result.message, result.message


# --- exercise 3: SwiGLU's hidden width (issue 36: a decision, not cell 22 again) ---------------


def _width_by_floats(d_model, d_ff, multiple_of):
    exact = 2 * d_ff / 3 / multiple_of  # in multiples
    low = math.floor(exact)
    k = low + 1 if exact - low > 0.5 + 1e-9 else low  # ties (exactly .5) to the smaller
    return float(multiple_of * max(k, 1))


def _width_by_search(d_model, d_ff, multiple_of):
    relu = 2 * d_model * d_ff
    widths = range(multiple_of, 2 * d_ff + 2 * multiple_of, multiple_of)
    return min(widths, key=lambda w: abs(3 * d_model * w - relu))  # min keeps the first of a tie


@pytest.mark.parametrize(
    "swiglu_width",
    [
        solution.my_swiglu_width,
        _width_by_floats,
        _width_by_search,
        lambda d, d_ff, m: np.int64(solution.my_swiglu_width(d, d_ff, m)),
        lambda d, d_ff, m: torch.tensor(solution.my_swiglu_width(d, d_ff, m)),
    ],
    ids=["solution", "floats", "search over multiples", "numpy", "torch"],
)
def test_every_correct_way_to_choose_the_swiglu_width_passes(swiglu_width):
    result = tl.checks.check_swiglu_width(swiglu_width)
    assert result and result.message.startswith("✅"), result.message


@pytest.mark.parametrize(
    "mistake", nb13.SWIGLU_WIDTH.mistakes, ids=range(len(nb13.SWIGLU_WIDTH.mistakes))
)
def test_each_swiglu_width_mistake_gets_its_own_hint(mistake):
    result = tl.checks.check_swiglu_width(mistake.version)
    assert not result and mistake.hint in result.message, result.message


def test_llamas_own_rule_is_named_and_its_7b_width_is_a_case():
    """Cell 24 computes 11008 for Llama-7B with Meta's round-up; that case's closest width is the
    same, while the paper's d_model = 512 is a case where rounding up is not the closest."""
    widths = {(d, d_ff, m): nb13._swiglu_width(d, d_ff, m) for d, d_ff, m in nb13._WIDTH_CASES}
    assert widths[(4096, 16384, 256)] == 256 * math.ceil(8 / 3 * 4096 / 256) == 11008
    assert widths[(512, 2048, 256)] == 1280 != 256 * math.ceil(8 / 3 * 512 / 256)
    result = tl.checks.check_swiglu_width(lambda d, d_ff, m: m * math.ceil(8 / 3 * d / m))
    assert not result and "Llama rule" in result.message


def test_the_width_counts_what_the_library_builds():
    """3 d_model width against 2 d_model d_ff: bias-free tl.PositionwiseFeedForward blocks."""

    def count(d_model, d_ff, activation):
        block = tl.PositionwiseFeedForward(d_model, d_ff, activation=activation, bias=False)
        return sum(p.numel() for p in block.parameters())

    for d_model, d_ff, multiple_of in [(64, 256, 32), (12, 9, 4), (16, 8, 64)]:
        width = nb13._swiglu_width(d_model, d_ff, multiple_of)
        assert count(d_model, width, "swiglu") == 3 * d_model * width
        assert count(d_model, d_ff, "relu") == 2 * d_model * d_ff


@pytest.mark.parametrize("code", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_to_the_width_check_gives_a_message(code):
    result = tl.checks.check_swiglu_width(code)
    assert isinstance(result, tl.checks.CheckResult) and not result
    assert result.message.startswith("❌"), result.message


# --- read13: plausible wrong answers that passed or got a hint naming another problem -------------


def _budget_answer(*, heads=None, power_of_two=False, bits=False, d_model=False, error=ValueError):
    """A student's budget answer written by hand, with one of the read13 report's mistakes."""

    def answer(config, budget_bytes, dtype):
        h = config.num_heads
        d_k = config.d_model if d_model else config.d_model // h
        size = torch.finfo(dtype).bits if bits else torch.empty((), dtype=dtype).element_size()
        per_head = 2 * config.num_layers * d_k * size
        fit = [
            k
            for k in (heads(h) if heads else range(1, h + 1))
            if h % k == 0
            and (not power_of_two or k & (k - 1) == 0)
            and k * per_head <= budget_bytes
        ]
        if not fit:
            raise error("no head fits")
        return max(fit)

    return answer


def test_the_hand_written_budget_answer_passes():
    assert tl.checks.check_kv_heads_for_budget(_budget_answer())


def test_never_trying_all_heads_is_named():
    """``range(1, num_heads)`` passed every case before one where all 8 heads fit."""
    result = tl.checks.check_kv_heads_for_budget(_budget_answer(heads=lambda h: range(1, h)))
    assert not result and "range(1, num_heads)" in result.message, result.message


def test_powers_of_two_only_is_named_not_the_exact_budget():
    result = tl.checks.check_kv_heads_for_budget(_budget_answer(power_of_two=True))
    assert not result and "powers of two only" in result.message, result.message
    assert "<=" not in result.message


def test_a_strict_budget_still_gets_the_exact_budget_hint():
    def strict(config, budget_bytes, dtype):
        return solution.my_kv_heads_for_budget(config, budget_bytes - 1, dtype)

    result = tl.checks.check_kv_heads_for_budget(strict)
    assert not result and "use `<=`, not `<`" in result.message, result.message


@pytest.mark.parametrize("mistake", ["bits", "d_model"])
def test_a_per_head_count_too_large_to_fit_is_named(mistake):
    """Bits instead of bytes, or d_model instead of d_k: one head's count exceeds the budget, so
    the answer raises; the message names the count, not only the raise."""
    result = tl.checks.check_kv_heads_for_budget(_budget_answer(**{mistake: True}))
    assert not result and "one head's bytes is too large" in result.message, result.message
    assert "not bits" in result.message and "not d_model" in result.message


@pytest.mark.parametrize("error", [RuntimeError, AssertionError])
def test_another_error_where_no_head_fits_asks_for_a_value_error(error):
    result = tl.checks.check_kv_heads_for_budget(_budget_answer(error=error))
    assert not result and f"raised {error.__name__}" in result.message, result.message
    assert "asks for a ValueError" in result.message


def test_changing_the_frozen_config_names_replace():
    def mutating(config, budget_bytes, dtype):
        k = solution.my_kv_heads_for_budget(config, budget_bytes, dtype)
        config.n_kv_heads = k
        return k

    result = tl.checks.check_kv_heads_for_budget(mutating)
    assert not result and "config.replace(n_kv_heads=k)" in result.message, result.message


def test_truncating_two_thirds_of_d_ff_first_is_named():
    """``int(2 * d_ff / 3)`` before the nearest multiple (Meta's code truncates) passed every case
    before (12, 10, 4): 6.67 becomes 6, a tie, and 4 where 8 is closest."""

    def truncated(d_model, d_ff, multiple_of):
        target = int(2 * d_ff / 3)
        below = target // multiple_of * multiple_of
        closer = below if target - below <= below + multiple_of - target else below + multiple_of
        return max(multiple_of, closer)

    assert nb13._swiglu_width(12, 10, 4) == 8 and truncated(12, 10, 4) == 4
    result = tl.checks.check_swiglu_width(truncated)
    assert not result and "truncated 2 d_ff / 3" in result.message, result.message


@pytest.mark.parametrize(
    "ties_up",
    [
        lambda x: math.floor(x + 0.5),
        lambda x: math.floor(x) + (x - math.floor(x) >= 0.5),  # `>=` where `>` belongs
    ],
    ids=["floor(x + 0.5)", "comparison"],
)
def test_a_tie_rounded_up_without_round_is_named_by_what_it_did(ties_up):
    result = tl.checks.check_swiglu_width(lambda d, d_ff, m: m * max(1, ties_up(2 * d_ff / 3 / m)))
    assert not result and "your width is the larger" in result.message, result.message
    assert "halfway between 4 and 8" in result.message


def test_the_repeat_kv_hints_never_recommend_the_forbidden_functions():
    hints = [mistake.hint for mistake in nb13.REPEAT_KV.mistakes] + [nb13.REPEAT_KV.hint]
    assert not any("repeat_interleave(" in hint or ".repeat(" in hint for hint in hints)


def test_an_expand_with_the_new_axis_before_h_kv_is_named_as_tiling():
    """Exercise 4 leaves the place of the new axis to the learner: the wrong place tiles."""

    def axis_first(x, num_heads):
        b, h_kv, t, d = x.shape
        return x[:, None].expand(b, num_heads // h_kv, h_kv, t, d).reshape(b, num_heads, t, d)

    result = tl.checks.check_repeat_kv(axis_first)
    assert not result and "0, 1, 0, 1" in result.message, result.message
    assert "new axis after h_kv" in result.message


def test_code_that_replaces_the_reference_does_not_fail_the_next_answer():
    """read13 finding 11: a hostile answer rebinds the module's reference; it fails, and a correct
    answer checked after it in the same kernel still passes."""
    original = nb13._kv_heads_for_budget

    def hostile(config, budget_bytes, dtype):
        nb13._kv_heads_for_budget = lambda *args: 1
        return 1

    try:
        assert not tl.checks.check_kv_heads_for_budget(hostile)
        assert tl.checks.check_kv_heads_for_budget(solution.my_kv_heads_for_budget)
    finally:
        nb13._kv_heads_for_budget = original
