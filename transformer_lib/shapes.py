"""Kept so that ``tl.shapes.X`` and ``from transformer_lib.shapes import X`` still work: the code is in
:mod:`transformer_lib.inspection`."""

from .inspection import ShapeRecord, ShapeTrace, describe, trace_shapes

__all__ = ["ShapeRecord", "ShapeTrace", "trace_shapes", "describe"]
