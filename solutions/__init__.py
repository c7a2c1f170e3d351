"""The teacher's edition: reference solutions of every exercise in the notebooks, one module per notebook.

``solutions/nbNN_<name>.py`` holds, under the exercise's own name (``my_*`` or ``My*``), a solution that its
``tl.checks`` function passes, and ``ANSWERS``: model answers to the Think/Experiment questions, keyed by
exercise number. ``make solutions`` swaps each notebook's stubs for these and runs the notebooks.
"""

import importlib
import pathlib

NOTEBOOKS = {  # solutions module -> notebook file
    path.stem: path.stem[2:4] for path in sorted(pathlib.Path(__file__).parent.glob("nb[0-9][0-9]_*.py"))
}


def modules() -> dict:
    """``{"nb01_attention": <module>, ...}``: every solutions module, imported."""
    return {name: importlib.import_module(f"solutions.{name}") for name in NOTEBOOKS}


# (notebook, exercise number, name in the notebook, what is asked, the check that grades it)
EXERCISES = [
    ("01", "1", "my_attention", "scaled dot-product attention with an optional mask", "check_attention"),
    ("01", "2", "my_causal_mask", "the causal mask, (T, T) bool", "check_causal_mask"),
    ("02", "1", "my_split_heads", "(B, T, h*d) -> (B, h, T, d)", "check_split_heads"),
    ("02", "2", "my_combine_heads", "(B, h, T, d) -> (B, T, h*d)", "check_combine_heads"),
    (
        "02",
        "3",
        "MyMultiHeadAttention",
        "the multi-head module, w_q, w_k, w_v, w_o (bias optional)",
        "check_multi_head_attention",
    ),
    (
        "03",
        "1",
        "my_sinusoidal_encoding",
        "the sinusoidal table, (d_model, max_len) -> (max_len, d_model)",
        "check_positional_encoding",
    ),
    (
        "03",
        "2",
        "MyPositionalEncoding",
        "the module that stores the table as a buffer and adds it",
        "check_positional_encoding",
    ),
    ("04", "1", "MyLayerNorm", "LayerNorm from scratch", "check_layer_norm"),
    ("04", "2", "MyFeedForward", "the position-wise feed-forward network", "check_feed_forward"),
    ("04", "3", "MyEncoderLayer", "an encoder layer, post-LN or pre-LN", "check_encoder_layer"),
    ("05", "1", "MyDecoderLayer", "a decoder layer, post-LN or pre-LN", "check_decoder_layer"),
    (
        "05",
        "2",
        "my_cross_attention",
        "cross-attention: which tensor is the query, which mask goes where",
        "check_cross_attention",
    ),
    ("06", "1", "my_smoothed_targets", "label-smoothed target distributions", "check_label_smoothing"),
    ("06", "2", "my_noam_lr", "the paper's learning-rate schedule", "check_noam_lr"),
    ("07", "1", "my_softmax_with_temperature", "probabilities at a temperature", "check_temperature_softmax"),
    (
        "07",
        "2",
        "my_cached_causal_mask",
        "the causal mask for cached decoding",
        "check_causal_mask(..., with_cache=True)",
    ),
    ("08", "1", "my_causal_mask", "a causal mask: the .triu() bug, then the fix", "check_causal_mask"),
    ("08", "2", "my_split_heads", "split_heads: the reshape bug, then the fix", "check_split_heads"),
    ("09", "1", "my_shard_loss", "the loss one data-parallel process backpropagates", "check_shard_loss"),
    ("10", "1", "my_table3_row", "a Table 3 row of your own and a prediction of its result", "check_table3_row"),
    ("11", "1", "my_gpt_block", "an encoder layer as a GPT block: the causal mask", "check_gpt_block"),
    ("11", "2", "my_mask_tokens", "BERT's 80/10/10 masking recipe", "check_mask_tokens"),
    ("11", "3", "my_parameter_count", "a GPT's parameter count from its config", "check_lm_parameter_count"),
]
THINK = {
    "01": ["3"], "03": ["3"], "04": ["4"], "05": ["3"], "06": ["3"], "07": ["3"], "08": ["3"], "09": ["2"], "10": ["2"],
    "11": ["4"],
}


def solution(notebook: str, name: str):
    """The reference solution ``name`` of notebook ``NN``."""
    (module,) = [m for n, m in modules().items() if n[2:4] == notebook]
    return getattr(module, name)
