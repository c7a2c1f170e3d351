"""Bad inputs and faults against the core (attention, masks, layers, encoder/decoder, model,
tracing).

Each case either raises a TypeError/ValueError whose message names the offending value or shape, or
gives the right result with no NaN where the inputs were finite. The rules are listed in the README
("What happens when"); the training-side cases (data, training, checkpoints, decoding) are in
test_bad_inputs_training.py.
"""

import re

import pytest
import torch
import torch.nn.functional as F

import transformer_lib as tl
from transformer_lib.model.decoder import DecoderCache
from transformer_lib.model.layers import LearnedPositionalEncoding

B, T, D, H = 2, 5, 16, 4


def qkv(*lead, dtype=torch.float32):
    return (torch.randn(*lead, T, 8, dtype=dtype) for _ in range(3))


def tiny_model(**changes):
    return tl.Transformer(
        tl.TransformerConfig.cpu_tiny(vocab_size=12).replace(max_len=16, **changes)
    ).eval()


def tiny_lm():
    config = tl.LMConfig(12, d_model=D, num_heads=H, d_ff=32, num_layers=1, max_len=16)
    return tl.DecoderOnlyLM(config).eval()


def lm_cache(num_layers):
    return DecoderCache.empty(num_layers, cross_attention=False)


def mha_call(query, key=None, value=None, mask=None, module=None, need_weights=False):
    module = module if module is not None else tl.MultiHeadAttention(D, H)
    key = query if key is None else key
    return module(query, key, key if value is None else value, mask, need_weights=need_weights)


x_bt = torch.randn(B, T, D)
ids = torch.randint(1, 12, (B, T))

