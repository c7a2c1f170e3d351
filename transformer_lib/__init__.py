"""transformer_lib: the Transformer of "Attention Is All You Need", one small tested module per
idea.

Notebooks read ``import transformer_lib as tl`` and then ``tl.MultiHeadAttention(...)``. The top
level holds the names that the notebooks, the solutions and the README use; everything else stays in
its module, e.g. ``tl.masks.check_mask``, ``tl.decoder.DecoderCache``, ``tl.inspection.ShapeTrace``.
"""

# Four families, one folder each (model, training, applications, teaching); the modules the
# notebooks name stay reachable from the top, e.g. tl.masks.check_mask, tl.lm.generate, tl.interop.
# tl.lm gathers the language models (model), their objectives (training) and generate
# (applications): a facade at the top level, which may import from every family.
from . import lm
from .applications import decode, interop
from .applications.decode import (
    beam_search,
    exact_match,
    greedy_decode,
    sample_decode,
    sequence_log_prob,
)
from .applications.interop import copy_from_torch, from_huggingface
from .model import attention, decoder, encoder, layers, masks
from .model.attention import (
    KVCache,
    MultiHeadAttention,
    apply_rope,
    combine_heads,
    kv_cache_bytes_per_token,
    scaled_dot_product_attention,
    split_heads,
)
from .model.decoder import Decoder, DecoderLayer
from .model.encoder import Encoder, EncoderLayer
from .model.layers import (
    LayerNorm,
    LearnedPositionalEncoding,
    PositionalEncoding,
    PositionwiseFeedForward,
    ResidualSublayer,
    RMSNorm,
    TokenEmbedding,
    sinusoidal_encoding,
)
from .model.lm import DecoderOnlyLM, LMConfig, MaskedLM
from .model.masks import causal_mask, padding_mask
from .model.transformer import Transformer, TransformerConfig, count_parameters
from .teaching import inspection
from .teaching.inspection import capture_attention, trace_shapes
from .training import data, runtime, train
from .training.data import DATE_FORMATS, CopyTask, DateTask, PythonSourceCorpus, Vocab, make_batch
from .training.length_batching import LengthBatches
from .training.runtime import device_name, pick_device, seed_everything
from .training.subwords import SubwordVocab, learn_bpe, segment
from .training.train import (
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
from .training.translation_corpus import TatoebaCorpus

__version__ = "0.1.0"

# Pictures and widgets load matplotlib and ipywidgets, and the exercises' checks their whole
# machinery, which model code never needs: import them on first use, so
# `tl.viz.plot_attention(...)`, `tl.widgets.AttentionExplorer(...)` and
# `tl.checks.check_attention(...)` work without an explicit import.
_LAZY_SUBMODULES = {
    "viz": ".teaching.viz",
    "widgets": ".teaching.widgets",
    "checks": ".teaching.checks",
    "experiments": ".applications.experiments",
    "bench": ".bench",
}


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(_LAZY_SUBMODULES[name], __name__)
    raise AttributeError(f"module 'transformer_lib' has no attribute {name!r}")
