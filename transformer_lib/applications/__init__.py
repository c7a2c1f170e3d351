"""Using trained models: decoding, English-French translation, Hugging Face interop.

Modules: ``decode``, ``translation``, ``interop``.
"""
