"""The checks of notebook 07: the temperature softmax."""

import torch

import transformer_lib as tl


def test_temperature_softmax_over_dim_1_is_named_and_no_grad_is_right():
    """Issue #29, 6."""
    result = tl.checks.check_temperature_softmax(lambda logits, t: (logits / t).softmax(dim=1))
    assert not result and "for (B, T, V) it is the positions" in result.message, result.message

    def under_no_grad(logits, t):
        with torch.no_grad():
            return (logits / t).softmax(-1)

    assert tl.checks.check_temperature_softmax(under_no_grad)
