"""Kept so that ``tl.capture.X`` and ``from .capture import X`` (widgets.py) still work: the code is in
:mod:`transformer_lib.inspection`."""

from .inspection import ATTENTION_KINDS, AttentionCapture, attention_kind, capture_attention

__all__ = ["AttentionCapture", "capture_attention", "attention_kind", "ATTENTION_KINDS"]
