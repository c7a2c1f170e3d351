"""Notebook 03 · positional encoding: the sinusoidal table, and the module that adds it."""

import math

import torch
from torch import nn

import transformer_lib as tl


def my_sinusoidal_encoding(d_model, max_len):
    """``(max_len, d_model)``: ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, ``PE[pos, 2i+1] =
    cos(...)``."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : d_model // 2]
    return table


class MyPositionalEncoding(nn.Module):
    """Adds the table along the sequence axis; the table is a buffer: it moves with the module,
    nothing trains it."""

    def __init__(self, d_model, max_len):
        super().__init__()
        # (1, max_len, d_model)
        self.register_buffer("pe", my_sinusoidal_encoding(d_model, max_len)[None])

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]  # (B, T, d_model)


ANSWERS = {
    "3": (
        "A learned table has one trained row per position up to the longest training sequence; a "
        "later position "
        "has no row at all (or an untrained one). The sinusoids are defined for every position, "
        "and PE[pos + k] is "
        "PE[pos] rotated by a fixed angle per frequency pair (section 3), the same map at every "
        "pos. A model that "
        "has learned to use relative offsets through that rotation could apply it beyond the "
        "training lengths; "
        "one that relies on the absolute pattern of positions it has seen gains nothing. The paper "
        "states this "
        "as its hypothesis (section 3.5: it 'may allow the model to extrapolate to sequence "
        "lengths longer than "
        "the ones encountered during training') and does not test it; later work found that "
        "extrapolation with "
        "sinusoids is limited in practice (Press, Smith & Lewis 2022, 'Train Short, Test Long: "
        "Attention with "
        "Linear Biases Enables Input Length Extrapolation')."
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
    "my_sinusoidal_encoding": (
        lambda d, n: tl.sinusoidal_encoding(d_model=n, max_len=d),
        "swapped the arguments",
    ),
    "MyPositionalEncoding": (_TableAsParameter, "register_buffer"),
}
