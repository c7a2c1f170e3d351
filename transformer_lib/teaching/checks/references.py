"""What several notebooks' references share: copying a student module's weights into the library's
module (so the two must compute the same thing), and the encoder and decoder layers' reference. A
reference used by one notebook only lives in that notebook's entry file.

Before copying, each function looks at the student module's structure (parameters, their names,
parameters or buffers) and fails naming what is wrong: a layer in a plain list, a table stored as
a parameter.
"""

import torch
from torch import nn

from .engine import Failure, describe

__all__ = ["PROJECTIONS", "copy_weight", "copy_weights", "layer"]


def copy_weight(target: nn.Module, student: nn.Module, source: str) -> None:
    """Copy ``student.<source>`` (weight, and bias if any) into ``target``, or fail naming what it
    should be."""
    module = student
    for part in filter(None, source.split(".")):
        module = getattr(module, part, None)
    weight, shape = getattr(module, "weight", None), tuple(target.weight.shape)
    if not isinstance(weight, torch.Tensor) or weight.shape != target.weight.shape:
        should = (
            f"nn.Linear({shape[1]}, {shape[0]})"
            if isinstance(target, nn.Linear)
            else f"a LayerNorm({shape[0]})"
        )
        found = f"weight {describe(weight)}" if module is not None else "nothing"
        names = (
            " Hint: name the gain and shift `weight` and `bias`, as nn.LayerNorm does."
            if weight is None and module is not None and not isinstance(target, nn.Linear)
            else ""
        )
        where = f"`{source}`" if source else "your module itself"
        raise Failure(
            f"this check copies weights through {where}, which should be {should}; found "
            f"{found}.{names}"
        )
    bias = getattr(module, "bias", None)
    with torch.no_grad():
        target.weight.copy_(weight)
        if target.bias is not None:
            target.bias.copy_(
                bias if isinstance(bias, torch.Tensor) else torch.zeros_like(target.bias)
            )


def copy_weights(reference: nn.Module, student: nn.Module, sources: dict) -> nn.Module:
    """``reference`` after copying ``student.<source>`` into each ``reference.<target>`` of
    ``sources``."""
    for target, source in sources.items():
        module = reference
        for part in filter(None, target.split(".")):
            module = getattr(module, part)
        copy_weight(module, student, source)
    return reference


PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")


def _distinct_norms(student: nn.Module, names: list[str]) -> None:
    """Fail when two sublayers share one LayerNorm (one module, or one gain or shift); else give
    each norm its own gain and shift (not 1 and 0, the same for every fresh norm), so that a norm
    used in the wrong sublayer shows."""
    norms = {name: getattr(student, name, None) for name in names}
    seen: dict[int, str] = {}
    for name, norm in norms.items():
        if not isinstance(norm, nn.Module):
            continue  # copy_weight names what is missing
        for tensor in (norm, *norm.parameters()):
            if id(tensor) in seen and seen[id(tensor)] != name:
                raise Failure(
                    f"`{seen[id(tensor)]}` and `{name}` are one LayerNorm (or share its gain or "
                    "shift): each sublayer has a LayerNorm of its own, with its own learned gain "
                    f"and shift. Hint: `self.{seen[id(tensor)]} = nn.LayerNorm(d_model)` and "
                    f"`self.{name} = nn.LayerNorm(d_model)`, two calls."
                )
            seen[id(tensor)] = name
    with torch.no_grad():
        for i, norm in enumerate(norms.values()):
            for part, values in (
                ("weight", torch.linspace(0.5, 2.0, 64)),
                ("bias", torch.linspace(-1.0, 1.0, 64)),
            ):
                tensor = getattr(norm, part, None)
                if isinstance(tensor, torch.Tensor) and tensor.dim() == 1 and tensor.numel() <= 64:
                    tensor.copy_(values.roll(7 * (i + 1))[: tensor.numel()])


def layer(
    kind: type, attentions: tuple, student: nn.Module, d_model, num_heads, d_ff, norm_first=False
):
    """``tl.EncoderLayer``/``tl.DecoderLayer`` with the student's weights; ``normK`` is the K-th
    residual's norm."""
    reference = kind(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
    residuals = [name for name, _ in reference.named_children() if name.startswith("residual_")]
    _distinct_norms(student, [f"norm{i}" for i in range(1, len(residuals) + 1)])
    sources = {f"{a}.{w}": f"{a}.{w}" for a in attentions for w in PROJECTIONS}
    sources |= {f"feed_forward.{n}": f"feed_forward.{n}" for n in ("linear1", "linear2")}
    return copy_weights(
        reference, student, sources | {f"{r}.norm": f"norm{i}" for i, r in enumerate(residuals, 1)}
    )
