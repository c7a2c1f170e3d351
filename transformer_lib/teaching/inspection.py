"""Look inside a model while it runs: the shape of every call (``trace_shapes``), every attention's
weights (``capture_attention``). Both hook a model from outside, so they need no change to its code.

    with tl.trace_shapes(model) as trace:
        model(src, tgt)
    print(trace.table(max_depth=3))          # module, type, input shapes, output shape, in call
    order

    with tl.capture_attention(model) as attn:
        model(src, tgt)
    attn["decoder.layers.0.cross_attn"]      # (B, h, T_tgt, T_src), the last call's weights
    attn.of_kind("cross")                    # every cross-attention layer, in model order

Inside a ``capture_attention`` block every :class:`~transformer_lib.MultiHeadAttention` takes its
explicit path (the fused kernel never forms the weights); outside it the fast path is back. Shapes:
NOTATION.md.
"""

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from ..model.attention import MultiHeadAttention

__all__ = [
    "ShapeRecord",
    "ShapeTrace",
    "trace_shapes",
    "describe",
    "AttentionCapture",
    "capture_attention",
    "attention_kind",
    "ATTENTION_KINDS",
]


def describe(value: object) -> str:
    """A short text for one argument or result: ``(2, 7, 64)``, ``(2, 1, 1, 7) bool``, ``None``,
    ``3``."""
    if isinstance(value, torch.Tensor):
        shape = (
            "(" + ", ".join(str(s) for s in value.shape) + ("," if value.dim() == 1 else "") + ")"
        )
        return (
            shape
            if value.is_floating_point()
            else f"{shape} {str(value.dtype).removeprefix('torch.')}"
        )
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe(v) for v in value) + ")"
    if value is None or isinstance(value, (int, float, bool, str)):
        return repr(value)
    return type(value).__name__


@dataclass
class ShapeRecord:
    """One call of one module: its name in the model, its class, how deeply it was called, and what
    went in and came out."""

    name: str
    module_type: str
    depth: int
    inputs: list[str]
    output: str = "?"


@dataclass
class ShapeTrace:
    """The records of a :func:`trace_shapes` block, in call order (a parent before its children)."""

    records: list[ShapeRecord] = field(default_factory=list)

    def table(self, max_depth: int | None = None) -> str:
        """A fixed-width table of the tensor arguments; ``max_depth`` hides modules nested deeper (0
        = the model)."""
        rows = [r for r in self.records if max_depth is None or r.depth <= max_depth]
        lines = []
        for r in rows:
            inputs = [i for i in r.inputs if i.startswith("(")]  # tensors (and tuples of them) only
            lines.append(
                ("  " * r.depth + (r.name or "(model)"), r.module_type, ", ".join(inputs), r.output)
            )
        widths = [max([len(h)] + [len(line[i]) for line in lines]) for i, h in enumerate(_HEADERS)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        return "\n".join(
            [fmt.format(*_HEADERS), fmt.format(*("-" * w for w in widths))]
            + [fmt.format(*x) for x in lines]
        )

    def __repr__(self) -> str:
        return self.table()


_HEADERS = ("module", "type", "inputs", "output")


def trace_shapes(model: nn.Module) -> AbstractContextManager[ShapeTrace]:
    """Record every module call inside the ``with`` block; hooks are removed on exit, even after an
    error.

    ``model`` must be an ``nn.Module`` (a TypeError says so at the call, before the block runs)."""
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"trace_shapes needs an nn.Module (it hooks every submodule), got "
            f"{type(model).__name__}; "
            "to trace a function, wrap it in a module or trace the module it calls"
        )
    return _hooked(model)


@contextmanager
def _hooked(model: nn.Module) -> Iterator[ShapeTrace]:
    """The context manager behind :func:`trace_shapes`."""
    trace = ShapeTrace()
    # the call stack: a hook pair per module pushes and pops
    calls_in_progress: list[ShapeRecord] = []
    handles = []

    def before(module, args, kwargs, name):
        inputs = [describe(a) for a in args] + [
            f"{k}={describe(v)}" for k, v in kwargs.items() if v is not None
        ]
        record = ShapeRecord(name, type(module).__name__, len(calls_in_progress), inputs)
        trace.records.append(record)
        calls_in_progress.append(record)

    def after(module, args, kwargs, output):
        calls_in_progress.pop().output = describe(output)

    for name, module in model.named_modules():
        handles.append(
            module.register_forward_pre_hook(
                lambda m, a, k, name=name: before(m, a, k, name), with_kwargs=True
            )
        )
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        yield trace
    finally:
        for handle in handles:
            handle.remove()


# The one vocabulary of attention kinds (captures, widgets, notebooks): kind -> what it is, in
# words.
ATTENTION_KINDS = {
    "self": "encoder self-attention",
    "masked self": "decoder masked self-attention",
    "cross": "cross-attention (decoder reads encoder)",
}


def attention_kind(name: str) -> str:
    """A key of ``ATTENTION_KINDS`` from a module's name: ``"self"``, ``"masked self"`` (the
    decoder's self-attention) or ``"cross"``."""
    if name.endswith("cross_attn"):
        return "cross"
    return "masked self" if name.startswith("decoder") or ".decoder." in name else "self"


@dataclass
class AttentionCapture:
    """Per attention layer name, the ``(B, h, T_q, T_k)`` weights of every call made inside the
    block."""

    calls: dict[str, list[torch.Tensor]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Layers that were called, in model order."""
        return [name for name, calls in self.calls.items() if calls]

    def __getitem__(self, name: str) -> torch.Tensor:
        """The weights of the last call of layer ``name``."""
        if not self.calls.get(name):
            raise KeyError(f"no attention recorded for {name!r}; recorded: {self.names}")
        return self.calls[name][-1]

    def of_kind(self, kind: str) -> list[tuple[str, torch.Tensor]]:
        """``(name, weights)`` of every layer of one kind (``"self"``, ``"masked self"``,
        ``"cross"``)."""
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"kind must be one of {list(ATTENTION_KINDS)}, got {kind!r}")
        return [(name, self[name]) for name in self.names if attention_kind(name) == kind]


@contextmanager
def capture_attention(model: nn.Module) -> Iterator[AttentionCapture]:
    """Record the weights of every :class:`MultiHeadAttention` in ``model`` (or ``model`` itself) in
    the block."""
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} holds no tl.MultiHeadAttention to capture")
    capture = AttentionCapture()
    for name, layer in layers:
        layer.recorded_weights = capture.calls.setdefault(name, [])
    try:
        yield capture
    finally:
        for _, layer in layers:
            layer.recorded_weights = None
