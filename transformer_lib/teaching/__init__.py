"""Teaching tools: shape traces and attention capture, pictures, widgets, exercise checks.

Modules: ``inspection``, ``viz``, ``widgets``, ``checks``.
"""
