"""``tl.lm``: the language models and what the notebooks do with them, gathered from the families
that define them (the top level may import from every family; the families import only downward).

- the models: :mod:`transformer_lib.model.lm` (``LMConfig``, ``DecoderOnlyLM``, ``MaskedLM``);
- their objectives: :mod:`transformer_lib.training.lm_objectives` (``mask_tokens``,
  ``language_model_loss``, ``LanguageModelTrainer``, ...) and ``perplexity``, ``IGNORE_INDEX``;
- generation: :func:`transformer_lib.applications.decode.generate`.
"""

from .applications.decode import generate
from .model.lm import DecoderOnlyLM, LMConfig, MaskedLM
from .training.lm_objectives import (
    LanguageModelTrainer,
    expected_masking_shares,
    language_model_loss,
    mask_tokens,
    masking_shares,
)
from .training.train import IGNORE_INDEX, perplexity

__all__ = [
    "LMConfig",
    "DecoderOnlyLM",
    "MaskedLM",
    "mask_tokens",
    "masking_shares",
    "expected_masking_shares",
    "language_model_loss",
    "generate",
    "perplexity",
    "LanguageModelTrainer",
    "IGNORE_INDEX",
]
