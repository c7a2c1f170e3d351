"""``tl.copy_from_torch``: after the copy, our modules compute exactly what PyTorch's compute."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import max_abs_diff
from torch import nn

import transformer_lib as tl

B, T, T_SRC, D_MODEL, HEADS, D_FF = 3, 5, 7, 16, 4, 32


def _padding_masks() -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence padding of the source: ours ``(B, 1, 1, T_src)`` True = may attend, PyTorch's
    ``(B, T_src)`` True = blocked."""
    lengths = torch.tensor([T_SRC, 4, 2])
    keep = torch.arange(T_SRC)[None, :] < lengths[:, None]  # (B, T_src)
    return keep[:, None, None, :], ~keep


@pytest.mark.parametrize("bias", [True, False])
def test_multi_head_attention_equals_pytorch_after_copy(bias):
    theirs = nn.MultiheadAttention(D_MODEL, HEADS, bias=bias, batch_first=True).eval()
    ours = tl.copy_from_torch(tl.MultiHeadAttention(D_MODEL, HEADS, bias=bias), theirs).eval()
    q, kv = torch.randn(B, T, D_MODEL), torch.randn(B, T_SRC, D_MODEL)
    ours_mask, theirs_mask = _padding_masks()
    expected = theirs(q, kv, kv, key_padding_mask=theirs_mask)[0]
    assert max_abs_diff(ours(q, kv, kv, ours_mask)[0], expected) < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_pytorch_after_copy(norm_first):
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = tl.EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first)
    assert tl.copy_from_torch(ours, theirs) is ours
    x = torch.randn(B, T_SRC, D_MODEL)
    ours_mask, theirs_mask = _padding_masks()
    expected = theirs.eval()(x, src_key_padding_mask=theirs_mask)
    assert max_abs_diff(ours.eval()(x, ours_mask), expected) < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_pytorch_after_copy(norm_first):
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    ours = tl.copy_from_torch(
        tl.DecoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first), theirs
    )
    x, memory = torch.randn(B, T, D_MODEL), torch.randn(B, T_SRC, D_MODEL)
    ours_mask, theirs_mask = _padding_masks()
    blocked = nn.Transformer.generate_square_subsequent_mask(T).isinf()  # (T, T), True = blocked
    expected = theirs.eval()(x, memory, tgt_mask=blocked, memory_key_padding_mask=theirs_mask)
    got = ours.eval()(x, memory, tl.causal_mask(T), ours_mask)
    assert max_abs_diff(got, expected) < 1e-5


@pytest.mark.parametrize(
    "ours, theirs, named",
    [
        (
            tl.EncoderLayer(D_MODEL, HEADS, D_FF),
            nn.MultiheadAttention(D_MODEL, HEADS),
            "EncoderLayer <- MultiheadAttention",
        ),
        (
            tl.MultiHeadAttention(D_MODEL, HEADS),
            nn.MultiheadAttention(D_MODEL, 2),
            "num_heads differ",
        ),
        (tl.MultiHeadAttention(D_MODEL, HEADS), nn.MultiheadAttention(8, HEADS), "shapes differ"),
        (
            tl.MultiHeadAttention(D_MODEL, HEADS, bias=False),
            nn.MultiheadAttention(D_MODEL, HEADS),
            "bias",
        ),
        (
            tl.EncoderLayer(D_MODEL, HEADS, D_FF),
            nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, norm_first=True),
            "norm_first differs",
        ),
        (
            tl.EncoderLayer(D_MODEL, HEADS, D_FF),
            nn.TransformerEncoderLayer(D_MODEL, HEADS, 8),
            "linear1.weight",
        ),
        (
            tl.DecoderLayer(D_MODEL, HEADS, D_FF),
            nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF, activation="gelu"),
            "ReLU",
        ),
        (
            tl.MultiHeadAttention(D_MODEL, HEADS, rope_theta=10000.0),
            nn.MultiheadAttention(D_MODEL, HEADS),
            "ours rotates queries and keys",
        ),
        (
            tl.MultiHeadAttention(D_MODEL, HEADS, n_kv_heads=1),
            nn.MultiheadAttention(D_MODEL, HEADS),
            "w_k.weight",
        ),
        (
            tl.EncoderLayer(D_MODEL, HEADS, D_FF, norm="rmsnorm"),
            nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF),
            "ours is RMSNorm, PyTorch's layers use LayerNorm",
        ),
    ],
)
def test_other_pairs_and_mismatched_sizes_raise_type_error_and_copy_nothing(ours, theirs, named):
    before = {name: p.clone() for name, p in ours.state_dict().items()}
    with pytest.raises(TypeError, match=named):
        tl.copy_from_torch(ours, theirs)
    assert all(torch.equal(before[name], p) for name, p in ours.state_dict().items())


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_gelu_encoder_layer_equals_pytorchs_gelu_layer(norm_first):
    theirs = nn.TransformerEncoderLayer(
        D_MODEL,
        HEADS,
        D_FF,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=norm_first,
    )
    ours = tl.EncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first, activation="gelu"
    )
    tl.copy_from_torch(ours, theirs)
    x = torch.randn(B, T_SRC, D_MODEL)
    assert max_abs_diff(ours.eval()(x), theirs.eval()(x)) < 1e-5
    with pytest.raises(TypeError, match="activations differ: ours 'relu', PyTorch's 'gelu'"):
        tl.copy_from_torch(tl.EncoderLayer(D_MODEL, HEADS, D_FF, norm_first=norm_first), theirs)


def test_transformer_lib_runs_without_transformers_and_says_what_to_install():
    """``transformers`` is optional: importing the library never imports it, and from_huggingface
    without it raises an ImportError naming the package (run in a fresh interpreter where the import
    fails)."""
    code = (
        # makes `import transformers` raise ImportError
        "import sys; sys.modules['transformers'] = None\nimport transformer_lib as tl\nassert "
        "tl.from_huggingface\ntry:\n    tl.from_huggingface(object())\nexcept ImportError as "
        "error:\n    print(error)\n"
    )
    root = Path(__file__).resolve().parents[1]  # this checkout's transformer_lib
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert "need the optional package transformers (pip install transformers)" in result.stdout


def test_config_from_huggingface_reads_the_families_of_its_table():
    from types import SimpleNamespace

    families = tl.interop.HUGGINGFACE_FAMILIES
    assert [f.model_type for f in families.values()] == ["gpt2", "bert", "marian", "llama"]
    assert tl.interop.HUGGINGFACE_MODELS == {name: f.ours for name, f in families.items()}
    with pytest.raises(
        ValueError, match="reads gpt2, bert, marian and llama configs, got model_type='mistral'"
    ):
        tl.interop.config_from_huggingface(SimpleNamespace(model_type="mistral"))
