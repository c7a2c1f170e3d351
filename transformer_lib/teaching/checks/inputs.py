"""What several notebooks' checks draw their inputs with: the seeded generator, random tensors,
per-sequence padding masks, a fixed module, random floats, and the encoder and decoder layers'
cases. Each entry file writes its own single-use cases beside its entries.

A :class:`~.engine.Case` holds the student code's arguments, how messages name them, the student
class's arguments and the tensors whose gradients are compared. The cases expose the classic bugs:
several shapes (a square one hides a transpose), causal masks, padding that differs per sequence,
at least one case with gradients. Every draw is seeded: a check says the same thing every time.
"""

import torch

from ...model.masks import causal_mask
from .engine import Case


def generator() -> torch.Generator:
    """A fresh generator seeded 0: every draw starts from the same numbers."""
    return torch.Generator().manual_seed(0)


def randn(gen, *shape, grad=False) -> torch.Tensor:
    """Standard normal numbers of ``shape`` from ``gen``, with gradients if ``grad``."""
    return torch.randn(*shape, generator=gen).requires_grad_(grad)


def padded(lengths: list[int], size: int, dims: int = 4) -> torch.Tensor:
    """A padding mask ``(B, 1, 1, T_k)`` (or ``(B, 1, T_k)``) that differs per sequence; the first
    sequence is padded, so its mask used for the whole batch differs from no mask."""
    keep = torch.arange(size)[None, :] < torch.tensor(lengths)[:, None]  # (B, T_k)
    return keep.view(len(lengths), *[1] * (dims - 2), size)


def fixed(build):
    """The same module every time (seed 0, eval mode), built without moving the learner's random
    state."""
    with torch.random.fork_rng(devices=[]):
        # not torch.manual_seed: it would also queue a seed for CUDA
        torch.default_generator.manual_seed(0)
        return build().eval()


def layers(decoder: bool) -> list[Case]:
    """Post-LN and pre-LN layers of width 16 (h = d_k = 4) and of width 24 (h = 3, d_k = 8);
    encoder: padding masks; decoder: causal target masks, also padded."""
    gen, cases = generator(), []
    for norm_first in (False, True):
        build, name = ((16, 4, 32), {"norm_first": norm_first}), f"norm_first={norm_first}"
        wide, wide_name = (
            ((24, 3, 40), {"norm_first": norm_first}),
            f"d_model=24, h=3 (d_k=8), norm_first={norm_first}",
        )
        x, memory, x7 = (
            randn(gen, 3, 5, 16, grad=True),
            randn(gen, 3, 7, 16, grad=True),
            randn(gen, 3, 7, 16),
        )
        x24, memory24 = randn(gen, 3, 5, 24), randn(gen, 3, 7, 24)
        # T_tgt = T_src first: a target mask given to the cross-attention runs, and is diagnosed
        if decoder:
            cases += [
                Case(
                    (x7, x7, causal_mask(7) & padded([5, 7, 2], 7), padded([4, 7, 2], 7)),
                    f"{name}, x and memory (3, 7, 16), causal and padded target mask, "
                    "padded memory",
                    build,
                ),
                Case(
                    (x, memory, causal_mask(5), padded([4, 7, 2], 7)),
                    f"{name}, x (3, 5, 16), memory (3, 7, 16)",
                    build,
                    {"x": x, "memory": memory},
                ),
                Case(
                    (x24, memory24, causal_mask(5) & padded([5, 3, 4], 5), padded([4, 7, 2], 7)),
                    f"{wide_name}, x (3, 5, 24), memory (3, 7, 24), padded masks",
                    wide,
                ),
            ]
        else:
            cases += [
                Case((x,), f"{name}, x (3, 5, 16), no mask", build, {"x": x}),
                Case((x, padded([3, 5, 1], 5)), f"{name}, with a per-sequence padding mask", build),
                Case(
                    (x24, padded([3, 5, 1], 5)),
                    f"{wide_name}, x (3, 5, 24), per-sequence padding",
                    wide,
                ),
            ]
    return cases


def floats(
    shapes: list[tuple], build: tuple = ((), {}), extra: tuple = (), grad: bool = True
) -> list[Case]:
    """Random inputs of each shape (the first with gradients, if ``grad``), each followed by its
    ``extra`` argument if any."""
    gen, cases = generator(), []
    for i, shape in enumerate(shapes):
        # not centred: a norm must do real work
        x = randn(gen, *shape, grad=grad and i == 0).mul(3).add(1)
        more = extra[i : i + 1]
        about = f"for input {shape}" + "".join(f", temperature {t}" for t in more)
        cases.append(Case((x, *more), about, build, {"input": x} if grad and i == 0 else {}))
    return cases
