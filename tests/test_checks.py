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


REFERENCES = {  # the library's own functions and modules, in the forms the checks accept
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
}


@pytest.mark.parametrize("check", sorted(REFERENCES))
def test_the_library_itself_passes(check):
    assert getattr(tl.checks, check)(REFERENCES[check])


def test_positional_encoding_table_form_takes_d_model_first():
    assert tl.checks.check_positional_encoding(lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n))
    flipped = tl.checks.check_positional_encoding(lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n).flip(1))
    assert not flipped and "Hint" in flipped.message


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
            lambda logits, target, n, p: (
                F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum") / n
            ),
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


# --- the mistakes the old checks missed ----------------------------------------------------------------


def one_mask_for_the_batch(q, k, v, mask=None):
    return tl.scaled_dot_product_attention(q, k, v, None if mask is None else mask[:1])


class BiasFreeMHA(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.mha = tl.MultiHeadAttention(d_model, num_heads, bias=False)
        self.w_q, self.w_k, self.w_v, self.w_o = self.mha.w_q, self.mha.w_k, self.mha.w_v, self.mha.w_o

    def forward(self, query, key, value, mask=None):
        return self.mha(query, key, value, mask)


class HalfBiasedMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_o = self.mha.w_o = nn.Linear(d_model, d_model)  # the only projection with a bias


class NarrowMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_q = self.mha.w_q = nn.Linear(d_model, d_model // 2, bias=False)
        self.extra = nn.Linear(d_model // 2, 1, bias=False)


def test_attention_checks_see_per_sequence_masks_and_the_opposite_polarity():
    result = tl.checks.check_attention(one_mask_for_the_batch)
    assert not result and "first sequence's mask" in result.message
    opposite = tl.checks.check_attention(
        lambda q, k, v, mask=None: tl.scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)
    )
    assert not opposite and "opposite polarity" in opposite.message


def test_multi_head_attention_accepts_bias_free_projections_and_names_parameter_problems():
    assert tl.checks.check_multi_head_attention(BiasFreeMHA)
    assert "only ['w_o'] have a bias" in tl.checks.check_multi_head_attention(HalfBiasedMHA).message
    assert "w_q maps 16 -> 8 features" in tl.checks.check_multi_head_attention(NarrowMHA).message


class TablePlainAttribute(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.pe = tl.sinusoidal_encoding(d_model=d_model, max_len=max_len)[None]

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


def test_positional_encoding_module_must_keep_its_table_in_a_buffer():
    result = tl.checks.check_positional_encoding(TablePlainAttribute)
    assert not result and "plain attribute" in result.message and "register_buffer" in result.message


class EncoderLayerNoAttentionResidual(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.self_attn, self.feed_forward = (
            tl.MultiHeadAttention(d_model, num_heads),
            tl.PositionwiseFeedForward(d_model, d_ff),
        )
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        x = self.norm1(self.self_attn(x, x, x, mask)[0])  # no `x +`
        return self.norm2(x + self.feed_forward(x))


class DecoderLayerCrossWithTargetMask(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = tl.DecoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.self_attn, self.cross_attn = self.layer.self_attn, self.layer.cross_attn
        self.feed_forward = self.layer.feed_forward
        self.norm1, self.norm2, self.norm3 = (
            getattr(self.layer, n).norm for n in ("residual_self", "residual_cross", "residual_ff")
        )

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return self.layer(x, memory, tgt_mask, tgt_mask)  # the target's mask in cross-attention


def test_layer_checks_name_missing_residuals_and_wrong_cross_attention_masks():
    assert (
        "residual connection around the attention"
        in tl.checks.check_encoder_layer(EncoderLayerNoAttentionResidual).message
    )
    result = tl.checks.check_decoder_layer(DecoderLayerCrossWithTargetMask)
    assert "cross-attention got the wrong mask" in result.message


def tiny_config():
    return tl.TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=16, num_heads=2, d_ff=32, num_layers=1)


class NoCausalMask(nn.Module):
    """A model whose decoder runs without its causal mask (or with it, ``causal=True``)."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal, self.model = causal, tl.Transformer(tiny_config())

    def forward(self, src, tgt):
        return self.model(src, tgt, tgt_mask=None if self.causal else tl.padding_mask(tgt, 0))


def test_causal_decoder_and_shifted_targets_checks():
    model = tl.Transformer(tiny_config())
    assert tl.checks.check_causal_decoder(model) and model.training  # the check restores train mode
    result = tl.checks.check_causal_decoder(NoCausalMask(causal=False))
    assert not result and "sees the future" in result.message
    assert tl.checks.check_shifted_targets(lambda tgt: (tgt[:, :-1], tgt[:, 1:]))
    unshifted = tl.checks.check_shifted_targets(lambda tgt: (tgt, tgt))
    assert not unshifted and "not shifted" in unshifted.message


# --- robustness: student code can never make a check raise ---------------------------------------------


def _broken_functions(reference):
    def raises(*args, **kwargs):
        raise ValueError("a bug in the student's code")

    def no_grad(*args, **kwargs):
        with torch.no_grad():
            return reference(*args, **kwargs)

    return {
        "raises": raises,
        "None": lambda *a, **k: None,
        "wrong shape": lambda *a, **k: torch.zeros(1),
        "no_grad": no_grad,
    }


def _broken_classes(reference: type):
    def forward_with(body):
        return type(f"Broken{reference.__name__}", (reference,), {"forward": body})

    def no_grad(self, *args, **kwargs):
        with torch.no_grad():
            return reference.forward(self, *args, **kwargs)

    def raises(self, *args, **kwargs):
        raise ValueError("a bug in the student's code")

    class NotAModule:
        def __init__(self, *args, **kwargs):
            pass

    return {
        "raises": forward_with(raises),
        "None": forward_with(lambda self, *a, **k: None),
        "wrong shape": forward_with(lambda self, *a, **k: torch.zeros(1)),
        "no_grad": forward_with(no_grad),
        "not an nn.Module": NotAModule,
    }


def _robustness_cases():
    import solutions

    cases = []
    for notebook, _, name, _, check in solutions.EXERCISES:
        solution = solutions.solution(notebook, name)
        broken = _broken_classes(solution) if isinstance(solution, type) else _broken_functions(solution)
        options = {"with_cache": True} if "with_cache" in check else {}
        cases += [(check.split("(")[0], options, kind, code) for kind, code in broken.items()]
    cases += [
        ("check_causal_decoder", {}, kind, cls(True))
        for kind, cls in _broken_classes(NoCausalMask).items()
        if kind != "not an nn.Module"
    ] + [("check_causal_decoder", {}, "not an nn.Module", object())]
    cases += [
        ("check_shifted_targets", {}, kind, code)
        for kind, code in _broken_functions(lambda tgt: (tgt[:, :-1], tgt[:, 1:])).items()
    ]
    return cases


ROBUSTNESS = _robustness_cases()


def test_robustness_covers_every_check():
    assert {check for check, *_ in ROBUSTNESS} == {name for name in tl.checks.__all__ if name.startswith("check_")}


@pytest.mark.parametrize(
    ("check", "options", "kind", "code"), ROBUSTNESS, ids=[f"{c}-{k}" for c, _, k, _ in ROBUSTNESS]
)
def test_student_code_never_makes_a_check_raise(check, options, kind, code):
    result = getattr(tl.checks, check)(code, **options)
    assert isinstance(result, tl.checks.CheckResult) and result.message
    if kind == "None":
        assert not result and "None" in result.message, result.message
    elif kind == "no_grad":  # checks that compare gradients say so; the others may pass (a mask needs no gradient)
        assert result or "gradient" in result.message, result.message
    else:
        assert not result, result.message
    if kind == "not an nn.Module" and check != "check_causal_decoder":
        assert "nn.Module" in result.message
