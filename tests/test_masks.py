import pytest
import torch

import transformer_lib as tl


def test_padding_mask_marks_real_tokens_with_true():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    mask = tl.padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, False, False, False]]


def test_causal_mask_is_lower_triangular():
    mask = tl.causal_mask(4)
    assert mask.shape == (1, 1, 4, 4)
    assert torch.equal(mask[0, 0], torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_with_cached_past_lets_new_queries_see_all_earlier_keys():
    mask = tl.causal_mask(2, 5)  # the last 2 of 5 positions
    assert mask[0, 0].tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_masks_combine_with_and():
    tokens = torch.tensor([[4, 5, 0]])
    combined = tl.padding_mask(tokens, 0) & tl.causal_mask(3)
    assert combined.shape == (1, 1, 3, 3)
    assert combined[0, 0].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, False],
    ]


def test_check_mask_names_shapes_in_its_error():
    with pytest.raises(
        ValueError, match=r"mask of shape \(2, 1, 1, 7\) cannot broadcast to scores \(2, 8, 5, 5\)"
    ):
        tl.masks.check_mask(torch.ones(2, 1, 1, 7, dtype=torch.bool), (2, 8, 5, 5))


def test_check_mask_refuses_a_mask_that_would_grow_the_scores():
    with pytest.raises(ValueError, match="cannot broadcast"):
        tl.masks.check_mask(torch.ones(3, 1, 1, 5, dtype=torch.bool), (1, 8, 5, 5))


def test_check_mask_refuses_non_bool_masks():
    with pytest.raises(TypeError, match="dtype torch.bool"):
        tl.masks.check_mask(torch.ones(1, 1, 5, 5), (2, 8, 5, 5))


@pytest.mark.parametrize(
    "bad, message",
    [((0, 3), "size_q must be >= 1, got size_q=0"), ((3, 2), "1 <= T_q <= T_k, got T_q=3, T_k=2")],
)
def test_causal_mask_rejects_impossible_sizes(bad, message):
    with pytest.raises(ValueError, match=message):
        tl.causal_mask(*bad)


def test_padding_mask_rejects_wrong_rank():
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        tl.padding_mask(torch.zeros(2, 3, 4, dtype=torch.long), 0)


def test_check_mask_advises_the_3d_padding_mask_for_3d_scores():
    """For scores (B, T_q, T_k) the advice must be a mask that then passes: tl.padding_mask(...)[:,
    0]."""
    tokens = torch.tensor([[5, 6, 0, 0, 0, 0, 0], [7, 8, 9, 0, 0, 0, 0]])  # (B, T_k) = (2, 7)
    with pytest.raises(ValueError) as error:
        tl.masks.check_mask(tl.padding_mask(tokens, 0)[:, 0, 0], (2, 5, 7))  # a (B, T_k) mask
    message = str(error.value)
    assert "tl.padding_mask(tokens, pad_id)[:, 0], which gives (B, 1, T_k)" in message
    assert "(B, 1, 1, T_k)" not in message  # the 4-D form would fail the same check again
    assert "For scores (B, T_q, T_k): padding (B, 1, T_k), causal (1, T_q, T_k)" in message
    tl.masks.check_mask(tl.padding_mask(tokens, 0)[:, 0], (2, 5, 7))  # the advice passes
    tl.masks.check_mask(tl.causal_mask(5, 7)[0], (2, 5, 7))
    with pytest.raises(
        ValueError, match=r"expected a padding mask \(B, 1, T_k\), a causal mask \(1, T_q, T_k\)"
    ):
        tl.masks.check_mask(torch.ones(3, 1, 7, dtype=torch.bool), (2, 5, 7))


def test_check_mask_advises_the_4d_padding_mask_for_4d_scores():
    with pytest.raises(
        ValueError, match=r"tl.padding_mask\(tokens, pad_id\), which gives \(B, 1, 1, T_k\)"
    ):
        tl.masks.check_mask(torch.ones(2, 7, dtype=torch.bool), (2, 4, 5, 7))
