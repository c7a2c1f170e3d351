"""The checks of notebook 01: attention and the causal mask."""

import math

import pytest
import torch
from checks_students import solution

import transformer_lib as tl


def test_cached_causal_mask_check():
    assert tl.checks.check_causal_mask(lambda q, k: tl.causal_mask(q, k), with_cache=True)
    result = tl.checks.check_causal_mask(
        lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), with_cache=True
    )
    assert "sees every cached token" in result.message


def one_mask_for_the_batch(q, k, v, mask=None):
    return tl.scaled_dot_product_attention(q, k, v, None if mask is None else mask[:1])


def test_attention_checks_see_per_sequence_masks_and_the_opposite_polarity():
    result = tl.checks.check_attention(one_mask_for_the_batch)
    assert not result and "first sequence's mask" in result.message
    opposite = tl.checks.check_attention(
        lambda q, k, v, mask=None: tl.scaled_dot_product_attention(
            q, k, v, None if mask is None else ~mask
        )
    )
    assert not opposite and "opposite polarity" in opposite.message


@pytest.mark.parametrize(
    "make_mask",
    [
        lambda t: torch.ones(t, t, dtype=torch.bool).tril().flatten(),
        lambda t: torch.ones(t, t, dtype=torch.bool).tril()[:, None],
    ],
)
def test_the_causal_mask_check_accepts_only_the_two_documented_shapes(make_mask):
    assert not tl.checks.check_causal_mask(make_mask)


@pytest.mark.parametrize(
    ("mistake", "words"),
    [
        (
            lambda q, k, v, mask=None: tl.scaled_dot_product_attention(q, k, v, mask)[::-1],
            "(weights, output)",
        ),
        (
            lambda q, k, v, mask=None: (
                (q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))).softmax(-1) @ v
                if mask is None
                else tl.scaled_dot_product_attention(q, k, v, mask)[0]
            ),
            "sqrt(d_v)",
        ),
    ],
)
def test_more_attention_mistakes_get_their_hints(mistake, words):
    result = tl.checks.check_attention(mistake)
    assert not result and words in result.message, result.message


def test_masking_after_the_softmax_gets_its_hint():
    def after_softmax(q, k, v, mask=None):
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v

    result = tl.checks.check_attention(after_softmax)
    assert not result and "after the softmax" in result.message, result.message


def test_a_query_that_sees_no_key_must_get_zeros_not_nan():
    """Issue #29, 5 (the in-place half:
    test_student_code_that_changes_the_callers_input_in_place_is_named)."""

    def nan_rows(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights

    result = tl.checks.check_attention(nan_rows)
    assert not result and "may see no key got NaN" in result.message, result.message
    assert tl.checks.check_attention(solution("01", "my_attention"))


def _annotated_attention(q, k, v, mask=None):
    """The Annotated Transformer's attention: masked scores -1e9, no care for a row with no key."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def test_the_annotated_transformers_attention_gets_its_own_hint():
    result = tl.checks.check_attention(_annotated_attention)
    assert not result and "-1e9" in result.message and "uniform" in result.message, result.message


def test_minus_1e9_then_zeroed_empty_rows_is_correct():
    def attention(q, k, v, mask=None):
        out, weights = _annotated_attention(q, k, v, mask)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v, weights

    assert tl.checks.check_attention(attention)
