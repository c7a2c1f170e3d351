"""The self-checks: every buggy variant in notebook 08 is caught by its check, every correct one
passes.

The variants are read from the notebook itself (cells starting ``# BUG: check_x`` or
``# FIX: check_x``), so the notebook and this test cannot drift apart.
"""

import ast
import json
import math
import pathlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib as tl
from transformer_lib.teaching.checks.engine import default_device, set_default_device

NOTEBOOK = pathlib.Path(__file__).parent.parent / "notebooks" / "08_debugging_attention.ipynb"


def notebook_variants():
    """(kind, check name, defined name) for every BUG/FIX cell that defines code, plus the namespace
    it lives in.

    Only the cells' definitions run here (a marked cell may also call its check, on names defined
    elsewhere)."""
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    namespace = {"math": math, "torch": torch, "F": F, "nn": nn, "tl": tl}
    variants, marked = [], []
    for cell in cells:
        source = "".join(cell["source"])
        first = source.splitlines()[0] if source else ""
        if first.startswith(("# BUG:", "# FIX:")):
            kind, check = first[2:5], first.split(":", 1)[1].strip()
            marked.append((kind, check))
            definitions = [
                n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef | ast.ClassDef)
            ]
            exec(
                compile(ast.Module(definitions, type_ignores=[]), "<notebook 08>", "exec"),
                namespace,
            )
            variants += [(kind, check, definitions[-1].name)] if definitions else []
    return variants, marked, namespace


VARIANTS, MARKED, NAMESPACE = notebook_variants()


def test_the_notebook_covers_every_classic_bug():
    bugs = {check for kind, check in MARKED if kind == "BUG"}
    assert sum(kind == "BUG" for kind, _ in MARKED) >= 10
    classic = {
        "check_attention",
        "check_combine_heads",
        "check_multi_head_attention",
        "check_positional_encoding",
    }
    assert classic <= bugs <= set(tl.checks.__all__)
    # each classic bug has a fix that passes
    assert classic <= {check for kind, check in MARKED if kind == "FIX"}


def test_the_registry_is_the_one_source_of_the_public_checks_and_their_entries():
    """Every public check comes from an entry file and has an explicit signature and a docstring;
    every entry belongs to a public check, under one (check, variant) key; every exercise names a
    public check, with options that check takes; exercises and questions sit in their notebook's
    entry file, one per number."""
    import inspect

    from transformer_lib.teaching.checks import registry

    public = registry.checks()
    assert set(tl.checks.__all__) == {"CheckResult", *public}
    assert all(getattr(tl.checks, name) is check for name, check in public.items())
    for name, check in public.items():
        kinds = {parameter.kind for parameter in inspect.signature(check).parameters.values()}
        assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}, name
        assert len(inspect.getdoc(check) or "") > 40, f"{name} has no docstring"
    assert {check for check, _ in registry.entries()} == set(public)
    assert all(key == (entry.check, entry.variant) for key, entry in registry.entries().items())
    numbers = [(exercise.notebook, exercise.number) for exercise in registry.exercises()]
    assert len(numbers) == len(set(numbers)) and numbers == sorted(
        numbers, key=lambda n: (n[0], int(n[1]))
    )
    asked = [(question.notebook, question.number) for question in registry.questions()]
    assert len(asked) == len(set(asked)) and not set(asked) & set(numbers)
    for module in registry.entry_files():
        for item in [*module.EXERCISES, *getattr(module, "QUESTIONS", ())]:
            assert module.__name__.split(".")[-1][2:4] == item.notebook, item
        for exercise in module.EXERCISES:
            assert set(exercise.options) <= set(
                inspect.signature(public[exercise.check]).parameters
            ), exercise


def test_checks_load_only_on_first_use():
    import subprocess
    import sys

    code = (
        "import sys, transformer_lib as tl; assert 'transformer_lib.teaching.checks' not in "
        "sys.modules; assert tl.checks.check_noam_lr(tl.noam_lr)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def tiny_config():
    return tl.TransformerConfig(
        src_vocab_size=8, tgt_vocab_size=8, d_model=16, num_heads=2, d_ff=32, num_layers=1
    )


@pytest.mark.parametrize(("kind", "check", "name"), VARIANTS, ids=[v[2] for v in VARIANTS])
def test_notebook_variant_is_judged_right(kind, check, name):
    code = NAMESPACE[name]
    # the check takes a model: build a small one
    if check == "check_causal_decoder" and isinstance(code, type):
        code = code(tiny_config())
    result = getattr(tl.checks, check)(code)
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
    assert tl.checks.check_positional_encoding(
        lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n)
    )
    flipped = tl.checks.check_positional_encoding(
        lambda d, n: tl.sinusoidal_encoding(d_model=d, max_len=n).flip(1)
    )
    assert not flipped and "Hint" in flipped.message


def test_cached_causal_mask_check():
    assert tl.checks.check_causal_mask(lambda q, k: tl.causal_mask(q, k), with_cache=True)
    result = tl.checks.check_causal_mask(
        lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), with_cache=True
    )
    assert "sees every cached token" in result.message


@pytest.mark.parametrize(
    ("check", "buggy", "phrase"),
    [
        ("check_split_heads", lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), "scrambled"),
        (
            "check_split_heads",
            lambda x, h: x.view(x.size(0), x.size(1), h, -1),
            "heads axis must come before T",
        ),
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
            lambda logits, target, n, p: F.cross_entropy(
                logits.flatten(0, 1), target.flatten(), ignore_index=0
            ),
            "own tokens",
        ),
        (
            "check_shard_loss",
            lambda logits, target, n, p: (
                F.cross_entropy(
                    logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum"
                )
                / n
            ),
            "times too small",
        ),
        (
            "check_attention",
            lambda q, k, v, mask=None: tl.scaled_dot_product_attention(
                q * math.sqrt(q.size(-1)), k, v, mask
            ),
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
        self.weight, self.bias = (
            nn.Parameter(torch.ones(d_model)),
            nn.Parameter(torch.zeros(d_model)),
        )

    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
            x.var(-1, keepdim=True) + 1e-5
        ) * self.weight + self.bias


class FeedForwardNoRelu(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x))