# (expected exception, regex that must name the offending value or shape, the call)
CASES = {
    # scaled_dot_product_attention
    "attention integer q": (
        TypeError,
        "q must be a floating-point tensor, got dtype torch.int64",
        lambda: tl.scaled_dot_product_attention(
            torch.ones(1, T, 8, dtype=torch.long), *list(qkv(1))[1:]
        ),
    ),
    "attention mixed dtypes": (
        TypeError,
        "torch.float32, torch.float64, torch.float32",
        lambda: tl.scaled_dot_product_attention(
            torch.randn(1, T, 8), torch.randn(1, T, 8).double(), torch.randn(1, T, 8)
        ),
    ),
    "attention list input": (
        TypeError,
        "q must be a torch.Tensor, got list",
        lambda: tl.scaled_dot_product_attention([1.0], *qkv()),
    ),
    "attention 1-D q": (
        ValueError,
        r"at least \(T, d\); got \(8,\)",
        lambda: tl.scaled_dot_product_attention(torch.randn(8), *list(qkv())[1:]),
    ),
    "attention d_k differs": (
        ValueError,
        r"q is \(2, 5, 8\) \(d_k=8\), k is \(2, 5, 6\)",
        lambda: tl.scaled_dot_product_attention(
            torch.randn(2, 5, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 6)
        ),
    ),
    "attention T_k differs": (
        ValueError,
        r"k is \(2, 5, 8\), v is \(2, 4, 8\)",
        lambda: tl.scaled_dot_product_attention(
            torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 4, 8)
        ),
    ),
    "attention empty sequence": (
        ValueError,
        "T_q=0",
        lambda: tl.scaled_dot_product_attention(
            torch.randn(2, 0, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
        ),
    ),
    "attention batches differ": (
        ValueError,
        r"q \(2, 5, 8\), k \(3, 5, 8\)",
        lambda: tl.scaled_dot_product_attention(
            torch.randn(2, 5, 8), torch.randn(3, 5, 8), torch.randn(3, 5, 8)
        ),
    ),
    "attention float mask": (
        TypeError,
        "dtype torch.bool .True = may attend., got torch.float32",
        lambda: tl.scaled_dot_product_attention(*qkv(B), mask=torch.ones(1, T, T)),
    ),
    "attention list mask": (
        TypeError,
        "got list",
        lambda: tl.scaled_dot_product_attention(*qkv(B), mask=[[True] * T] * T),
    ),
    "attention 2-D mask on 3-D scores": (
        ValueError,
        r"mask of shape \(5, 5\) has 2 dims but the scores \(2, 5, 5\) have 3.*mask\[None\]",
        lambda: tl.scaled_dot_product_attention(*qkv(B), mask=torch.ones(T, T, dtype=torch.bool)),
    ),
    "attention mask grows the scores": (
        ValueError,
        r"mask of shape \(3, 5, 5\) cannot broadcast to scores \(2, 5, 5\)",
        lambda: tl.scaled_dot_product_attention(
            *qkv(B), mask=torch.ones(3, T, T, dtype=torch.bool)
        ),
    ),
    "attention mask with wrong T_k": (
        ValueError,
        r"mask of shape \(2, 1, 7\) cannot broadcast to scores \(2, 5, 5\)",
        lambda: tl.scaled_dot_product_attention(
            *qkv(B), mask=torch.ones(B, 1, 7, dtype=torch.bool)
        ),
    ),
    "attention mask on another device": (
        ValueError,
        "mask is on meta but the scores are on cpu",
        lambda: tl.scaled_dot_product_attention(
            *qkv(B), mask=torch.ones(1, T, T, dtype=torch.bool, device="meta")
        ),
    ),
    # split_heads / combine_heads
    "split_heads num_heads=0": (
        ValueError,
        "num_heads must be >= 1, got num_heads=0",
        lambda: tl.split_heads(x_bt, 0),
    ),
    "split_heads float num_heads": (
        TypeError,
        "num_heads must be an int, got 2.0",
        lambda: tl.split_heads(x_bt, 2.0),
    ),
    "split_heads not divisible": (
        ValueError,
        "16 is not divisible by num_heads=3",
        lambda: tl.split_heads(x_bt, 3),
    ),
    "split_heads 4-D input": (
        ValueError,
        r"\(B, T, h \* d\), got \(2, 4, 5, 4\)",
        lambda: tl.split_heads(torch.randn(B, H, T, 4), 4),
    ),
    "combine_heads 3-D input": (
        ValueError,
        r"\(B, h, T, d\), got \(2, 5, 16\)",
        lambda: tl.combine_heads(x_bt),
    ),
    # MultiHeadAttention
    "MHA num_heads=0": (ValueError, "num_heads=0", lambda: tl.MultiHeadAttention(D, 0)),
    "MHA d_model not divisible": (
        ValueError,
        "d_model=10 is not divisible by num_heads=3",
        lambda: tl.MultiHeadAttention(10, 3),
    ),
    "MHA integer query": (
        TypeError,
        "query must be a floating-point tensor, got dtype torch.int64",
        lambda: mha_call(torch.ones(B, T, D, dtype=torch.long)),
    ),
    "MHA fp64 input, fp32 weights": (
        TypeError,
        "inputs have dtype torch.float64 but the module's weights have torch.float32",
        lambda: mha_call(x_bt.double()),
    ),
    "MHA mixed query and key dtypes": (
        TypeError,
        "torch.float32, torch.float16, torch.float16",
        lambda: mha_call(x_bt, x_bt.half()),
    ),
    "MHA source and target batches differ": (
        ValueError,
        r"one batch size B, got query \(3, 5, 16\), key \(1, 5, 16\)",
        lambda: mha_call(torch.randn(3, T, D), torch.randn(1, T, D)),
    ),
    "MHA key and value lengths differ": (
        ValueError,
        r"\(2, 5, 16\), \(2, 6, 16\)",
        lambda: mha_call(x_bt, x_bt, torch.randn(B, 6, D)),
    ),
    "MHA wrong width": (
        ValueError,
        r"query must be \(B, T, d_model=16\), got shape \(2, 5, 12\)",
        lambda: mha_call(torch.randn(B, T, 12), x_bt),
    ),
    "MHA 2-D query": (ValueError, r"got shape \(5, 16\)", lambda: mha_call(torch.randn(T, D))),
    "MHA (B, T_k) mask with B == T_q": (
        ValueError,
        r"mask of shape \(5, 5\) has 2 dims but the scores \(5, 4, 5, 5\) have 4",
        lambda: mha_call(torch.randn(T, T, D), mask=torch.ones(T, T, dtype=torch.bool)),
    ),
    "MHA padding mask of another batch": (
        ValueError,
        r"mask of shape \(3, 1, 1, 5\) cannot broadcast to scores \(2, 4, 5, 5\)",
        lambda: mha_call(x_bt, mask=torch.ones(3, 1, 1, T, dtype=torch.bool)),
    ),
    "MHA 0/1 integer mask": (
        TypeError,
        "got torch.int64; convert a 0/1 mask with `mask.bool..`",
        lambda: mha_call(x_bt, mask=torch.ones(1, 1, T, T, dtype=torch.long), need_weights=True),
    ),
    # masks
    "padding_mask float tokens": (
        TypeError,
        "integer ids, got dtype torch.float32",
        lambda: tl.padding_mask(torch.zeros(B, T), 0),
    ),
    "padding_mask 1-D tokens": (
        ValueError,
        r"\(B, T\) token ids, got shape \(5,\)",
        lambda: tl.padding_mask(ids[0], 0),
    ),
    "padding_mask string pad_id": (
        TypeError,
        "pad_id must be an int, got '0'",
        lambda: tl.padding_mask(ids, "0"),
    ),
    "causal_mask size 0": (
        ValueError,
        "size_q must be >= 1, got size_q=0",
        lambda: tl.causal_mask(0),
    ),
    "causal_mask T_k < T_q": (ValueError, "T_q=3, T_k=2", lambda: tl.causal_mask(3, 2)),
    "causal_mask float size": (
        TypeError,
        "size_q must be an int, got 2.5",
        lambda: tl.causal_mask(2.5),
    ),
    # layers
    "LayerNorm wrong width": (
        ValueError,
        r"d_model=8\), got \(2, 3, 6\)",
        lambda: tl.LayerNorm(8)(torch.randn(2, 3, 6)),
    ),
    "LayerNorm integer input": (
        TypeError,
        "got dtype torch.int64",
        lambda: tl.LayerNorm(8)(torch.ones(2, 8, dtype=torch.long)),
    ),
    "feed-forward wrong width": (
        ValueError,
        r"PositionwiseFeedForward expects x of shape \(..., d_model=16\), got \(2, 5, 8\)",
        lambda: tl.PositionwiseFeedForward(D, 32)(torch.randn(B, T, 8)),
    ),
    "embedding float ids": (
        TypeError,
        "integer ids, got dtype torch.float32",
        lambda: tl.TokenEmbedding(10, D)(ids.float()),
    ),
    "embedding id too large": (
        ValueError,
        r"\[0, 10\), got min=0, max=12",
        lambda: tl.TokenEmbedding(10, D)(torch.tensor([[0, 12]])),
    ),
    "embedding negative id": (
        ValueError,
        "min=-1",
        lambda: tl.TokenEmbedding(10, D)(torch.tensor([[-1, 3]])),
    ),
    "positions past max_len": (
        ValueError,
        "positions 0..4 exceed max_len=4",
        lambda: tl.PositionalEncoding(D, max_len=4)(torch.zeros(1, T, D)),
    ),
    "positions wrong width": (
        ValueError,
        r"d_model=16\), got \(1, 5, 8\)",
        lambda: tl.PositionalEncoding(D, max_len=8)(torch.zeros(1, T, 8)),
    ),
    "learned positions past max_len": (
        ValueError,
        "positions 3..7 exceed max_len=6 of LearnedPositionalEncoding",
        lambda: LearnedPositionalEncoding(D, max_len=6)(torch.zeros(1, T, D), start=3),
    ),
    "sinusoidal_encoding d_model=0": (
        ValueError,
        "d_model=0",
        lambda: tl.sinusoidal_encoding(0, 5),
    ),
    "sinusoidal_encoding float width": (
        TypeError,
        "d_model must be an int, got 16.0",
        lambda: tl.sinusoidal_encoding(16.0, 5),
    ),
    # configuration
    "config num_heads=0": (
        ValueError,
        "num_heads must be >= 1, got num_heads=0",
        lambda: tl.TransformerConfig(10, 10, num_heads=0),
    ),
    "config pad_id=-1": (
        ValueError,
        r"pad_id must lie in \[0, 10\) \(src_vocab_size=10, tgt_vocab_size=10\), got pad_id=-1",
        lambda: tl.TransformerConfig(10, 10, pad_id=-1),
    ),
    "config pad_id=vocab_size": (
        ValueError,
        "pad_id=10 ",
        lambda: tl.TransformerConfig(10, 10, pad_id=10),
    ),
    "config pad_id beyond the smaller vocabulary": (
        ValueError,
        r"pad_id must lie in \[0, 6\) \(src_vocab_size=12, tgt_vocab_size=6\), got pad_id=8",
        lambda: tl.TransformerConfig(12, 6, pad_id=8, share_embeddings=False),
    ),
    "config float pad_id": (
        TypeError,
        "pad_id must be an int, got 1.0",
        lambda: tl.TransformerConfig(10, 10, pad_id=1.0),
    ),
    "config d_model not divisible": (
        ValueError,
        "d_model=100 is not divisible by num_heads=8",
        lambda: tl.TransformerConfig(10, 10, d_model=100),
    ),
    "config dropout=1.5": (
        ValueError,
        r"dropout must lie in \[0, 1\), got dropout=1.5",
        lambda: tl.TransformerConfig(10, 10, dropout=1.5),
    ),
    "config vocabulary 0": (ValueError, "src_vocab_size=0", lambda: tl.TransformerConfig(0, 0)),
    "config string d_model": (
        TypeError,
        "d_model must be an int, got '512'",
        lambda: tl.TransformerConfig(10, 10, d_model="512"),
    ),
    "config shared embeddings, two vocabularies": (
        ValueError,
        "src_vocab_size=10 and tgt_vocab_size=12",
        lambda: tl.TransformerConfig(10, 12),
    ),
    "config norm_first as a string": (
        TypeError,
        "norm_first must be True or False, got 'yes'",
        lambda: tl.TransformerConfig(10, 10, norm_first="yes"),
    ),
    "config unknown positional": (
        ValueError,
        "positional='rotary'",
        lambda: tl.TransformerConfig(10, 10, positional="rotary"),
    ),
    # encoder, decoder, model
    "Encoder num_layers=0": (ValueError, "num_layers=0", lambda: tl.Encoder(0, D, H, 32)),
    "EncoderLayer 2-D padding mask": (
        ValueError,
        r"mask of shape \(2, 5\) has 2 dims",
        lambda: tl.EncoderLayer(D, H, 32)(x_bt, torch.ones(B, T, dtype=torch.bool)),
    ),
    "Transformer source batch 1, target batch 3": (
        ValueError,
        r"src \(1, 6\) and tgt \(3, 5\)",
        lambda: tiny_model()(torch.randint(1, 12, (1, 6)), torch.randint(1, 12, (3, 5))),
    ),
    "Transformer 1-D source": (
        ValueError,
        r"src must be \(B, T\) token ids, got shape \(5,\)",
        lambda: tiny_model()(ids[0], ids),
    ),
    "Transformer float target": (
        TypeError,
        "got dtype torch.float32",
        lambda: tiny_model()(ids, ids.float()),
    ),
    "Transformer id beyond the vocabulary": (
        ValueError,
        r"\[0, 12\), got min=0, max=12",
        lambda: tiny_model()(torch.tensor([[0, 12]]), ids[:1]),
    ),
    "Transformer source longer than max_len": (
        ValueError,
        "positions 0..16 exceed max_len=16",
        lambda: tiny_model()(torch.randint(1, 12, (1, 17)), ids[:1]),
    ),
    "Transformer float source mask": (
        TypeError,
        "got torch.float32",
        lambda: tiny_model()(ids, ids, src_mask=torch.ones(B, 1, 1, T)),
    ),
    "decode with memory of another batch": (
        ValueError,
        r"query \(2, 5, 64\), key \(1, 5, 64\)",
        lambda: tiny_model().decode(ids, torch.randn(1, T, 64), None),
    ),
    "decode with a cache of the wrong depth": (
        ValueError,
        "the cache holds 3 layers but the decoder has 1",
        lambda: (m := tiny_model()).decode(
            ids[:, :1], m.encode(ids), None, cache=DecoderCache.empty(3)
        ),
    ),
    "decode with a language model's cache": (
        ValueError,
        r"the cache holds 0 cross-attention layers but the decoder has 1: .*model.new_cache\(\)",
        lambda: (m := tiny_model()).decode(ids[:, :1], m.encode(ids), None, cache=lm_cache(1)),
    ),
    "language model with a translation model's cache": (
        ValueError,
        r"the cache holds 1 cross-attention layers but the encoder has 0: .*model.new_cache\(\)",
        lambda: tiny_lm()(ids[:, :1], cache=tiny_model().new_cache()),
    ),
    "language model with a cache of the wrong depth": (
        ValueError,
        "the cache holds 3 layers but the encoder has 1",
        lambda: tiny_lm()(ids[:, :1], cache=lm_cache(3)),
    ),
    "residual sublayer returns another shape": (
        ValueError,
        r"shape of its input \(2, 5, 16\), got \(2, 5, 1\)",
        lambda: tl.ResidualSublayer(D)(x_bt, lambda y: y[..., :1]),
    ),
    # runtime
    "seed True": (TypeError, "seed must be an int, got True", lambda: tl.seed_everything(True)),
    "device that is not a name": (
        ValueError,
        "'gpu' is not a device name",
        lambda: tl.pick_device("gpu"),
    ),
    "device given as a number": (TypeError, "got int", lambda: tl.pick_device(3)),
    # tracing and counting
    "trace_shapes of a function": (
        TypeError,
        "trace_shapes needs an nn.Module .*got function",
        lambda: tl.trace_shapes(tl.scaled_dot_product_attention),
    ),
    "count_parameters of a dict": (
        TypeError,
        "needs an nn.Module, got dict",
        lambda: tl.count_parameters({"w": 1}),
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_raises_a_clear_error_naming_the_value(case):
    expected, message, call = CASES[case]
    with pytest.raises(expected) as raised:
        call()
    assert type(raised.value) is expected  # not a subclass from deep inside PyTorch
    assert re.search(message, str(raised.value)), f"{case}: {raised.value}"


def test_there_are_enough_bad_inputs_here():
    assert len(CASES) >= 60


# --- safe results: the right answer, no NaN where the inputs were finite --------------------------


def padded_mask():
    """(B, 1, 1, T): the first sequence has two padded positions at the end."""
    return tl.padding_mask(torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]), pad_id=0)


