"""The checks of notebook 08: every buggy variant in the notebook is caught by its check and every
correct one passes; the causal decoder and shifted targets.

The variants are read from the notebook itself (cells starting ``# BUG: check_x`` or
``# FIX: check_x``), so the notebook and this test cannot drift apart.
"""

import ast
import json
import math
import pathlib

import pytest
import torch
import torch.nn.functional as F
from checks_students import NoCausalMask, tiny_config
from torch import nn

import transformer_lib as tl

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


def test_causal_decoder_and_shifted_targets_checks():
    model = tl.Transformer(tiny_config())
    assert tl.checks.check_causal_decoder(model) and model.training  # the check restores train mode
    result = tl.checks.check_causal_decoder(NoCausalMask(causal=False))
    assert not result and "sees the future" in result.message
    assert tl.checks.check_shifted_targets(lambda tgt: (tgt[:, :-1], tgt[:, 1:]))
    unshifted = tl.checks.check_shifted_targets(lambda tgt: (tgt, tgt))
    assert not unshifted and "not shifted" in unshifted.message


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


def test_shifted_targets_take_any_pair_and_refuse_float_ids():
    """Issue #29, 8."""
    assert tl.checks.check_shifted_targets(lambda tgt: [tgt[:, :-1], tgt[:, 1:]])
    result = tl.checks.check_shifted_targets(lambda tgt: (tgt[:, :-1].float(), tgt[:, 1:].float()))
    assert (
        not result and "dtype torch.float32" in result.message and "integers" in result.message
    ), result.message


def test_a_causal_decoder_whose_train_forgets_to_return_self_passes():
    """Issue #29, 11: the check called `model.eval()(src, tgt)`, which is `None(src, tgt)` here."""

    class NoReturn(tl.Transformer):
        def train(self, mode=True):
            super().train(mode)  # forgot `return self`

    model = NoReturn(tiny_config())
    result = tl.checks.check_causal_decoder(model)
    assert result and model.training, result.message
