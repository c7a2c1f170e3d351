"""Small helpers shared by the unit tests."""

import torch


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()
