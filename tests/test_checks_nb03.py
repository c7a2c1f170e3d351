"""The checks of notebook 03: the positional encoding module and the halves table."""

import math

import pytest
import torch
from torch import nn

import transformer_lib as tl


def test_positional_encoding_table_form_takes_d_model_first():
    assert tl.checks.check_positional_encoding(
        lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n)
    )
    flipped = tl.checks.check_positional_encoding(
        lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n).flip(1)
    )
    assert not flipped and "Hint" in flipped.message


class TablePlainAttribute(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.pe = tl.sinusoidal_encoding(d_model=d_model, max_len=max_len)[None]

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


def test_positional_encoding_module_must_keep_its_table_in_a_buffer():
    result = tl.checks.check_positional_encoding(TablePlainAttribute)
    assert (
        not result and "plain attribute" in result.message and "register_buffer" in result.message
    )


def test_positional_encoding_check_given_an_instance_asks_for_the_class():
    import solutions

    module = solutions.solution("03", "MyPositionalEncoding")(16, 50)
    result = tl.checks.check_positional_encoding(module)
    assert not result and "pass the class itself, not an instance" in result.message, result.message


def _halves_from_angles(d_model, max_len):
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange(0, d_model, 2) / d_model * math.log(10000.0)
    )
    return torch.cat([angles.sin(), angles.cos()], dim=-1)[:, :d_model]


def _halves_by_permutation(d_model, max_len):
    table = tl.sinusoidal_encoding(d_model, max_len)
    order = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])
    return table[:, order]


def _halves_loops(d_model, max_len):
    sines = (d_model + 1) // 2
    rows = []
    for pos in range(max_len):
        row = [math.sin(pos / 10000 ** (2 * i / d_model)) for i in range(sines)]
        row += [math.cos(pos / 10000 ** (2 * i / d_model)) for i in range(d_model // 2)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("table", [_halves_from_angles, _halves_by_permutation, _halves_loops])
def test_every_correct_halves_table_passes(table):
    result = tl.checks.check_sinusoidal_halves(table)
    assert result, result.message


def _halves_floor(d_model, max_len):
    """Odd widths: floor(d/2) sines, then ceil(d/2) cosines (the extra column to the cosines)."""
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange(0, d_model, 2) / d_model * math.log(10000.0)
    )
    return torch.cat([angles.sin()[:, : d_model // 2], angles.cos()], dim=-1)


def _with_exponent_i(d_model, max_len, halves):
    angles = torch.arange(max_len)[:, None] * torch.exp(
        -torch.arange((d_model + 1) // 2) / d_model * math.log(10000.0)
    )
    if halves:
        return torch.cat([angles.sin(), angles.cos()[:, : d_model // 2]], dim=-1)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :d_model]


@pytest.mark.parametrize(
    ("table", "words"),
    [
        (lambda d, n: tl.sinusoidal_encoding(d, n), "interleaved layout"),
        (lambda d, n: _halves_from_angles(d, n).roll(d // 2, dims=1), "cosines came first"),
        (_halves_floor, "one more sine than cosine"),
        (lambda d, n: _with_exponent_i(d, n, halves=True), "2i/d_model"),
        (lambda d, n: _halves_from_angles(n, d), "swapped the arguments"),
        (lambda d, n: _halves_from_angles(d, n).T, "transposed"),
    ],
)
def test_typical_mistakes_in_the_halves_table_are_named(table, words):
    result = tl.checks.check_sinusoidal_halves(table)
    assert not result and words in result.message, result.message


def test_the_interleaved_table_check_names_the_i_exponent_and_the_halves_layout():
    exponent = tl.checks.check_positional_encoding(
        lambda d, n: _with_exponent_i(d, n, halves=False)
    )
    assert not exponent and "2i/d_model" in exponent.message, exponent.message
    halves = tl.checks.check_positional_encoding(_halves_from_angles)
    assert not halves and "halves layout" in halves.message, halves.message


def test_a_frozen_parameter_table_is_refused_for_the_true_reason():
    class Frozen(nn.Module):
        def __init__(self, d_model, max_len):
            super().__init__()
            table = tl.sinusoidal_encoding(d_model, max_len)[None]
            self.pe = nn.Parameter(table, requires_grad=False)

        def forward(self, x):
            return x + self.pe[:, : x.size(1)]

    result = tl.checks.check_positional_encoding(Frozen)
    assert not result and ".parameters()" in result.message, result.message
    assert "optimizer would change it" not in result.message
