"""The self-checks: every buggy variant in notebook 08 is caught by its check, every correct one passes.

The variants are read from the notebook itself (cells starting ``# BUG: check_x`` or ``# FIX: check_x``), so
the notebook and this test cannot drift apart.
"""

import ast
import json
import math
import pathlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib as tl

NOTEBOOK = pathlib.Path(__file__).parent.parent / "notebooks" / "08_debugging_attention.ipynb"


def notebook_variants():
    """(kind, check name, defined name, source) for every BUG/FIX cell, plus the namespace they live in."""
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {"math": math, "torch": torch, "F": F, "nn": nn, "tl": tl}
    variants = []
    for cell in cells:
        source = "".join(cell["source"])
        first = source.splitlines()[0] if source else ""
        if first.startswith(("# BUG:", "# FIX:")):
            exec(compile(source, "<notebook 08>", "exec"), namespace)  # definitions only
            defined = [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
            kind, check = first[2:5], first.split(":", 1)[1].strip()
            variants.append((kind, check, defined[-1]))
    return variants, namespace


VARIANTS, NAMESPACE = notebook_variants()


def test_the_notebook_covers_every_classic_bug():
    bugs = [(check, name) for kind, check, name in VARIANTS if kind == "BUG"]
    assert len(bugs) >= 10
    assert {check for check, _ in bugs} == {
        "check_attention",
        "check_combine_heads",
        "check_multi_head_attention",
        "check_positional_encoding",
    }
    fixes = {check for kind, check, _ in VARIANTS if kind == "FIX"}
    assert fixes == {check for check, _ in bugs}  # every kind of bug has a fix that passes


@pytest.mark.parametrize(("kind", "check", "name"), VARIANTS, ids=[v[2] for v in VARIANTS])
def test_notebook_variant_is_judged_right(kind, check, name):
    result = getattr(tl.checks, check)(NAMESPACE[name])
    assert bool(result) == (kind == "FIX"), result.message
    assert result.message.startswith("✅" if kind == "FIX" else "❌")
    if kind == "BUG":
        assert "Hint" in result.message or "hint" in result.message.lower()


REFERENCES = {
    "check_attention": tl.scaled_dot_product_attention,
    "check_split_heads": tl.split_heads,
    "check_combine_heads": tl.combine_heads,
    "check_multi_head_attention": tl.MultiHeadAttention,
    "check_positional_encoding": tl.PositionalEncoding,
    "check_layer_norm": tl.LayerNorm,
    "check_causal_mask": lambda t: tl.causal_mask(t),
    "check_label_smoothing": tl.smoothed_targets,
    "check_feed_forward": tl.PositionwiseFeedForward,
    "check_noam_lr": tl.noam_lr,
    "check_temperature_softmax": lambda logits, t: (logits / t).softmax(-1),
    "check_shard_loss": lambda logits, target, global_tokens, world_size: F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum"
    )
    * world_size
    / global_tokens,
}


@pytest.mark.parametrize("check", sorted(REFERENCES))
def test_library_reference_passes_and_a_stub_is_not_implemented(check):
    assert getattr(tl.checks, check)(REFERENCES[check])

    def stub(*args, **kwargs):
        raise NotImplementedError

    result = getattr(tl.checks, check)(stub)
    assert not result and "not implemented yet" in result.message


def test_positional_encoding_table_form():
    assert tl.checks.check_positional_encoding(tl.sinusoidal_encoding)
    assert not tl.checks.check_positional_encoding(lambda n, d: tl.sinusoidal_encoding(n, d).flip(1))


def test_cached_causal_mask_check():
    assert tl.checks.check_causal_mask(lambda q, k: tl.causal_mask(q, k), with_cache=True)
    result = tl.checks.check_causal_mask(lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), with_cache=True)
    assert "sees every cached token" in result.message


@pytest.mark.parametrize(
    ("check", "buggy", "phrase"),
    [
        ("check_split_heads", lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
        ("check_split_heads", lambda x, h: x.view(x.size(0), x.size(1), h, -1), "heads axis must come before T"),
        ("check_causal_mask", lambda t: torch.ones(t, t, dtype=torch.bool).triu(), "not the past"),
        ("check_causal_mask", lambda t: torch.ones(t, t).tril(), "dtype torch.float32"),
        ("check_causal_mask", lambda t: torch.ones(t, t, dtype=torch.bool).tril(-1), "see itself"),
        (
            "check_label_smoothing",
            lambda tg, v, e, p: tl.smoothed_targets(tg, v, e, p) + (tg[:, None] == p) * 0.1,
            "all zero",
        ),
        ("check_noam_lr", lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-1.0), "warm-up"),
        ("check_temperature_softmax", lambda logits, t: (logits * t).softmax(-1), "multiplied"),
        (
            "check_shard_loss",
            lambda logits, target, n, p: F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0),
            "own tokens",
        ),
        (
            "check_shard_loss",
            lambda logits, target, n, p: F.cross_entropy(
                logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum"
            )
            / n,
            "times too small",
        ),
        (
            "check_attention",
            lambda q, k, v, mask=None: tl.scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, mask),
            "sqrt(d_k)",
        ),
    ],
)
def test_other_classic_mistakes_are_named(check, buggy, phrase):
    result = getattr(tl.checks, check)(buggy)
    assert not result and phrase in result.message, result.message


class LayerNormUnbiased(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.gain, self.shift = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) * self.gain + self.shift


class FeedForwardNoRelu(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x))


def test_layer_norm_and_feed_forward_mistakes_are_named():
    assert "unbiased variance" in tl.checks.check_layer_norm(LayerNormUnbiased).message
    assert "without the ReLU" in tl.checks.check_feed_forward(FeedForwardNoRelu).message