def test_layer_norm_and_feed_forward_mistakes_are_named():
    assert "unbiased variance" in tl.checks.check_layer_norm(LayerNormUnbiased).message
    assert "without the ReLU" in tl.checks.check_feed_forward(FeedForwardNoRelu).message


# --- the mistakes the old checks missed -----------------------------------------------------------


def one_mask_for_the_batch(q, k, v, mask=None):
    return tl.scaled_dot_product_attention(q, k, v, None if mask is None else mask[:1])


class BiasFreeMHA(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.mha = tl.MultiHeadAttention(d_model, num_heads, bias=False)
        self.w_q, self.w_k, self.w_v, self.w_o = (
            self.mha.w_q,
            self.mha.w_k,
            self.mha.w_v,
            self.mha.w_o,
        )

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
        lambda q, k, v, mask=None: tl.scaled_dot_product_attention(
            q, k, v, None if mask is None else ~mask
        )
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
    assert (
        not result and "plain attribute" in result.message and "register_buffer" in result.message
    )


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


class GainShiftNorm(nn.Module):
    """A correct LayerNorm whose parameters are named ``gain`` and ``shift``, not nn.LayerNorm's
    names."""

    def __init__(self, d_model):
        super().__init__()
        self.gain, self.shift = (
            nn.Parameter(torch.ones(d_model)),
            nn.Parameter(torch.zeros(d_model)),
        )

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:]) * self.gain + self.shift


class EncoderLayerWithGainShiftNorms(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, norm_first=False):
        super().__init__()
        self.layer = tl.EncoderLayer(d_model, num_heads, d_ff, dropout=0.0, norm_first=norm_first)
        self.self_attn, self.feed_forward = self.layer.self_attn, self.layer.feed_forward
        self.norm1, self.norm2 = GainShiftNorm(d_model), GainShiftNorm(d_model)

    def forward(self, x, mask=None):
        return self.layer(x, mask)


def test_layer_checks_name_layer_norm_parameters_they_cannot_read():
    """Issue #29, 3: the exercise names the gain and shift `weight` and `bias`; the LayerNorm check
    says so at once (it used to compare other names with a fresh LayerNorm, where a misplaced gain
    or shift passed)."""
    result = tl.checks.check_layer_norm(GainShiftNorm)
    assert (
        not result and "`weight` and `bias`" in result.message and "`gain` (8,)" in result.message
    ), result.message
    result = tl.checks.check_encoder_layer(EncoderLayerWithGainShiftNorms)
    assert not result and "`weight` and `bias`" in result.message


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


# --- robustness: student code can never make a check raise ----------------------------------------


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
    for exercise in solutions.EXERCISES:
        solution = solutions.solution(exercise.notebook, exercise.name)
        broken = (
            _broken_classes(solution) if isinstance(solution, type) else _broken_functions(solution)
        )
        cases += [(exercise.check, exercise.options, kind, code) for kind, code in broken.items()]
    cases += [
        ("check_causal_decoder", {}, kind, cls(True))
        for kind, cls in _broken_classes(NoCausalMask).items()
        if kind != "not an nn.Module"
    ] + [("check_causal_decoder", {}, "not an nn.Module", object())]
    cases += [
        ("check_shifted_targets", {}, kind, code)
        for kind, code in _broken_functions(lambda tgt: (tgt[:, :-1], tgt[:, 1:])).items()
    ]
    # public checks that no exercise grades any more (notebook 11 asks for the loss and the sampling
    # loop instead)
    cases += [
        ("check_gpt_block", {}, kind, code)
        for kind, code in _broken_functions(
            lambda layer, x: layer(x, tl.causal_mask(x.size(1)))
        ).items()
    ]
    cases += [
        ("check_lm_parameter_count", {}, kind, code)
        for kind, code in _broken_functions(
            lambda c: tl.count_parameters(tl.DecoderOnlyLM(c))["total"]
        ).items()
    ]
    # public checks that no exercise grades any more (issue 36: notebooks 02, 04 and 05 ask for
    # exercises where the learner decides more); notebook 08 and learners may still call them
    cases += [
        ("check_combine_heads", {}, kind, code)
        for kind, code in _broken_functions(tl.combine_heads).items()
    ]
    cases += [
        ("check_cross_attention", {}, kind, code)
        for kind, code in _broken_functions(
            lambda attn, x, memory, mask: attn(x, memory, memory, mask)[0]
        ).items()
    ]
    cases += [("check_layer_norm", {}, k, c) for k, c in _broken_classes(tl.LayerNorm).items()]
    cases += [
        ("check_feed_forward", {}, kind, code)
        for kind, code in _broken_classes(tl.PositionwiseFeedForward).items()
    ]
    # issue 36: notebook 06's exercises 1-2 and notebook 13's exercise 3 ask for decisions instead
    from solutions.nb13_modern_decoder import MySwiGLU

    cases += [
        ("check_label_smoothing", {}, kind, code)
        for kind, code in _broken_functions(tl.smoothed_targets).items()
    ]
    cases += [("check_noam_lr", {}, k, c) for k, c in _broken_functions(tl.noam_lr).items()]
    cases += [("check_swiglu", {}, k, c) for k, c in _broken_classes(MySwiGLU).items()]
    return cases


ROBUSTNESS = _robustness_cases()


def test_robustness_covers_every_check():
    assert {check for check, *_ in ROBUSTNESS} == {
        name for name in tl.checks.__all__ if name.startswith("check_")
    }


def _compares_gradients(check: str, code, options: dict) -> bool:
    """Whether the entry behind ``check`` (for this kind of code and these options) has a case that
    compares gradients."""
    from transformer_lib.teaching.checks import engine, registry

    variant = "with_cache" if options.get("with_cache") else engine.DEFAULT
    if check == "check_positional_encoding":
        variant = "module" if isinstance(code, type) else "table"
    entry = registry.entries().get((check, variant))
    return entry is not None and any(case.inputs for case in entry.cases())


