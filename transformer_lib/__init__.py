"""transformer_lib: the Transformer of "Attention Is All You Need", one small tested module per idea.

Notebooks read ``import transformer_lib as tl`` and then ``tl.MultiHeadAttention(...)``.
"""

from .attention import KVCache, MultiHeadAttention, combine_heads, scaled_dot_product_attention, split_heads
from .data import DATE_FORMATS, Batch, CopyTask, DateTask, Seq2SeqTask, Vocab, make_batch
from .decode import beam_search, exact_match, greedy_decode, sample_decode
from .decoder import Decoder, DecoderCache, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .layers import (
    LayerNorm,
    PositionalEncoding,
    PositionwiseFeedForward,
    ResidualSublayer,
    TokenEmbedding,
    sinusoidal_encoding,
)
from .masks import causal_mask, check_mask, padding_mask
from .model import Transformer, TransformerConfig, count_parameters
from .runtime import pick_device, seed_everything
from .train import (
    CheckpointError,
    History,
    LabelSmoothingLoss,
    Trainer,
    adam_with_warmup,
    noam_lr,
    paper_optimizer,
    smoothed_targets,
    warmup_linear_decay,
)

__version__ = "0.1.0"
