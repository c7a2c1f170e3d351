"""Notebook 03 · positional encoding: the check of the sinusoidal table, as a function or as a
module.

``check_positional_encoding`` has two entries, picked by what the learner passes:
``POSITIONAL_TABLE`` (variant ``"table"``) for a function ``(d_model, max_len) -> (max_len,
d_model)``, ``POSITIONAL_MODULE`` (variant ``"module"``) for a class that stores the table as a
buffer and adds it.
"""

from functools import partial

import torch
from torch import nn

from ... import sinusoidal_encoding
from ..checks import inputs as draw
from ..checks import references
from .engine import CheckResult, Entry, Mistake, is_instance, judge
from .registry import Exercise, Question

__all__ = ["check_positional_encoding"]


# --- the entries: each check's reference, the inputs it draws, its known mistakes -----------------

POSITIONAL_TABLE = Entry(
    "check_positional_encoding",
    "your encoding",
    lambda d_model, max_len: sinusoidal_encoding(d_model=d_model, max_len=max_len),
    draw.positional_tables,
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
    ],
    "Hint: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...); the pair (2i, "
    "2i+1) shares a frequency.",
    "the table matches the paper's formula, with the arguments (d_model, max_len).",
    variant="table",
)


POSITIONAL_MODULE = Entry(
    "check_positional_encoding",
    "your module",
    references.positional_encoding,
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

ENTRIES = (POSITIONAL_TABLE, POSITIONAL_MODULE)


# --- the checks the notebooks call ----------------------------------------------------------------


def check_positional_encoding(encoding) -> CheckResult:
    """A function ``encoding(d_model, max_len) -> (max_len, d_model)`` table, or a class
    ``encoding(d_model, max_len)`` that stores the table as a buffer and whose ``forward(x (B, T,
    d_model))`` adds it to ``x``."""
    # an instance goes to the module entry, which says "the class"
    module = is_instance(encoding, type | nn.Module)  # False where even isinstance raises
    return judge(POSITIONAL_MODULE if module else POSITIONAL_TABLE, encoding)


# --- the exercises --------------------------------------------------------------------------------

EXERCISES = [
    Exercise(
        "03",
        "1",
        "my_sinusoidal_encoding",
        "the sinusoidal table, (d_model, max_len) -> (max_len, d_model)",
        "check_positional_encoding",
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
