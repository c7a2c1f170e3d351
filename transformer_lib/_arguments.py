"""Argument checks shared by the library's constructors: one wording for every "expected X, got Y" error.

Integers and reals are the abstract ones (:mod:`numbers`), so NumPy scalars from a grid or a CSV pass too;
``bool`` is refused where a number is meant, because ``True`` would silently count as 1.
"""

import numbers

__all__ = ["check_positive_ints", "check_probability", "check_choice", "check_positive_real", "is_int"]


def is_int(value: object) -> bool:
    """An integer (Python's or NumPy's), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive_ints(**values: object) -> None:
    """Raise a TypeError (not an int) or ValueError (below 1) naming the first argument that is not a positive int."""
    for name, value in values.items():
        if not is_int(value):
            raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {name}={value}")


def check_probability(**values: object) -> None:
    """Raise a TypeError/ValueError naming the first argument that is not a number in [0, 1)."""
    for name, value in values.items():
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{name} must be a float in [0, 1), got {value!r} of type {type(value).__name__}")
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must lie in [0, 1), got {name}={value}")


def check_choice(name: str, value: object, choices: tuple) -> None:
    """Raise a ValueError naming ``name``, its value and the allowed ``choices`` unless ``value`` is one of them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {name}={value!r}")


def check_positive_real(**values: object) -> None:
    """Raise a TypeError (not a real number) or ValueError (not > 0) naming the first argument that fails."""
    for name, value in values.items():
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise TypeError(f"{name} must be a float > 0, got {value!r} of type {type(value).__name__}")
        if not value > 0:  # also refuses NaN
            raise ValueError(f"{name} must be > 0, got {name}={value}")