def test_nan_in_a_padded_value_or_key_does_not_leak_through_attention():
    q, k, v = (t.requires_grad_() for t in qkv(B))  # (B, T, 8)
    mask = padded_mask()[:, 0]  # (B, 1, T_k): 3-D scores need a 3-D mask
    clean, _ = tl.scaled_dot_product_attention(q, k, v, mask)
    poisoned_k, poisoned_v = k.clone(), v.clone()
    # padded positions only
    poisoned_k.data[0, 3:], poisoned_v.data[0, 3:] = float("nan"), float("inf")
    out, weights = tl.scaled_dot_product_attention(q, poisoned_k, poisoned_v, mask)
    torch.testing.assert_close(out, clean)
    assert torch.all(weights[0, :, 3:] == 0)
    out.sum().backward()
    assert torch.isfinite(q.grad).all()


def test_nan_in_padded_memory_does_not_leak_through_multi_head_attention_or_its_gradients():
    mha = tl.MultiHeadAttention(D, H)
    x, memory = torch.randn(B, 3, D), torch.randn(B, T, D)
    memory[0, 3:] = float("nan")  # the padded source positions of sequence 0
    clean = memory.nan_to_num(0.0)
    for need_weights in (False, True):
        mha.zero_grad()
        out, _ = mha(x, memory, memory, padded_mask(), need_weights=need_weights)
        expected, _ = mha(x, clean, clean, padded_mask(), need_weights=need_weights)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


