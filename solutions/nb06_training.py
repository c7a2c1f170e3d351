"""Notebook 06 · training: label-smoothed targets and the paper's learning-rate schedule."""

import torch


def my_smoothed_targets(target, vocab_size, eps, pad_id):
    """``(N,) -> (N, vocab_size)``: ``1 - eps`` on the target, ``eps / (V - 2)`` on every other token but
    ``<pad>``, and all-zero rows where the target is padding."""
    dist = torch.full((target.numel(), vocab_size), eps / (vocab_size - 2))  # (N, V)
    dist[:, pad_id] = 0.0
    dist.scatter_(1, target.reshape(-1, 1), 1.0 - eps)
    dist[target.reshape(-1) == pad_id] = 0.0
    return dist


def my_noam_lr(step, d_model, warmup):
    """``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)``, steps counted from 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


ANSWERS = {
    "3": (
        "Run the notebook's experiment cell: the answer is the number of steps it prints for the chosen settings. "
        "What to expect and why: the schedule's peak is factor * d_model^-0.5 * warmup^-0.5; with a large peak "
        "Adam's first steps overshoot and post-LN training stalls, with a small one it learns slowly, so the step "
        "count depends strongly on factor and warmup. Compare several seeds before drawing a conclusion."
    ),
}
