"""Record the attention weights of every attention layer of a model.

    with tl.capture_attention(model) as attn:
        model(src, tgt)
    attn["decoder.layers.0.cross_attn"]      # (B, h, T_tgt, T_src), the last call's weights
    attn.of_kind("cross")                    # every cross-attention layer, in model order

Inside the block every :class:`~transformer_lib.MultiHeadAttention` takes its explicit path (the fused kernel
never forms the weights); outside it the fast path is back.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from .attention import MultiHeadAttention

__all__ = ["AttentionCapture", "capture_attention", "attention_kind", "ATTENTION_KINDS"]

# The one vocabulary of attention kinds (captures, widgets, notebooks): kind -> what it is, in words.
ATTENTION_KINDS = {
    "self": "encoder self-attention",
    "masked self": "decoder masked self-attention",
    "cross": "cross-attention (decoder reads encoder)",
}


def attention_kind(name: str) -> str:
    """A key of ``ATTENTION_KINDS`` from a module's name: ``"self"``, ``"masked self"`` (the decoder's
    self-attention) or ``"cross"``."""
    if name.endswith("cross_attn"):
        return "cross"
    return "masked self" if name.startswith("decoder") or ".decoder." in name else "self"


@dataclass
class AttentionCapture:
    """Per attention layer name, the ``(B, h, T_q, T_k)`` weights of every call made inside the block."""

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
        """``(name, weights)`` of every layer of one kind (``"self"``, ``"masked self"``, ``"cross"``)."""
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"kind must be one of {list(ATTENTION_KINDS)}, got {kind!r}")
        return [(name, self[name]) for name in self.names if attention_kind(name) == kind]


@contextmanager
def capture_attention(model: nn.Module) -> Iterator[AttentionCapture]:
    """Record the weights of every :class:`MultiHeadAttention` in ``model`` (or ``model`` itself) in the block."""
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
