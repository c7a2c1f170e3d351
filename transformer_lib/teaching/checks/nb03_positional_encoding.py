"""Notebook 03 · positional encoding: the check of the sinusoidal table, as a function or as a
module.

``check_positional_encoding`` has two entries, picked by what the learner passes:
``POSITIONAL_TABLE`` (variant ``"table"``) for a function
``(d_model, max_len) -> (max_len, d_model)``, ``POSITIONAL_MODULE`` (variant ``"module"``) for a
class that stores the table as a buffer and adds it.
"""

import math
from functools import partial

import torch
from torch import nn

from ...model.layers import PositionalEncoding, sinusoidal_encoding
from . import inputs as draw
from .engine import Case, CheckResult, Entry, Failure, Mistake, is_instance, judge
from .registry import Exercise, Question

__all__ = ["check_positional_encoding", "check_sinusoidal_halves"]


# --- this notebook's cases and the known mistakes' code -------------------------------------------


def _table_cases() -> list[Case]:
    return [
        Case((16, 50), "for d_model=16, max_len=50"),
        Case((6, 10), "for d_model=6, max_len=10"),
    ]


def _encoding_reference(student: nn.Module, d_model: int, max_len: int) -> PositionalEncoding:
    """Check that the table is a registered buffer, then return the library's module."""
    size = d_model * max_len
    if not any(t.numel() == size for t in student.buffers()):
        params = [n for n, p in student.named_parameters() if p.numel() == size]
        plain = [
            n for n, v in vars(student).items() if isinstance(v, torch.Tensor) and v.numel() == size
        ]
        if params:
            raise Failure(
                f"the table is an nn.Parameter (`{params[0]}`): trainable, it would be "
                "learned, not fixed; frozen (requires_grad=False), it still shows up in "
                "`.parameters()` and in parameter counts, and is handed to the optimizer. Hint: "
                "`self.register_buffer('pe', table)`: it moves with `.to(device)`, is saved "
                "in the state_dict, and is no parameter."
            )
        if plain:
            raise Failure(
                f"the table is a plain attribute `self.{plain[0]}`: `.to(device)` leaves "
                "it behind, so on a GPU it stays on the CPU. Hint: "
                "`self.register_buffer('pe', table)`."
            )
        raise Failure(
            f"no buffer of max_len x d_model = {size} numbers: store the table with "
            "`self.register_buffer('pe', table)`."
        )
    return PositionalEncoding(d_model, max_len=max_len, dropout=0.0)


