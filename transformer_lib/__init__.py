"""transformer_lib: the Transformer of "Attention Is All You Need", one small tested module per idea.

Notebooks read ``import transformer_lib as tl`` and then ``tl.MultiHeadAttention(...)``. The top level holds
the names that the notebooks, the solutions and the README use; everything else stays in its module, e.g.
``tl.masks.check_mask``, ``tl.decoder.DecoderCache``, ``tl.inspection.ShapeTrace``.
"""

from . import interop, lm
from .attention import (
    KVCache,
    MultiHeadAttention,
    apply_rope,
    combine_heads,
    kv_cache_bytes_per_token,
    scaled_dot_product_attention,
    split_heads,
)
from .data import DATE_FORMATS, CopyTask, DateTask, PythonSourceCorpus, Vocab, make_batch
from .decode import beam_search, exact_match, greedy_decode, sample_decode, sequence_log_prob
from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .inspection import capture_attention, trace_shapes
from .interop import copy_from_torch, from_huggingface
from .layers import (
    LayerNorm,
    LearnedPositionalEncoding,
    PositionalEncoding,
    PositionwiseFeedForward,
    ResidualSublayer,
    RMSNorm,
    TokenEmbedding,
    sinusoidal_encoding,
)
from .length_batching import LengthBatches
from .lm import DecoderOnlyLM, LMConfig, MaskedLM
from .masks import causal_mask, padding_mask
from .model import Transformer, TransformerConfig, count_parameters
from .runtime import pick_device, seed_everything
from .subwords import SubwordVocab, learn_bpe, segment
from .train import (
    CPU_RECIPE,
    CheckpointError,
    LabelSmoothingLoss,
    Trainer,
    TrainingRecipe,
    adam_with_warmup,
    load_model_weights,
    noam_lr,
    paper_optimizer,
    smoothed_targets,
    train_task,
    warmup_linear_decay,
)
from .translation_corpus import TatoebaCorpus

__version__ = "0.1.0"

# Pictures and widgets load matplotlib and ipywidgets, and the exercises' checks their whole machinery, which
# model code never needs: import them on first use, so `tl.viz.plot_attention(...)`,
# `tl.widgets.AttentionExplorer(...)` and `tl.checks.check_attention(...)` work without an explicit import.
_LAZY_SUBMODULES = {"viz", "widgets", "bench", "experiments", "checks"}


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'transformer_lib' has no attribute {name!r}")
