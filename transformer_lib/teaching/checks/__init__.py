"""Self-checks for the exercises: ``tl.checks.check_attention(my_attention)`` -> CheckResult.

A check runs the learner's code on inputs that expose the classic bugs, compares outputs and
gradients with the library, and never raises: a stub, an error or a known mistake (with its hint)
becomes one printed paragraph. One job per module: ``nbNN_<name>`` holds one notebook's entries,
checks and exercises; :mod:`.registry` collects them; :mod:`.engine` runs an entry;
:mod:`.inputs`, :mod:`.references` and :mod:`.variants` draw the cases, build the reference modules
and write the known mistakes. Only the checks and :class:`CheckResult` are public.
"""

from .engine import CheckResult
from .nb01_attention import check_attention, check_causal_mask
from .nb02_multi_head_attention import (
    check_combine_heads,
    check_multi_head_attention,
    check_split_heads,
)
from .nb03_positional_encoding import check_positional_encoding
from .nb04_encoder import check_encoder_layer, check_feed_forward, check_layer_norm
from .nb05_decoder import check_cross_attention, check_decoder_layer
from .nb06_training import check_label_smoothing, check_noam_lr
from .nb07_inference import check_temperature_softmax
from .nb08_debugging_attention import check_causal_decoder, check_shifted_targets
from .nb09_gpu_and_scale import check_shard_loss
from .nb10_paper_experiments import check_table3_row
from .nb11_gpt_and_bert import (
    check_generate,
    check_gpt_block,
    check_lm_parameter_count,
    check_mask_tokens,
    check_next_token_loss,
)
from .nb12_translation import check_merge_step
from .nb13_modern_decoder import (
    check_kv_heads_for_budget,
    check_repeat_kv,
    check_rms_norm,
    check_rotary_attention,
    check_swiglu,
)

__all__ = [
    "CheckResult",
    "check_attention",
    "check_causal_mask",
    "check_split_heads",
    "check_combine_heads",
    "check_multi_head_attention",
    "check_positional_encoding",
    "check_layer_norm",
    "check_feed_forward",
    "check_encoder_layer",
    "check_decoder_layer",
    "check_cross_attention",
    "check_label_smoothing",
    "check_noam_lr",
    "check_temperature_softmax",
    "check_causal_decoder",
    "check_shifted_targets",
    "check_shard_loss",
    "check_table3_row",
    "check_next_token_loss",
    "check_generate",
    "check_mask_tokens",
    "check_gpt_block",
    "check_lm_parameter_count",
    "check_merge_step",
    "check_rms_norm",
    "check_rotary_attention",
    "check_swiglu",
    "check_repeat_kv",
    "check_kv_heads_for_budget",
]
