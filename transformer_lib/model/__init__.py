"""The model: attention, masks, layers, the encoder-decoder Transformer and the language models.

Modules: ``attention``, ``masks``, ``layers``, ``encoder``, ``decoder``, ``transformer``, ``lm``.
"""
