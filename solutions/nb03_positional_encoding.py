"""Notebook 03 · positional encoding: the sinusoidal table in the halves layout, and the module
that adds the table."""

import math

import torch
from torch import nn

import transformer_lib as tl


def my_sinusoidal_halves(d_model, max_len):
    """``(max_len, d_model)`` in the halves layout: the ``ceil(d_model / 2)`` sines ``sin(pos *
    w_i)``, then the ``floor(d_model / 2)`` cosines ``cos(pos * w_i)``, with ``w_i =
    10000^(-2i/d_model)``. The interleaved table holds the sines in its even columns and the
    cosines in its odd ones (one more even column when d_model is odd), so the halves table is
    those columns, evens first."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    exponent = torch.arange(0, d_model, 2, dtype=torch.float32) / d_model  # 2i / d_model
    angles = position * torch.exp(-exponent * math.log(10000.0))  # (max_len, ceil(d_model / 2))
    return torch.cat([angles.sin(), angles.cos()[:, : d_model // 2]], dim=-1)  # (max_len, d_model)


class MyPositionalEncoding(nn.Module):
    """Adds the table along the sequence axis; the table is a buffer: it moves with the module,
    nothing trains it."""

    def __init__(self, d_model, max_len):
        super().__init__()
        # (1, max_len, d_model)
        self.register_buffer("pe", tl.sinusoidal_encoding(d_model, max_len)[None])

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]  # (B, T, d_model)


ANSWERS = {
    "3": (
        "A learned table has one trained row per position up to the longest training sequence; a "
        "later position has no row at all (or an untrained one). The sinusoids are defined for "
        "every position, and PE[pos + k] is PE[pos] rotated by a fixed angle per frequency pair "
        "(section 3), the same map at every pos. A model that has learned to use relative offsets "
        "through that rotation could apply it beyond the training lengths; one that relies on the "
        "absolute pattern of positions it has seen gains nothing. The paper states this as its "
        "hypothesis (section 3.5: it 'may allow the model to extrapolate to sequence lengths "
        "longer than the ones encountered during training') and does not test it; later work found "
        "that extrapolation with sinusoids is limited in practice (Press, Smith & Lewis 2022, "
        "'Train Short, Test Long: Attention with Linear Biases Enables Input Length "
        "Extrapolation')."
    ),
}


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
class _TableAsParameter(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.pe = nn.Parameter(tl.sinusoidal_encoding(d_model=d_model, max_len=max_len)[None])

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


WRONG_ANSWERS = {
    "my_sinusoidal_halves": (
        lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n),
        "interleaved layout",
    ),
    "MyPositionalEncoding": (_TableAsParameter, "register_buffer"),
}
