"""The checks of notebook 06's exercises 1 and 2 (issue 36): the learner decides who shares the
smoothing mass when some ids are never a right answer, and inverts the paper's schedule. Every
correct form passes, every named mistake earns its own hint, and odd answers give a message, never
an exception."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from solutions import nb06_training as solution
from transformer_lib.teaching.checks import nb06_training as nb06

# --- exercise 1: label smoothing that never predicts some ids -------------------------------------


def _one_hot_arithmetic(target, vocab_size, eps, pad_id, never):
    allowed = torch.ones(vocab_size)
    allowed[[pad_id, *never]] = 0.0  # (V,): 1 where an id can be a right answer
    hot = F.one_hot(target, vocab_size).float()  # (N, V)
    share = eps / (allowed.sum() - 1)  # the target is allowed, and takes 1 - eps
    dist = hot * (1 - eps) + (1 - hot) * allowed * share
    return dist * (target != pad_id)[:, None]


def _row_by_row(target, vocab_size, eps, pad_id, never):
    rows = []
    for t in target.tolist():
        row = [0.0] * vocab_size
        if t != pad_id:
            sharing = [i for i in range(vocab_size) if i not in never and i not in (pad_id, t)]
            for i in sharing:
                row[i] = eps / len(sharing)
            row[t] = 1 - eps
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


def _where(target, vocab_size, eps, pad_id, never):
    ids = torch.arange(vocab_size)
    banned = torch.isin(ids, torch.tensor([pad_id, *never], dtype=torch.long))  # (V,)
    count = vocab_size - 2 - len(never)
    dist = torch.where(banned, 0.0, eps / count).expand(len(target), -1).clone()  # (N, V)
    dist[torch.arange(len(target)), target] = 1 - eps
    dist[target == pad_id] = 0
    return dist


@pytest.mark.parametrize(
    "make_targets",
    [solution.my_smoothed_targets, _one_hot_arithmetic, _row_by_row, _where],
    ids=["solution", "one_hot", "row by row, float64", "where"],
)
def test_every_correct_way_to_smooth_without_the_never_ids_passes(make_targets):
    result = tl.checks.check_smoothing_never(make_targets)
    assert result and result.message.startswith("✅"), result.message


@pytest.mark.parametrize(
    "mistake", nb06.SMOOTHING_NEVER.mistakes, ids=range(len(nb06.SMOOTHING_NEVER.mistakes))
)
def test_each_smoothing_mistake_gets_its_own_hint(mistake):
    result = tl.checks.check_smoothing_never(mistake.version)
    assert not result and mistake.hint in result.message, result.message


def test_section_4s_library_function_is_named_for_the_never_ids():
    result = tl.checks.check_smoothing_never(
        lambda target, v, eps, pad_id, never: tl.smoothed_targets(target, v, eps, pad_id)
    )
    assert not result and "never a right answer" in result.message, result.message


def test_the_target_taking_a_share_of_eps_is_named():
    """Reading "eps is shared by the ids that can still be a right answer" with the target among
    them: rows still sum to 1, and the hint says the target keeps exactly 1 - eps."""

    def target_shares(target, vocab_size, eps, pad_id, never):
        allowed = torch.ones(vocab_size)
        allowed[[pad_id, *never]] = 0.0  # (V,)
        dist = (allowed * eps / allowed.sum()).expand(len(target), -1).clone()  # (N, V)
        dist[torch.arange(len(target)), target] += 1 - eps
        dist[target == pad_id] = 0.0
        return dist

    result = tl.checks.check_smoothing_never(target_shares)
    assert not result and "it keeps exactly 1 - eps" in result.message, result.message


def test_an_error_names_the_case_that_raised_it():
    """``torch.tensor(never)`` is a float tensor for ``never=[]``, which cannot index: the message
    says which case raised."""

    def float_index(target, vocab_size, eps, pad_id, never):
        dist = solution.my_smoothed_targets(target, vocab_size, eps, pad_id, never)
        dist[:, torch.tensor(never)] = 0.0
        return dist

    result = tl.checks.check_smoothing_never(float_index)
    assert not result and "never=[]" in result.message and "IndexError" in result.message


def test_the_generic_hints_ask_and_do_not_give_the_formula():
    for entry in (nb06.SMOOTHING_NEVER, nb06.STEPS_TO_FRACTION):
        assert "?" in entry.hint and "len(never))" not in entry.hint and "<=" not in entry.hint


def test_the_cases_tell_the_three_wrong_denominators_apart():
    """V - 2, V - 1 - len(never) and V - len(never) coincide when len(never) is 1 or 2: the first
    case has three ids in `never`, so each wrong count earns its own hint there."""
    target, vocab_size, _, _, never = nb06._smoothing_never_cases()[0].args
    counts = {vocab_size - 2, vocab_size - 1 - len(never), vocab_size - len(never)}
    assert len(counts) == 3 and vocab_size - 2 - len(never) not in counts


# --- exercise 2: the step where the rate has fallen to a fraction of its peak -------------------


def _loop(fraction, warmup):
    peak = tl.noam_lr(warmup, 512, warmup)
    step = warmup + 1
    while tl.noam_lr(step, 512, warmup) > fraction * peak:
        step += 1
    return step


@pytest.mark.parametrize(
    "steps_to_fraction",
    [
        solution.my_steps_to_fraction,
        _loop,
        lambda fraction, warmup: -(-warmup // fraction**2),  # a float: 1112.0
        lambda fraction, warmup: np.ceil(warmup / fraction**2),
        lambda fraction, warmup: torch.tensor(warmup / fraction**2).ceil().long(),
        lambda fraction, warmup: math.ceil((math.sqrt(warmup) / fraction) ** 2),
    ],
    ids=["solution", "loop over noam_lr", "floor division", "numpy", "torch", "sqrt first"],
)
def test_every_correct_way_to_invert_the_schedule_passes(steps_to_fraction):
    result = tl.checks.check_steps_to_fraction(steps_to_fraction)
    assert result and result.message.startswith("✅"), result.message


@pytest.mark.parametrize(
    "mistake", nb06.STEPS_TO_FRACTION.mistakes, ids=range(len(nb06.STEPS_TO_FRACTION.mistakes))
)
def test_each_schedule_mistake_gets_its_own_hint(mistake):
    result = tl.checks.check_steps_to_fraction(mistake.version)
    assert not result and mistake.hint in result.message, result.message


def _loop_from_step_1(fraction, warmup):
    peak = tl.noam_lr(warmup, 512, warmup)
    step = 1
    while tl.noam_lr(step, 512, warmup) > fraction * peak:
        step += 1
    return step  # 1: the rate at step 1 is already below the fraction


@pytest.mark.parametrize(
    "steps_to_fraction",
    [
        lambda fraction, warmup: fraction * warmup,
        _loop_from_step_1,
        lambda fraction, warmup: warmup,
    ],
    ids=["fraction * warmup", "a loop from step 1", "the peak itself"],
)
def test_any_answer_at_or_before_the_peak_is_told_it_is_on_the_warm_up_side(steps_to_fraction):
    result = tl.checks.check_steps_to_fraction(steps_to_fraction)
    assert not result and "warm-up side" in result.message, result.message
    assert "index" not in result.message


@pytest.mark.parametrize(("fraction", "warmup"), nb06._FRACTION_CASES)
def test_no_case_sits_on_a_tie_that_float_rounding_could_flip(fraction, warmup):
    exact = Fraction(warmup) / Fraction(fraction) ** 2  # the float fraction's exact value
    assert min(exact - math.floor(exact), math.ceil(exact) - exact) > Fraction(1, 100)
    assert math.ceil(warmup / fraction**2) == math.ceil(exact) == _loop(fraction, warmup)
    # the loop's cost stays small: its steps are the answer's
    assert math.ceil(exact) < 10_000


def test_the_success_message_holds():
    """'The rate halves at step 4 x warmup and falls to a tenth at step 100 x warmup.'"""
    for warmup in (100, 4000):
        for fraction, factor in ((0.5, 4), (0.1, 100)):
            step = factor * warmup
            peak = tl.noam_lr(warmup, 512, warmup)
            assert tl.noam_lr(step, 512, warmup) == pytest.approx(fraction * peak, rel=1e-12)
            assert tl.noam_lr(step - 1, 512, warmup) > fraction * peak


# --- both: odd answers give a message, never an exception ----------------------------------------

ODD = {
    "None": lambda *args: None,
    "a string": lambda *args: "1112",
    "NaN": lambda *args: float("nan"),
    "raises": lambda *args: 1 / 0,
    "a list": lambda *args: [1, 2],
    "a tensor of the wrong shape": lambda *args: torch.zeros(3, 2),
    "bool": lambda *args: True,
}


@pytest.mark.parametrize("check", ["check_smoothing_never", "check_steps_to_fraction"])
@pytest.mark.parametrize("answer", sorted(ODD))
def test_odd_answers_are_judged_never_raise(check, answer):
    result = getattr(tl.checks, check)(ODD[answer])
    assert isinstance(result, tl.checks.CheckResult) and not result
    assert result.message.startswith("❌"), result.message


@pytest.mark.parametrize("check", ["check_smoothing_never", "check_steps_to_fraction"])
def test_a_stub_is_not_implemented_yet(check):
    def stub(*args):
        raise NotImplementedError

    result = getattr(tl.checks, check)(stub)
    assert not result and "not implemented yet" in result.message


def test_a_learner_who_changes_the_never_list_is_told():
    def appends(target, vocab_size, eps, pad_id, never):
        never.append(pad_id)  # changes the caller's list
        return solution.my_smoothed_targets(target, vocab_size, eps, pad_id, never[:-1])

    result = tl.checks.check_smoothing_never(appends)
    assert isinstance(result, tl.checks.CheckResult)


def test_noam_check_takes_a_numpy_number_as_a_number():
    def numpy_schedule(step, d_model, warmup):
        return np.float32(d_model**-0.5) * np.float32(min(step**-0.5, step * warmup**-1.5))

    assert tl.checks.check_noam_lr(numpy_schedule)
