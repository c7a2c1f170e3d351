"""Self-checks for the exercises and the debugging notebook: ``tl.checks.check_attention(my_attention)``.

A check runs the learner's code on inputs chosen to expose the classic bugs, compares outputs and gradients with
the library, and returns a :class:`CheckResult` that prints as one friendly paragraph and never raises: an error
in the learner's code is reported, a stub that raises ``NotImplementedError`` is "not implemented yet", and a
known mistake is named with its hint.

The package, one job per module:

- ``nbNN_<name>.py``, one per notebook with exercises: the entries of the checks that notebook introduces (each an
  :class:`~.engine.Entry`: reference, inputs, known mistakes and their hints), those checks' public functions, and
  ``EXERCISES``, what the notebook asks and which check grades it;
- :mod:`.registry` collects the notebook files: the one list of exercises that ``solutions/``, the README and the
  site read;
- :mod:`.engine` runs an entry on the learner's code, inside its guard;
- :mod:`.inputs` draws the cases; :mod:`.references` builds the library's module holding a learner module's
  weights; :mod:`.variants` writes the known mistakes' code, a knob per bug.

The checks use the library through its public names (``tl.X``), as a notebook does. Here only the checks and
:class:`CheckResult` are public.
"""

from .engine import CheckResult
from .nb01_attention import check_attention, check_causal_mask
from .nb02_multi_head_attention import check_combine_heads, check_multi_head_attention, check_split_heads
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