@pytest.mark.parametrize(
    ("check", "options", "kind", "code"), ROBUSTNESS, ids=[f"{c}-{k}" for c, _, k, _ in ROBUSTNESS]
)
def test_student_code_never_makes_a_check_raise(check, options, kind, code):
    result = getattr(tl.checks, check)(code, **options)
    assert isinstance(result, tl.checks.CheckResult) and result.message
    if kind == "None":
        assert not result and "None" in result.message, result.message
    # checks that compare gradients say so; the others pass (a mask needs no gradient)
    elif kind == "no_grad":
        if _compares_gradients(check, code, options):
            assert not result and "carries no gradient" in result.message, result.message
        else:
            assert result, result.message
    else:
        assert not result, result.message
    if kind == "not an nn.Module" and check != "check_causal_decoder":
        assert "nn.Module" in result.message


def test_student_code_that_changes_the_callers_input_in_place_is_named():
    """Issue #29, 5: scaling the caller's q in place changes the caller's tensor (and k and v in
    self-attention)."""

    def scale_in_place(q, k, v, mask=None):
        q.div_(math.sqrt(q.size(-1)))  # the scaling done on the caller's tensor
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(-1) @ v

    result = tl.checks.check_attention(scale_in_place)
    assert (
        not result
        and "changed its input tensor number 1" in result.message
        and "in place" in result.message
    )

    def scale_a_copy(q, k, v, mask=None):  # the same arithmetic on a tensor of its own: right
        q = q.clone()
        q.div_(math.sqrt(q.size(-1)))
        return tl.scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, mask)

    assert tl.checks.check_attention(scale_a_copy)


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode])
def test_a_check_called_under_no_grad_still_compares_gradients(context):
    with context():
        assert tl.checks.check_attention(tl.scaled_dot_product_attention)
        assert tl.checks.check_multi_head_attention(tl.MultiHeadAttention)


class OppositePolarityMHA(BiasFreeMHA):
    def forward(self, query, key, value, mask=None):
        return self.mha(query, key, value, None if mask is None else ~mask)


def test_multi_head_attention_check_names_the_opposite_polarity():
    result = tl.checks.check_multi_head_attention(OppositePolarityMHA)
    assert not result and "opposite polarity" in result.message


def buggy_layer(decoder: bool, bug: str) -> type:
    """A learner's encoder or decoder layer (nn.LayerNorm, tl.MultiHeadAttention) with one named
    bug."""

    class Layer(nn.Module):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__()
            self.norm_first = norm_first != (bug == "swapped")
            self.self_attn = tl.MultiHeadAttention(d_model, num_heads)
            self.cross_attn = tl.MultiHeadAttention(d_model, num_heads) if decoder else None
            self.feed_forward = tl.PositionwiseFeedForward(d_model, d_ff)
            self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.norm3 = nn.LayerNorm(d_model) if decoder else None

        # encoder: (mask); decoder: (memory, tgt_mask, memory_mask)
        def forward(self, x, *arguments):
            padded = (*arguments, None, None) if decoder else (None, *arguments, None, None)
            memory, tgt_mask, memory_mask = padded[:3]
            self_mask = None if bug == "self mask" else tgt_mask
            cross_mask = {"cross mask": None, "cross gets the target mask": tgt_mask}.get(
                bug, memory_mask
            )
            sublayers = [
                ("self residual", self.norm1, lambda y: self.self_attn(y, y, y, self_mask)[0])
            ]
            if decoder:
                cross = self.cross_attn
                sublayers.append(
                    (
                        "cross residual",
                        self.norm2,
                        lambda y: cross(y, memory, memory, cross_mask)[0],
                    )
                )
            sublayers.append(
                ("ffn residual", self.norm3 if decoder else self.norm2, self.feed_forward)
            )
            for name, norm, sublayer in sublayers:
                y = sublayer(norm(x) if self.norm_first else x)
                y = y if bug == name else x + y
                x = y if self.norm_first else norm(y)
            return x

    return Layer


@pytest.mark.parametrize(
    ("decoder", "bug", "words"),
    [
        (False, "swapped", "post-LN and pre-LN are swapped"),
        (False, "self residual", "residual connection around the attention"),
        (False, "ffn residual", "residual connection around the feed-forward"),
        (False, "self mask", "ignored its mask"),
        (True, "swapped", "post-LN and pre-LN are swapped"),
        (True, "self residual", "residual connection around the attention"),
        (True, "cross residual", "residual connection around the cross-attention"),
        (True, "ffn residual", "residual connection around the feed-forward"),
        (True, "self mask", "ignored the target mask"),
        (True, "cross mask", "ignored memory_mask"),
        (True, "cross gets the target mask", "cross-attention got the wrong mask"),
    ],
)
def test_layer_checks_name_each_diagnosed_mistake(decoder, bug, words):
    check = tl.checks.check_decoder_layer if decoder else tl.checks.check_encoder_layer
    assert check(buggy_layer(decoder, "none"))
    result = check(buggy_layer(decoder, bug))
    assert not result and words in result.message, result.message


class ExtraParameterMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.temperature = nn.Parameter(torch.ones(1))


def test_multi_head_attention_names_extra_parameters():
    result = tl.checks.check_multi_head_attention(ExtraParameterMHA)
    assert not result and "['temperature']" in result.message


def test_a_nan_result_is_called_nan():
    def nan_attention(q, k, v, mask=None):
        return tl.scaled_dot_product_attention(q, k, v, mask)[0] * float("nan")

    result = tl.checks.check_attention(nan_attention)
    assert not result and "NaN" in result.message
    nan_lr = tl.checks.check_noam_lr(lambda step, d_model, warmup: float("nan"))
    assert not nan_lr and "NaN" in nan_lr.message


def test_positional_encoding_check_given_an_instance_asks_for_the_class():
    import solutions

    module = solutions.solution("03", "MyPositionalEncoding")(16, 50)
    result = tl.checks.check_positional_encoding(module)
    assert not result and "pass the class itself, not an instance" in result.message, result.message


def test_noam_check_takes_a_numpy_number_as_a_number():
    def numpy_schedule(step, d_model, warmup):
        return np.float32(d_model**-0.5) * np.float32(min(step**-0.5, step * warmup**-1.5))

    assert tl.checks.check_noam_lr(numpy_schedule)


class FrozenOutputMHA(BiasFreeMHA):
    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        self.w_o.weight.requires_grad_(False)


def test_multi_head_attention_check_names_a_frozen_parameter():
    result = tl.checks.check_multi_head_attention(FrozenOutputMHA)
    assert not result and "w_o.weight'] have requires_grad=False" in result.message, result.message


