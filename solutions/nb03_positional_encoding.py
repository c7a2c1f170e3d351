"""Notebook 03 · positional encoding: the sinusoidal table, and the module that adds it."""

import math

import torch
from torch import nn


def my_sinusoidal_encoding(d_model, max_len):
    """``(max_len, d_model)``: ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, ``PE[pos, 2i+1] = cos(...)``."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : d_model // 2]
    return table


class MyPositionalEncoding(nn.Module):
    """Adds the table along the sequence axis; the table is a buffer: it moves with the module, nothing trains it."""

    def __init__(self, d_model, max_len):
        super().__init__()
        self.register_buffer("pe", my_sinusoidal_encoding(d_model, max_len)[None])  # (1, max_len, d_model)

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]  # (B, T, d_model)


ANSWERS = {
    "3": (
        "A learned nn.Embedding(max_len, d_model) has one row per position; a row that no training sequence reached "
        "keeps its random initial values (and a position >= max_len has no row at all), so the model gets noise "
        "it never learned to read. The sinusoidal formula gives every position a well-defined vector of the same "
        "kind as the trained ones: PE[pos + k] is PE[pos] rotated by the angle k * w_i in each frequency pair "
        "(section 3), a fixed linear map that depends only on k. For that to help, the model must have learned to "
        "use relative offsets through such rotations (its W^Q W^K^T reading the rotation between two positions) "
        "rather than memorising absolute positions; then what it learned about 'k tokens back' still holds at "
        "unseen positions. The paper states this as a hypothesis and does not test it."
    ),
}
