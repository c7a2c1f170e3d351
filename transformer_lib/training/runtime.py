"""Reproducibility and device choice: the two helpers every notebook calls first.

Nothing else in the library names a device or seeds a generator, so a notebook that starts with
``tl.seed_everything(0)`` and ``device = tl.pick_device()`` is reproducible and portable.
"""

import os
import random

import numpy as np
import torch

from .._arguments import check_non_negative_ints

__all__ = ["seed_everything", "pick_device", "device_name"]


def seed_everything(seed: int = 0) -> int:
    """Seed Python's ``random``, NumPy and torch (CPU and every CUDA device) with ``seed``.

    Returns the seed, so a notebook cell can end with it without printing a generator object.
    """
    check_non_negative_ints(seed=seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed


def pick_device(prefer: str | None = None) -> torch.device:
    """The best device here: ``cuda``, then Apple's ``mps``, then ``cpu``.

    ``prefer`` forces one (``"cpu"`` keeps a notebook's stored outputs identical on every machine);
    a device type or a ``torch.device`` (``"cuda:1"`` keeps its index). Asking for one that is not
    available raises a ValueError naming what is.
    """
    available = ["cpu"]
    if torch.backends.mps.is_available():
        available.insert(0, "mps")
    if torch.cuda.is_available():
        available.insert(0, "cuda")
    if prefer is None:
        return torch.device(available[0])
    if not isinstance(prefer, (str, torch.device)):
        raise TypeError(
            "prefer must be a device name such as 'cpu' or a torch.device, got "
            f"{type(prefer).__name__}"
        )
    try:
        device = torch.device(prefer)
    except RuntimeError:
        raise ValueError(f"{prefer!r} is not a device name; available here: {available}") from None
    if device.type not in available:
        raise ValueError(f"device {str(prefer)!r} is not available here; available: {available}")
    return device


def device_name(device: torch.device | str) -> str:
    """How prose and printed lines name ``device``: ``"this CPU"``,
    ``"this GPU (NVIDIA H100 80GB HBM3)"`` (CUDA, with the card's name), ``"this Mac's GPU (mps)"``;
    any other type as ``"this <type> device"``. A notebook that measures on ``pick_device()`` says
    where it measured with it.
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device must be a device name such as 'cpu' or a torch.device, got "
            f"{type(device).__name__}"
        )
    device = torch.device(device)
    if device.type == "cpu":
        return "this CPU"
    if device.type == "cuda":
        return f"this GPU ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "this Mac's GPU (mps)"
    return f"this {device.type} device"