def test_nan_in_a_visible_value_propagates_as_in_pytorch():
    """The documented rule: NaN that the mask does not hide is the caller's data, and shows up."""
    q, k, v = qkv(1)
    v[0, 2] = float("nan")
    ours, _ = tl.scaled_dot_product_attention(q, k, v)
    assert torch.isnan(ours).all() and torch.isnan(F.scaled_dot_product_attention(q, k, v)).all()


def test_fp16_scores_beyond_fp16_range_match_pytorchs_kernel():
    d_k = 64
    q = torch.full((1, 2, d_k), 40.0, dtype=torch.float16)  # q . k = 102400 > 65504 = max fp16 ...
    k = torch.full((1, 3, d_k), 40.0, dtype=torch.float16)
    k[0, 1] = 39.0  # ... but q . k / sqrt(d_k) = 12800 or 12480: in range, and key 1 loses
    v = torch.arange(3 * 4, dtype=torch.float16).view(1, 3, 4)
    assert (q.float() @ k.float().transpose(-2, -1)).max() > torch.finfo(torch.float16).max
    ours, weights = tl.scaled_dot_product_attention(q, k, v)
    theirs = F.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(ours).all() and ours.dtype == torch.float16
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(weights[0, 0].float(), torch.tensor([0.5, 0.0, 0.5]))