@pytest.mark.parametrize("check", ["check_encoder", "check_multi_head_attention", "check_generate"])
def test_a_check_leaves_the_learners_random_state_alone(check):
    """Building the student's module (its initial weights) and the check's own fixed modules draw
    random numbers; none of them may move the learner's seeded stream."""
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert getattr(tl.checks, check)(code)
    assert torch.equal(torch.rand(3), expected)


def test_a_warning_of_student_code_is_shown_and_the_check_still_judges():
    def attention_that_warns(q, k, v, mask=None):
        import warnings

        warnings.warn("a note from the student's code", UserWarning, stacklevel=1)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    with pytest.warns(UserWarning, match="a note from the student's code"):
        assert tl.checks.check_attention(attention_that_warns)


def test_table3_check_reports_a_row_that_fails_to_train(monkeypatch):
    # what a row with d_model=100000 meets while its model is built
    def out_of_memory(answer, results):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    from transformer_lib.teaching.checks import nb10_paper_experiments

    monkeypatch.setattr(nb10_paper_experiments, "judge_own_row", out_of_memory)
    result = tl.checks.check_table3_row(lambda: ({"d_model": 100_000}, "lower"))
    assert (
        not result and "could not be trained (RuntimeError: DefaultCPUAllocator" in result.message
    ), result.message


class ZeroGainNorm(nn.Module):
    """A LayerNorm whose gain starts at 0 (and shift at 1): every output is the shift, whatever the
    input."""

    def __init__(self, d_model):
        super().__init__()
        self.weight, self.bias = (
            nn.Parameter(torch.zeros(d_model)),
            nn.Parameter(torch.ones(d_model)),
        )

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


# it used to pass: the check set them itself
def test_layer_norm_check_names_a_gain_that_does_not_start_at_one():
    result = tl.checks.check_layer_norm(ZeroGainNorm)
    assert not result and "gain `weight` starts at 1 and its shift `bias` at 0" in result.message, (
        result.message
    )


def test_check_mask_tokens_accepts_a_correct_recipe_that_draws_in_another_order():
    """Exactly round(rate * n) picks per row, chosen with randperm: correct, and its shares differ
    from the library's own draw by more than sampling noise around the expectation would allow."""

    def per_row(tokens, mask_id, vocab_size, special_ids, rate, generator):
        inputs, targets = tokens.clone(), torch.full_like(tokens, -100)
        allowed = torch.tensor(
            [i for i in range(vocab_size) if i not in special_ids and i != mask_id]
        )
        for b in range(tokens.size(0)):
            pos = (~torch.isin(tokens[b], torch.tensor(special_ids))).nonzero()[:, 0]
            chosen = pos[torch.randperm(len(pos), generator=generator)[: round(rate * len(pos))]]
            targets[b, chosen] = tokens[b, chosen]
            action = torch.rand(len(chosen), generator=generator)
            inputs[b, chosen[action < 0.8]] = mask_id
            swapped = chosen[(action >= 0.8) & (action < 0.9)]
            inputs[b, swapped] = allowed[
                torch.randint(len(allowed), (len(swapped),), generator=generator)
            ]
        return inputs, targets

    assert tl.checks.check_mask_tokens(per_row)


def test_check_lm_parameter_count_accepts_a_numpy_integer():
    def count(config):
        with torch.device("meta"):
            return np.int64(sum(p.numel() for p in tl.DecoderOnlyLM(config).parameters()))

    assert tl.checks.check_lm_parameter_count(count)


# --- what a fresh review found: each promise, tested on the code that broke it --------------------


class MisspelledForward(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    # the typo: nn.Module raises NotImplementedError itself
    def foward(self, query, key, value, mask=None):
        return query


def test_only_the_stubs_own_not_implemented_error_means_not_implemented_yet():
    result = tl.checks.check_multi_head_attention(MisspelledForward)
    assert (
        not result and "not implemented yet" not in result.message and "spelling" in result.message
    )

    def meta_attention(q, k, v, mask=None):
        torch.empty(2, device="meta").cpu()  # PyTorch's own NotImplementedError
        return q

    result = tl.checks.check_attention(meta_attention)
    assert not result and "raised NotImplementedError" in result.message, result.message


def test_the_causal_decoder_check_survives_a_broken_model_and_restores_every_module_mode():
    class NoInit(nn.Module):
        def __init__(self):  # forgot super().__init__()
            pass

        def forward(self, src, tgt):
            return torch.zeros(*tgt.shape, 4)

    result = tl.checks.check_causal_decoder(NoInit())
    assert not result and "super().__init__()" in result.message, result.message
    model = tl.Transformer(tiny_config()).train()
    model.src_embed.eval()
    assert tl.checks.check_causal_decoder(model)
    assert (
        model.training
        and not model.src_embed.training
        and all(m.training for m in model.decoder.modules())
    )


@pytest.mark.parametrize(
    "check",
    ["check_attention", "check_multi_head_attention", "check_encoder_layer", "check_decoder_layer"],
)
def test_a_check_called_under_autocast_still_passes_a_correct_answer(check):
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = getattr(tl.checks, check)(code)
    assert result, result.message


@pytest.mark.parametrize(
    ("check", "code"),
    [
        ("check_temperature_softmax", lambda logits, t: ((logits / t).softmax(-1), "junk")),
        ("check_split_heads", lambda x, h: (tl.split_heads(x, h), None)),
        (
            "check_positional_encoding",
            lambda d, n: (tl.sinusoidal_encoding(d_model=d, max_len=n), 0),
        ),
        ("check_label_smoothing", lambda *args: (tl.smoothed_targets(*args), 1)),
    ],
)
def test_a_tuple_is_no_answer_where_the_form_is_one_tensor(check, code):
    result = getattr(tl.checks, check)(code)
    assert not result and "got tuple" in result.message, result.message


@pytest.mark.parametrize(
    "make_mask",
    [
        lambda t: torch.ones(t, t, dtype=torch.bool).tril().flatten(),
        lambda t: torch.ones(t, t, dtype=torch.bool).tril()[:, None],
    ],
)
def test_the_causal_mask_check_accepts_only_the_two_documented_shapes(make_mask):
    assert not tl.checks.check_causal_mask(make_mask)


def _mha_variant(forward):
    import solutions

    return type(
        "Variant", (solutions.solution("02", "MyMultiHeadAttention"),), {"forward": forward}
    )


def test_forgotten_output_projection_and_shared_key_projection_get_their_hints():
    def no_output_projection(self, query, key, value, mask=None):
        heads = tl.scaled_dot_product_attention(
            *(
                tl.split_heads(w(t), self.num_heads)
                for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
            ),
            mask,
        )[0]
        return tl.combine_heads(heads)

    def query_projection_for_keys(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_q, key), (self.w_v, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))

    assert (
        "w_o was not applied"
        in tl.checks.check_multi_head_attention(_mha_variant(no_output_projection)).message
    )
    assert (
        "projected with w_q"
        in tl.checks.check_multi_head_attention(_mha_variant(query_projection_for_keys)).message
    )


