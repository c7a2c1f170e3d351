"""Shape tracing and attention capture."""

import pytest
import torch

import transformer_lib as tl


@pytest.fixture
def model():
    tl.seed_everything(0)
    return tl.Transformer(tl.TransformerConfig.cpu_small(20)).eval()


def test_trace_shapes_records_every_call_in_order_with_shapes(model):
    src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
    with tl.trace_shapes(model) as trace:
        model(src, tgt)
    names = [r.name for r in trace.records]
    assert names[0] == "" and trace.records[0].output == "(2, 5, 20)"
    assert names.index("encoder") < names.index("decoder") < names.index("output_projection")
    cross = next(r for r in trace.records if r.name == "decoder.layers.1.cross_attn")
    assert cross.inputs[:3] == ["(2, 5, 128)", "(2, 7, 128)", "(2, 7, 128)"]
    assert "(2, 1, 1, 7) bool" in cross.inputs[3]
    assert cross.output == "((2, 5, 128), None)"
    # model -> decoder -> layer -> residual_cross -> cross_attn (call nesting)
    assert cross.depth == 4
    table = trace.table(max_depth=1)
    assert "encoder" in table and "cross_attn" not in table


def test_trace_shapes_removes_its_hooks_even_after_an_error(model):
    with pytest.raises(TypeError), tl.trace_shapes(model):
        model(torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5)).float())
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_capture_attention_records_all_three_kinds(model):
    src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
    with tl.capture_attention(model) as attention:
        logits = model(src, tgt)
    assert len(attention.of_kind("self")) == len(attention.of_kind("masked self")) == 2
    name, cross = attention.of_kind("cross")[0]
    assert name == "decoder.layers.0.cross_attn" and cross.shape == (2, 4, 5, 7)
    masked = attention["decoder.layers.1.self_attn"]
    assert torch.all(masked[..., ~torch.ones(5, 5, dtype=torch.bool).tril()] == 0)  # causal
    torch.testing.assert_close(logits, model(src, tgt))  # explicit path inside = fast path outside


def test_capture_attention_restores_the_fast_path(model):
    with tl.capture_attention(model):
        pass
    assert all(
        m.recorded_weights is None for m in model.modules() if isinstance(m, tl.MultiHeadAttention)
    )


def test_capture_attention_works_on_a_single_layer_and_names_missing_layers():
    mha = tl.MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    with tl.capture_attention(mha) as attention:
        mha(x, x, x)
    assert attention[""].shape == (1, 2, 3, 3)
    with pytest.raises(KeyError, match="no attention recorded for 'nope'"):
        attention["nope"]
    with pytest.raises(ValueError, match="holds no tl.MultiHeadAttention"):
        with tl.capture_attention(torch.nn.Linear(2, 2)):
            pass