def test_fp16_module_paths_agree_and_stay_finite():
    mha = tl.MultiHeadAttention(D, H).half()
    x = (torch.randn(B, T, D) * 4).half()
    fast, _ = mha(x, x, x, tl.causal_mask(T))
    explicit, _ = mha(x, x, x, tl.causal_mask(T), need_weights=True)
    in_fp32, _ = mha.float()(x.float(), x.float(), x.float(), tl.causal_mask(T))
    assert torch.isfinite(fast).all() and torch.isfinite(explicit).all()
    torch.testing.assert_close(fast.float(), in_fp32, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(explicit.float(), in_fp32, atol=2e-2, rtol=2e-2)


def test_autocast_inputs_of_another_dtype_are_not_refused():
    mha = tl.MultiHeadAttention(D, H)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = mha(x_bt.bfloat16(), x_bt.bfloat16(), x_bt.bfloat16())
    assert torch.isfinite(out).all()


def test_a_padding_mask_in_the_documented_form_masks_each_sequence_on_its_own():
    """The (B, T_k) mask that used to be misread as (T_q, T_k) when B == T_q, given as (B, 1, 1,
    T_k)."""
    mha = tl.MultiHeadAttention(D, H).eval()
    x = torch.randn(T, T, D)  # B == T_q == T_k == 5
    keep = torch.rand(T, T) > 0.3
    keep[:, 0] = True  # every sequence keeps at least one key
    out, _ = mha(x, x, x, keep[:, None, None, :])
    for b in range(T):
        real = x[b : b + 1, keep[b]]  # (1, T_real, D): sequence b's real keys only
        alone, _ = mha(x[b : b + 1], real, real)
        torch.testing.assert_close(out[b : b + 1], alone, atol=1e-5, rtol=1e-5)


def test_fully_padded_sequence_gives_finite_logits_and_gradients():
    model = tiny_model()
    model.train()
    src = torch.tensor([[3, 4, 5, 0, 0], [0, 0, 0, 0, 0]])  # the second source is all padding
    tgt = torch.tensor([[1, 6, 7, 0], [1, 8, 0, 0]])
    logits = model(src, tgt)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_a_non_zero_pad_id_masks_that_id():
    model = tiny_model(pad_id=11)
    src = torch.tensor([[3, 4, 5, 11, 11]])
    tgt = torch.tensor([[1, 6, 7]])
    other = src.clone()
    other[0, 3:] = 11
    assert model.source_mask(src)[0, 0, 0].tolist() == [True, True, True, False, False]
    torch.testing.assert_close(model(src, tgt), model(other, tgt))
    assert torch.isfinite(model(src, tgt)).all()


def test_pick_device_takes_a_torch_device():
    assert tl.pick_device(torch.device("cpu")) == torch.device("cpu")


def test_trace_shapes_still_traces_a_module():
    model = tiny_model()
    with tl.trace_shapes(model) as trace:
        model(ids, ids)
    assert trace.records[0].output == "(2, 5, 12)"


def test_numpy_numbers_in_a_config_are_accepted_as_python_numbers():
    """A grid read from a CSV hands NumPy scalars; they are numbers, so the config takes them."""
    np = pytest.importorskip("numpy")
    config = tl.TransformerConfig(
        np.int64(12), np.int64(12), d_model=np.int64(16), num_heads=np.int64(4), d_ff=32
    )
    assert type(config.num_heads) is int and type(config.d_model) is int
    logits = tl.Transformer(config.replace(num_layers=1, max_len=16))(ids, ids)
    assert logits.shape == (B, T, 12) and torch.isfinite(logits).all()