def _table(d_model: int, max_len: int, *, layout="interleaved", exponent="2i", sin_first=True):
    """The sinusoidal table written out, with a knob per typical mistake: ``exponent="i"`` uses
    ``w_i = 10000^(-i/d_model)`` for the i-th pair (i = 0, 1, 2, ...) instead of the paper's
    ``10000^(-2i/d_model)``; ``layout="halves_floor"`` gives odd widths floor(d/2) sines and
    ceil(d/2) cosines; ``sin_first=False`` puts the cosines where the sines belong."""
    pairs = torch.arange((d_model + 1) // 2, dtype=torch.float64)  # i = 0, 1, ..., ceil(d/2) - 1
    step = 2 * pairs if exponent == "2i" else pairs
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * torch.exp(
        -step * math.log(10000.0) / d_model
    )  # (max_len, ceil(d_model / 2))
    first, second = (angles.sin(), angles.cos()) if sin_first else (angles.cos(), angles.sin())
    if layout == "interleaved":
        table = torch.stack([first, second], -1).flatten(1)[:, :d_model]
    elif layout == "halves":
        table = torch.cat([first, second[:, : d_model // 2]], -1)
    else:  # halves_floor
        table = torch.cat([first[:, : d_model // 2], second], -1)
    return table.float()  # (max_len, d_model)


_EXPONENT_HINT = (
    "the frequencies fall too slowly: pair i turns at 1 / 10000^(2i/d_model), where 2i is the "
    "index of the pair's even feature (0, 2, 4, ...), and you used 10000^(i/d_model) with i = 0, "
    "1, 2, .... Hint: `torch.arange(0, d_model, 2) / d_model` as the exponent."
)


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

POSITIONAL_TABLE = Entry(
    "check_positional_encoding",
    "your encoding",
    lambda d_model, max_len: sinusoidal_encoding(d_model=d_model, max_len=max_len),
    _table_cases,
    [
        Mistake(
            "you swapped the arguments: the order is (d_model, max_len), like "
            "PositionalEncoding(d_model, max_len). Hint: `def my_sinusoidal_encoding(d_model, "
            "max_len)`.",
            lambda d, n: sinusoidal_encoding(d_model=n, max_len=d),
        ),
        Mistake(
            "the table is transposed: rows are positions, (max_len, d_model).",
            lambda d, n: sinusoidal_encoding(d_model=d, max_len=n).T,
        ),
        Mistake(
            "sin and cos are swapped: even features 2i get sin, odd ones 2i+1 get cos.",
            lambda d, n: sinusoidal_encoding(d_model=d, max_len=n)[
                :, torch.arange(d).view(-1, 2).flip(1).flatten()
            ],
        ),
        Mistake(_EXPONENT_HINT, partial(_table, exponent="i")),
        Mistake(
            "this is the halves layout (every sine, then every cosine); this exercise asks for "
            "the paper's interleaved one: sin in even features 2i, cos in odd features 2i+1.",
            partial(_table, layout="halves"),
        ),
    ],
    "Hint: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...); the pair (2i, "
    "2i+1) shares a frequency.",
    "the table matches the paper's formula, with the arguments (d_model, max_len).",
    variant="table",
)


POSITIONAL_MODULE = Entry(
    "check_positional_encoding",
    "your module",
    _encoding_reference,
    partial(draw.floats, [(3, 6, 16), (2, 9, 16)], ((16, 50), {})),
    [
        Mistake(
            "every sequence in the batch got a different encoding, and every position in a "
            "sequence the same one: the encodings were added along the batch axis. Hint: the "
            "table must be (1, max_len, d_model) and added as `x + pe[:, :x.size(1)]`.",
            lambda ref, x: x + ref.pe[0, : x.size(0), None],
        )
    ],
    "Hint: added to x, your module should give x + PE[:T], the same for every sequence.",
    "stores the table as a buffer and adds the same encodings to every sequence, along the "
    "positions.",
    builds=True,
    variant="module",
)

SINUSOIDAL_HALVES = Entry(
    "check_sinusoidal_halves",
    "your table",
    partial(_table, layout="halves"),
    lambda: [
        Case((8, 12), "for d_model=8, max_len=12"),
        Case((16, 50), "for d_model=16, max_len=50"),
        Case((7, 10), "for the odd d_model=7, max_len=10"),
    ],
    [
        Mistake(
            "this is section 2's interleaved layout (sin w0 | cos w0 | sin w1 | ...); the halves "
            "layout puts the same numbers in another column order: every sine first, slowest "
            "last, then every cosine.",
            _table,
        ),
        Mistake(
            "the cosines came first: the halves layout starts with the sines, then the cosines.",
            partial(_table, layout="halves", sin_first=False),
        ),
        Mistake(
            "with an odd d_model the table has one more sine than cosine (as section 2's table "
            "has: its last column, an even feature, is a sine): ceil(d_model / 2) sines, then "
            "floor(d_model / 2) cosines; you gave the extra column to the cosines.",
            partial(_table, layout="halves_floor"),
        ),
        Mistake(_EXPONENT_HINT, partial(_table, layout="halves", exponent="i")),
        Mistake(
            "you swapped the arguments: the order is (d_model, max_len).",
            lambda d, n: _table(n, d, layout="halves"),
        ),
        Mistake(
            "the table is transposed: rows are positions, (max_len, d_model).",
            lambda d, n: _table(d, n, layout="halves").T,
        ),
    ],
    "Hint: the halves table holds section 2's numbers with its columns reordered: first the "
    "sines, columns 0, 2, 4, ... of the interleaved table, then the cosines, columns 1, 3, 5, "
    "....",
    "every sine first, then every cosine, odd widths too: section 2's numbers in the halves "
    "layout.",
)

ENTRIES = (POSITIONAL_TABLE, POSITIONAL_MODULE, SINUSOIDAL_HALVES)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_positional_encoding(encoding) -> CheckResult:
    """A function ``encoding(d_model, max_len) -> (max_len, d_model)`` table, or a class
    ``encoding(d_model, max_len)`` that stores the table as a buffer and whose
    ``forward(x (B, T, d_model))`` adds it to ``x``."""
    # an instance goes to the module entry, which says "the class"
    module = is_instance(encoding, type | nn.Module)  # False where even isinstance raises
    return judge(POSITIONAL_MODULE if module else POSITIONAL_TABLE, encoding)


def check_sinusoidal_halves(encoding) -> CheckResult:
    """Check ``encoding(d_model, max_len) -> (max_len, d_model)``: the sinusoidal table in the
    "halves" layout (MarianMT's): ``ceil(d_model / 2)`` sines, ``sin(pos * w_i)`` for i = 0, 1,
    ..., then ``floor(d_model / 2)`` cosines, ``cos(pos * w_i)``, with the paper's
    ``w_i = 10000^(-2i/d_model)``; odd widths too. Returns a CheckResult: truthy when it passed; it
    prints as one friendly paragraph."""
    return judge(SINUSOIDAL_HALVES, encoding)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "03",
        "1",
        "my_sinusoidal_halves",
        "the sinusoidal table in the halves layout, odd d_model too",
        "check_sinusoidal_halves",
    ),
    Exercise(
        "03",
        "2",
        "MyPositionalEncoding",
        "the module that stores the table as a buffer and adds it",
        "check_positional_encoding",
    ),
]

QUESTIONS = [Question("03", "3", "what learned and sinusoidal positions give an unseen position")]