def test_cross_attention_with_queries_from_the_memory_gets_its_hint():
    import solutions

    class Swapped(solutions.solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            x = self.norm1(x + self.self_attn(x, x, x, tgt_mask)[0])
            x = self.norm2(x + self.cross_attn(memory, x, x, memory_mask)[0])
            return self.norm3(x + self.feed_forward(x))

    result = tl.checks.check_decoder_layer(Swapped)
    assert not result and "queries came from the memory" in result.message, result.message


def test_targets_of_zero_instead_of_ignore_index_get_their_hint():
    def zero_targets(tokens, mask_id, vocab_size, special_ids, rate, generator):
        inputs, targets = tl.lm.mask_tokens(
            tokens, mask_id, vocab_size, special_ids, rate, generator
        )
        return inputs, torch.where(targets == tl.lm.IGNORE_INDEX, 0, targets)

    result = tl.checks.check_mask_tokens(zero_targets)
    assert not result and "IGNORE_INDEX" in result.message and "target 0" in result.message, (
        result.message
    )


def test_exit_in_student_code_is_reported():
    import sys

    result = tl.checks.check_attention(lambda q, k, v, mask=None: sys.exit(1))
    assert not result and "SystemExit" in result.message, result.message


def test_a_students_warning_is_shown_once_however_often_the_check_runs(recwarn):
    def attention_that_warns(q, k, v, mask=None):
        import warnings

        warnings.warn("shown once", UserWarning, stacklevel=1)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    assert tl.checks.check_attention(attention_that_warns) and tl.checks.check_attention(
        attention_that_warns
    )
    assert sum("shown once" in str(w.message) for w in recwarn) == 1


class ScrambledOutput(nn.Module):
    """A multi-head attention whose output projection is applied twice: wrong for any weights."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        return self.w_o(
            self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))
        )


def test_a_check_says_the_same_thing_whatever_the_learners_seed_and_leaves_every_stream_alone():
    import random

    messages = set()
    for seed in (1, 2):
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)
        python_next, numpy_next = random.Random(seed).random(), np.random.RandomState(seed).rand()
        messages.add(tl.checks.check_multi_head_attention(ScrambledOutput).message)
        assert random.random() == python_next and np.random.rand() == numpy_next
    assert len(messages) == 1, messages


# --- a second fresh review ------------------------------------------------------------------------


def test_a_stub_in_any_form_and_in_a_helper_is_not_implemented_yet():
    def todo(q, k, v, mask=None):
        raise NotImplementedError("todo")

    def one_line(q, k, v, mask=None):
        if True:
            raise NotImplementedError

    assert "not implemented yet" in tl.checks.check_attention(todo).message
    assert "not implemented yet" in tl.checks.check_attention(one_line).message

    def my_split_heads(x, num_heads):
        raise NotImplementedError

    class UsesAStubbedHelper(nn.Module):
        def __init__(self, d_model, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

        def forward(self, query, key, value, mask=None):
            return my_split_heads(self.w_q(query), self.num_heads)

    message = tl.checks.check_multi_head_attention(UsesAStubbedHelper).message
    assert "not implemented yet (`my_split_heads`, which your code calls)" in message, message


def test_a_not_implemented_error_from_the_standard_library_is_no_stub():
    import logging

    def attention(q, k, v, mask=None):
        # an abstract method: the standard library raises NotImplementedError
        logging.Handler().emit(None)

    result = tl.checks.check_attention(attention)
    assert (
        not result and "raised NotImplementedError: emit must be implemented" in result.message
    ), result.message


def test_warnings_are_shown_even_when_student_code_raises(recwarn):
    def warns_then_raises(q, k, v, mask=None):
        import warnings

        warnings.warn("a clue before the error", UserWarning, stacklevel=1)
        raise ValueError("boom")

    result = tl.checks.check_attention(warns_then_raises)
    assert not result and "ValueError: boom." in result.message and ".." not in result.message
    assert any("a clue before the error" in str(w.message) for w in recwarn)


def test_the_causal_decoder_check_refuses_nan_and_wrongly_shaped_logits():
    nan = tl.checks.check_causal_decoder(lambda src, tgt: torch.full((*tgt.shape, 4), float("nan")))
    assert not nan and "NaN or inf" in nan.message

    def leaks_but_nan_first(src, tgt):  # position t reads token t + 1; position 0 is NaN
        logits = torch.nn.functional.one_hot(tgt.roll(-1, dims=1), 4).float()  # (B, T, 4)
        logits[:, 0] = float("nan")
        return logits

    assert not tl.checks.check_causal_decoder(leaks_but_nan_first)
    time_first = tl.checks.check_causal_decoder(
        lambda src, tgt: torch.zeros(tgt.size(1), tgt.size(0), 4)
    )
    assert not time_first and "(B, T) = (2, 5)" in time_first.message, time_first.message
    assert not tl.checks.check_causal_decoder(
        lambda src, tgt: torch.zeros(tgt.size(0), tgt.size(1) - 1, 4)
    )


def test_a_model_built_under_inference_mode_passes_the_causal_decoder_check():
    with torch.inference_mode():
        model = tl.Transformer(tiny_config())
    result = tl.checks.check_causal_decoder(model)
    assert result, result.message


class NumpyWeights(ScrambledOutput):
    """Weights drawn from NumPy's global stream, then scrambled: a wrong module whose numbers depend
    on it."""

    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads)
        with torch.no_grad():
            self.w_q.weight.copy_(torch.from_numpy(np.random.randn(d_model, d_model)))


def test_messages_do_not_depend_on_pythons_or_numpys_seed_and_the_default_dtype_is_restored():
    messages = set()
    for seed in (1, 2):
        np.random.seed(seed)
        messages.add(tl.checks.check_multi_head_attention(NumpyWeights).message)
    assert len(messages) == 1, messages

    def sets_float64(q, k, v, mask=None):
        torch.set_default_dtype(torch.float64)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    tl.checks.check_attention(sets_float64)
    assert torch.get_default_dtype() == torch.float32


def test_any_base_exception_but_keyboard_interrupt_becomes_a_message():
    class Odd(BaseException):
        pass

    def raises_odd(q, k, v, mask=None):
        raise Odd("odd")

    result = tl.checks.check_attention(raises_odd)
    assert not result and "Odd: odd" in result.message


@pytest.mark.parametrize(
    ("mistake", "words"),
    [
        (
            lambda q, k, v, mask=None: tl.scaled_dot_product_attention(q, k, v, mask)[::-1],
            "(weights, output)",
        ),
        (
            lambda q, k, v, mask=None: (
                (q @ k.transpose(-2, -1) / math.sqrt(v.size(-1))).softmax(-1) @ v
                if mask is None
                else tl.scaled_dot_product_attention(q, k, v, mask)[0]
            ),
            "sqrt(d_v)",
        ),
    ],
)
def test_more_attention_mistakes_get_their_hints(mistake, words):
    result = tl.checks.check_attention(mistake)
    assert not result and words in result.message, result.message


def test_masking_after_the_softmax_gets_its_hint():
    def after_softmax(q, k, v, mask=None):
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v

    result = tl.checks.check_attention(after_softmax)
    assert not result and "after the softmax" in result.message, result.message


def test_values_through_w_k_and_swapped_decoder_masks_get_their_hints():
    import solutions

    def values_through_keys(self, query, key, value, mask=None):
        q, k, v = (
            tl.split_heads(w(t), self.num_heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_k, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))

    assert (
        "projected with w_k"
        in tl.checks.check_multi_head_attention(_mha_variant(values_through_keys)).message
    )

    class SwappedMasks(solutions.solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            x = self.norm1(x + self.self_attn(x, x, x, memory_mask)[0])
            x = self.norm2(x + self.cross_attn(x, memory, memory, tgt_mask)[0])
            return self.norm3(x + self.feed_forward(x))

    result = tl.checks.check_decoder_layer(SwappedMasks)
    assert not result and "two masks were swapped" in result.message, result.message


def test_a_wrong_tuple_from_mask_tokens_names_its_items():
    result = tl.checks.check_mask_tokens(lambda *args: (1, 2))
    assert not result and "got (int, int)" in result.message, result.message


# --- issue #29: wrong answers that passed, and hostile ones that made a check raise ---------------


def _solution(notebook, name):
    import solutions

    return solutions.solution(notebook, name)


class HeadsOfWidthH(nn.Module):
    """Multi-head attention that splits into d_k heads of h features: equal to the right one when h
    == d_k."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.width = num_heads  # the bug: num_heads used as the width of a head
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        heads = self.w_q.out_features // self.width
        q, k, v = (
            tl.split_heads(w(t), heads)
            for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        return self.w_o(tl.combine_heads(tl.scaled_dot_product_attention(q, k, v, mask)[0]))


def layer_with(decoder: bool, attention: type, index_zero: bool) -> type:
    """The reference layer with the learner's ``attention`` class; ``index_zero``: its result is
    read with ``[0]``."""
    base = _solution("05", "MyDecoderLayer") if decoder else _solution("04", "MyEncoderLayer")

    class Layer(base):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.self_attn = attention(d_model, num_heads)
            if decoder:
                self.cross_attn = attention(d_model, num_heads)

    class Bare(nn.Module):  # the learner's attention seen through `[0]` (or not)
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.w_q, self.w_k, self.w_v, self.w_o = inner.w_q, inner.w_k, inner.w_v, inner.w_o

        def forward(self, *args):
            out = self.inner(*args)
            # the layer takes [0]: batch element 0, or the output
            return out if index_zero else (out, None)

    class Wrapped(Layer):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.self_attn = Bare(self.self_attn)
            if decoder:
                self.cross_attn = Bare(self.cross_attn)

    return Wrapped


@pytest.mark.parametrize(
    "check", ["check_multi_head_attention", "check_encoder_layer", "check_decoder_layer"]
)
def test_d_k_heads_of_width_h_are_named_where_h_differs_from_d_k(check):
    """Issue #29, 1: with d_model=16, h=4 (h == d_k) a module with the two swapped passed every
    check."""
    code = {"check_multi_head_attention": HeadsOfWidthH}.get(check) or layer_with(
        check == "check_decoder_layer", HeadsOfWidthH, index_zero=False
    )
    result = getattr(tl.checks, check)(code)
    assert not result and "d_k heads of h features" in result.message and "h=3" in result.message, (
        result.message
    )


def test_multi_head_attention_compares_the_weights_it_returns():
    """Issue #29, 2: returned weights are compared, per head or averaged over the heads."""

    class WithWeights(nn.Module):
        def __init__(self, d_model, num_heads, average=False, wrong=False):
            super().__init__()
            self.attn, self.average, self.wrong = (
                tl.MultiHeadAttention(d_model, num_heads),
                average,
                wrong,
            )
            self.w_q, self.w_k, self.w_v, self.w_o = (
                self.attn.w_q,
                self.attn.w_k,
                self.attn.w_v,
                self.attn.w_o,
            )

        def forward(self, query, key, value, mask=None):
            out, weights = self.attn(query, key, value, mask, need_weights=True)
            weights = torch.zeros_like(weights) + 7 if self.wrong else weights
            return out, weights.mean(1) if self.average else weights

    class Averaged(WithWeights):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads, average=True)

    class Sevens(WithWeights):
        def __init__(self, d_model, num_heads):
            super().__init__(d_model, num_heads, wrong=True)

    assert tl.checks.check_multi_head_attention(WithWeights)
    assert tl.checks.check_multi_head_attention(Averaged)
    wrong = tl.checks.check_multi_head_attention(Sevens)
    assert not wrong and "your weights" in wrong.message and "got 7" in wrong.message, wrong.message


def _layer_norm(forward) -> type:
    class Norm(nn.Module):
        def __init__(self, d_model):
            super().__init__()
            self.weight, self.bias = (
                nn.Parameter(torch.ones(d_model)),
                nn.Parameter(torch.zeros(d_model)),
            )

        def normalised(self, x, eps=1e-5):
            return (x - x.mean(-1, keepdim=True)) / torch.sqrt(
                x.var(-1, unbiased=False, keepdim=True) + eps
            )

    Norm.forward = forward
    return Norm


@pytest.mark.parametrize(
    ("forward", "words"),
    [
        (lambda self, x: self.normalised(x, 0.0) * self.weight + self.bias, "no eps"),
        (
            lambda self, x: (
                (x - x.mean(-1, keepdim=True))
                / (x.std(-1, unbiased=False, keepdim=True) + 1e-5)
                * self.weight
                + self.bias
            ),
            "outside the square root",
        ),
        (
            lambda self, x: self.normalised(x) * self.weight * self.weight + self.bias,
            "gain was applied twice",
        ),
        (
            lambda self, x: (self.normalised(x) + self.bias) * self.weight,
            "shift was added before the gain",
        ),
        (lambda self, x: self.normalised(x * self.weight) + self.bias, "before normalising"),
    ],
)
def test_layer_norm_mistakes_that_passed_are_named(forward, words):
    """Issue #29, 3: no eps (every case had variance >= 1.59), and a gain or shift misplaced."""
    result = tl.checks.check_layer_norm(_layer_norm(forward))
    assert not result and words in result.message, result.message


def test_a_difference_always_shows_in_the_numbers_printed():
    """Issue #29, 3: "expected 2.106, got 2.106" for a difference of 1.3e-4."""
    from transformer_lib.teaching.checks import engine

    assert engine._pair(2.1061, 2.10623) == ("2.1061", "2.1062")
    assert engine._pair(1.0, 1.0 + 1e-12) == ("1", "1.000000000001")
    result = tl.checks.check_layer_norm(
        _layer_norm(lambda self, x: self.normalised(x) * self.weight + self.bias + 1.3e-4)
    )
    shown = result.message.split("expected ")[1].split(". Hint")[0]
    want, have = shown.split(", got ")
    assert not result and want != have, result.message


def test_one_layer_norm_shared_by_two_sublayers_is_named():
    """Issue #29, 4: with fresh norms (gain 1, shift 0) a shared LayerNorm computed the same
    thing."""

    class Shared(_solution("04", "MyEncoderLayer")):
        def __init__(self, d_model, num_heads, d_ff, norm_first=False):
            super().__init__(d_model, num_heads, d_ff, norm_first)
            self.norm2 = self.norm1

    result = tl.checks.check_encoder_layer(Shared)
    assert not result and "`norm1` and `norm2` are one LayerNorm" in result.message, result.message

    class SecondNormUnused(_solution("04", "MyEncoderLayer")):
        def forward(self, x, mask=None):
            # the feed-forward gets norm1 (the attribute norm2 is set back below)
            self.norm2 = self.norm1
            try:
                return super().forward(x, mask)
            finally:
                del self.norm2

    assert not tl.checks.check_encoder_layer(SecondNormUnused)


def test_a_query_that_sees_no_key_must_get_zeros_not_nan():
    """Issue #29, 5 (the in-place half:
    test_student_code_that_changes_the_callers_input_in_place_is_named)."""

    def nan_rows(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights

    result = tl.checks.check_attention(nan_rows)
    assert not result and "may see no key got NaN" in result.message, result.message
    assert tl.checks.check_attention(_solution("01", "my_attention"))


def test_temperature_softmax_over_dim_1_is_named_and_no_grad_is_right():
    """Issue #29, 6."""
    result = tl.checks.check_temperature_softmax(lambda logits, t: (logits / t).softmax(dim=1))
    assert not result and "for (B, T, V) it is the positions" in result.message, result.message

    def under_no_grad(logits, t):
        with torch.no_grad():
            return (logits / t).softmax(-1)

    assert tl.checks.check_temperature_softmax(under_no_grad)


def test_a_decoder_layer_with_a_causal_mask_of_its_own_is_named():
    """Issue #29, 7: ignoring tgt_mask for a causal mask of its own drops the target's padding."""

    class OwnCausalMask(_solution("05", "MyDecoderLayer")):
        def forward(self, x, memory, tgt_mask=None, memory_mask=None):
            return super().forward(x, memory, tl.causal_mask(x.size(1)), memory_mask)

    result = tl.checks.check_decoder_layer(OwnCausalMask)
    assert (
        not result
        and "causal mask of its own" in result.message
        and "left padding" in result.message
    )


def test_shifted_targets_take_any_pair_and_refuse_float_ids():
    """Issue #29, 8."""
    assert tl.checks.check_shifted_targets(lambda tgt: [tgt[:, :-1], tgt[:, 1:]])
    result = tl.checks.check_shifted_targets(lambda tgt: (tgt[:, :-1].float(), tgt[:, 1:].float()))
    assert (
        not result and "dtype torch.float32" in result.message and "integers" in result.message
    ), result.message


@pytest.mark.parametrize("check", ["check_gpt_block", "check_cross_attention"])
def test_student_code_that_changes_a_shared_module_cannot_change_the_reference(check):
    """Issue #29, 9: a module the case hands to both sides is copied for the student's side."""

    def drops_the_mask_for_every_caller(module, x, *rest):
        forward = module.forward
        module.forward = lambda *args: (
            forward(*args[:3]) if check == "check_cross_attention" else forward(args[0])
        )
        return (
            module(x, rest[0], rest[0], rest[1]) if rest else module(x, tl.causal_mask(x.size(1)))
        )

    result = getattr(tl.checks, check)(drops_the_mask_for_every_caller)
    assert not result, result.message


class _Unprintable(Exception):
    """An exception that cannot be printed: printing it raises another such exception."""

    def __str__(self):
        raise _Unprintable

    def __repr__(self):
        raise _Unprintable


class _NotAStringException(Exception):
    def __str__(self):
        return 42


class _UnprintableWarning(UserWarning):
    def __str__(self):
        raise _Unprintable


class _NoShape(torch.Tensor):
    @property
    def shape(self):
        raise _Unprintable


class _Unrepresentable:
    def __repr__(self):
        raise _Unprintable

    def __float__(self):
        raise _Unprintable()


class _ModuleNone(nn.Module):
    __module__ = None

    def __init__(self, d_model, num_heads):
        super().__init__()
        raise NotImplementedError


def _raises(exc):
    def code(*args, **kwargs):
        raise exc

    return code


def _warns_unprintably(*args, **kwargs):
    import warnings

    warnings.warn(_UnprintableWarning(), stacklevel=1)
    return tl.scaled_dot_product_attention(*args)


HOSTILE = {
    "exception whose str and repr raise": ("check_attention", _raises(_Unprintable())),
    "exception whose str is no string": ("check_attention", _raises(_NotAStringException())),
    "base exception whose str raises": (
        "check_attention",
        _raises(type("Odd", (BaseException,), {"__str__": _Unprintable.__str__})()),
    ),
    "warning whose str raises": ("check_attention", _warns_unprintably),
    "result whose shape raises": (
        "check_attention",
        lambda q, k, v, mask=None: torch.zeros(2).as_subclass(_NoShape),
    ),
    "result whose repr and float raise": (
        "check_noam_lr",
        lambda step, d_model, warmup: _Unrepresentable(),
    ),
    "class whose repr raises": ("check_multi_head_attention", _Unrepresentable()),
    "stub class with __module__ None": ("check_multi_head_attention", _ModuleNone),
    "stub function whose exception cannot print": ("check_split_heads", _raises(_Unprintable())),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_but_possible_code_never_makes_a_check_raise(kind):
    """Issue #29, 10: what student code hands back is formatted defensively; a check never
    raises."""
    import warnings

    check, code = HOSTILE[kind]
    escaped = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = getattr(tl.checks, check)(code)
    # what escaped may not even print: name its type only, outside the handler
    except BaseException as exc:
        escaped = type(exc).__name__
    if escaped:
        pytest.fail(f"{check} raised {escaped}", pytrace=False)
    assert (
        isinstance(result, tl.checks.CheckResult)
        and not result
        and result.message.startswith(("❌", "⏳"))
    )
    if kind == "stub class with __module__ None":
        assert "not implemented yet" in result.message, result.message


@pytest.mark.parametrize("setting", ["meta device", "float16", "float64"])
@pytest.mark.parametrize(
    "check",
    [
        "check_attention",
        "check_multi_head_attention",
        "check_conv_feed_forward",
        "check_encoder",
        "check_decoder_layer",
        "check_transformer_parameter_count",
    ],
)
def test_a_check_runs_in_float32_on_the_cpu_whatever_the_learner_set(check, setting):
    """Issue #29, 11: correct code failed after `torch.set_default_device("meta")` or a float16
    default dtype."""
    import solutions

    code = next(
        solutions.solution(e.notebook, e.name) for e in solutions.EXERCISES if e.check == check
    )
    dtype = torch.get_default_dtype()
    try:
        if setting == "meta device":
            torch.set_default_device("meta")
        else:
            torch.set_default_dtype(getattr(torch, setting))
        result = getattr(tl.checks, check)(code)
        after = default_device(), torch.get_default_dtype()
    finally:
        set_default_device(None)
        torch.set_default_dtype(dtype)
    assert result, result.message
    assert after == (
        (torch.device("meta"), dtype)
        if setting == "meta device"
        else (torch.device("cpu"), getattr(torch, setting))
    )


def test_a_check_leaves_global_settings_as_it_found_them():
    """Issue #29, 11: whatever student code sets, the default device, deterministic-algorithms flag,
    thread count, anomaly mode and recursion limit are as before."""
    import sys

    def meddles(q, k, v, mask=None):
        torch.set_default_device("meta")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_num_threads(threads + 1)
        torch.set_anomaly_enabled(True)
        sys.setrecursionlimit(limit + 1000)
        raise ValueError("and then a bug")

    before = (
        default_device(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
        torch.is_anomaly_enabled(),
        sys.getrecursionlimit(),
    )
    threads, limit = before[2], before[4]
    assert not tl.checks.check_attention(meddles)
    after = (
        default_device(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
        torch.is_anomaly_enabled(),
        sys.getrecursionlimit(),
    )
    assert after == before


def test_a_causal_decoder_whose_train_forgets_to_return_self_passes():
    """Issue #29, 11: the check called `model.eval()(src, tgt)`, which is `None(src, tgt)` here."""

    class NoReturn(tl.Transformer):
        def train(self, mode=True):
            super().train(mode)  # forgot `return self`

    model = NoReturn(tiny_config())
    result = tl.checks.check_causal_decoder(model)
    assert result and model.training, result.message


@pytest.mark.parametrize("decoder", [False, True])
def test_an_attention_returning_the_output_alone_read_with_index_zero_is_named(decoder):
    """Issue #29, 12: `self.self_attn(...)[0]` on notebook 02's module (which may return the output
    alone) takes batch element 0; without `[0]` the same module is right."""
    mha = _solution("02", "MyMultiHeadAttention")
    check = tl.checks.check_decoder_layer if decoder else tl.checks.check_encoder_layer
    result = check(layer_with(decoder, mha, index_zero=True))
    assert (
        not result
        and "returns the output alone" in result.message
        and "batch element 0" in result.message
    )
    assert check(layer_with(decoder, mha, index_zero=False))


@pytest.mark.parametrize(
    "forward",
    [
        lambda self, x: F.layer_norm(x, x.shape[-1:], self.weight, self.bias, 1e-5),
        lambda self, x: (
            (x - x.mean(-1, keepdim=True))
            * torch.rsqrt((x * x).mean(-1, keepdim=True) - x.mean(-1, keepdim=True) ** 2 + 1e-5)
            * self.weight
            + self.bias
        ),
    ],
)
def test_every_correct_way_of_writing_layer_norm_passes_the_near_constant_tokens(forward):
    """The near-constant tokens sit near 0, so float32 rounding (even E[x^2] - E[x]^2) stays far
    inside the tolerance."""
    result = tl.checks.check_layer_norm(_layer_norm(forward))
    assert result, result.message
