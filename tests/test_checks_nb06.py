"""The checks of notebook 06: label smoothing and the Noam schedule."""

import numpy as np

import transformer_lib as tl


def test_noam_check_takes_a_numpy_number_as_a_number():
    def numpy_schedule(step, d_model, warmup):
        return np.float32(d_model**-0.5) * np.float32(min(step**-0.5, step * warmup**-1.5))

    assert tl.checks.check_noam_lr(numpy_schedule)
