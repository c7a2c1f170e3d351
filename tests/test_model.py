import pytest
import torch
from helpers import max_abs_diff
from torch import nn

import transformer_lib as tl

D, H, FF = 32, 4, 64


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_nn_transformer_encoder_layer(norm_first):
    theirs = nn.TransformerEncoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = tl.EncoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first).eval()
    tl.copy_from_torch(ours, theirs)
    x = torch.randn(3, 6, D)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, 4:] = True
    out = ours(x, (~pad)[:, None, None, :])
    ref = theirs(x, src_key_padding_mask=pad)
    real = ~pad
    # PyTorch's fast path returns 0 at padded positions
    assert max_abs_diff(out[real], ref[real]) < 1e-5


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_nn_transformer_decoder_layer(norm_first):
    theirs = nn.TransformerDecoderLayer(
        D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = tl.DecoderLayer(D, H, FF, dropout=0.0, norm_first=norm_first).eval()
    tl.copy_from_torch(ours, theirs)
    x, memory = torch.randn(3, 5, D), torch.randn(3, 7, D)
    memory_pad = torch.zeros(3, 7, dtype=torch.bool)
    memory_pad[2, 3:] = True
    out = ours(x, memory, tl.causal_mask(5), (~memory_pad)[:, None, None, :])
    ref = theirs(x, memory, tgt_mask=~tl.causal_mask(5)[0, 0], memory_key_padding_mask=memory_pad)
    assert max_abs_diff(out, ref) < 1e-5


def test_encoder_at_the_seeds_configuration_keeps_its_shape():
    encoder = tl.Encoder(num_layers=5, d_model=512, num_heads=8, d_ff=2048).eval()
    with torch.no_grad():
        out = encoder(torch.randn(30, 200, 512))
    assert out.shape == (30, 200, 512)


@pytest.fixture
def model():
    config = tl.TransformerConfig(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=D,
        num_heads=H,
        d_ff=FF,
        num_layers=2,
        dropout=0.0,
    )
    return tl.Transformer(config).eval()


def test_forward_gives_logits_over_the_target_vocabulary(model):
    logits = model(torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5)))
    assert logits.shape == (2, 5, 20)


def test_decoder_cannot_see_the_future(model):
    src = torch.randint(1, 20, (2, 7))
    tgt = torch.randint(1, 20, (2, 6))
    logits = model(src, tgt)
    for t in range(5):
        changed = tgt.clone()
        changed[:, t + 1] = (changed[:, t + 1] % 19) + 1  # another real token at t + 1
        changed_logits = model(src, changed)
        torch.testing.assert_close(changed_logits[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(changed_logits[:, t + 1], logits[:, t + 1])


def test_source_padding_does_not_leak_into_real_positions(model):
    src = torch.tensor([[5, 6, 7, 8, 0, 0], [9, 3, 4, 0, 0, 0]])
    tgt = torch.randint(1, 20, (2, 4))
    mask = model.source_mask(src)
    other = src.clone()
    other[src == 0] = 13  # different tokens where the mask says "padding"
    real = src != 0
    torch.testing.assert_close(model.encode(other, mask)[real], model.encode(src, mask)[real])
    torch.testing.assert_close(model(other, tgt, src_mask=mask), model(src, tgt))


def test_shared_embeddings_are_one_matrix_tied_to_the_output(model):
    assert model.src_embed.weight is model.tgt_embed.weight is model.output_projection.weight


def test_paper_base_parameter_count():
    """63,082,496 with a shared 37000-token vocabulary; NOTATION.md explains the paper's 65M."""
    with torch.device("meta"):  # shapes only: no memory, no initialisation time
        model = tl.Transformer(tl.TransformerConfig.paper_base(vocab_size=37000))
    counts = tl.count_parameters(model)
    assert counts["src_embed"] == 37000 * 512
    assert counts["encoder"] == 6 * 3_152_384
    assert counts["decoder"] == 6 * 4_204_032
    assert counts["output_projection"] == 0  # tied to the embedding
    assert counts["total"] == 63_082_496


def test_paper_big_is_about_213m_parameters():
    with torch.device("meta"):
        model = tl.Transformer(tl.TransformerConfig.paper_big())
    assert tl.count_parameters(model)["total"] == pytest.approx(213e6, rel=0.03)  # Table 3: 213M


def test_config_errors_name_the_values():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by num_heads=8"):
        tl.TransformerConfig(10, 10, d_model=100)
    with pytest.raises(ValueError, match="src_vocab_size=10 and tgt_vocab_size=12"):
        tl.TransformerConfig(10, 12)


def test_gradients_reach_every_parameter(model):
    model.train()
    logits = model(torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5)))
    logits.logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_learned_positions_add_one_vector_per_position_and_count_as_parameters():
    config = tl.TransformerConfig.cpu_tiny(vocab_size=20).replace(max_len=32)
    sinusoidal, learned = (
        tl.Transformer(config),
        tl.Transformer(config.replace(positional="learned")),
    )
    assert tl.count_parameters(sinusoidal)["positions"] == 0  # a buffer, not a parameter
    assert tl.count_parameters(learned)["positions"] == 32 * 64  # nn.Embedding(max_len, d_model)
    assert (
        tl.count_parameters(learned)["total"] == tl.count_parameters(sinusoidal)["total"] + 32 * 64
    )
    positions = learned.positions.eval()
    out = positions(torch.zeros(3, 5, 64))  # (B, T, d_model): just the position vectors
    torch.testing.assert_close(out, positions.embedding.weight[:5].expand(3, 5, 64))
    torch.testing.assert_close(
        positions(torch.zeros(3, 2, 64), start=4), positions.embedding.weight[4:6].expand(3, 2, 64)
    )


def test_learned_positions_train_and_decode_with_a_cache():
    config = tl.TransformerConfig.cpu_tiny(vocab_size=20).replace(max_len=16, positional="learned")
    model = tl.Transformer(config)
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 20, (2, 5))
    model(src, tgt).sum().backward()
    # the positions used get gradient
    assert model.positions.embedding.weight.grad[:5].abs().sum() > 0
    assert model.positions.embedding.weight.grad[6:].abs().sum() == 0  # the others do not
    model.eval()
    memory, src_mask = model.encode(src), model.source_mask(src)
    full = model.decode(tgt, memory, src_mask)  # (B, T_tgt, d_model)
    cache = model.new_cache()
    steps = [
        model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache) for t in range(tgt.size(1))
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="exceed max_len=16 of LearnedPositionalEncoding"):
        model(src, torch.randint(1, 20, (2, 17)))


def test_config_refuses_an_unknown_positional_kind():
    with pytest.raises(ValueError, match="positional='rotary'"):
        tl.TransformerConfig(10, 10, positional="rotary")


# --- options (interop.from_huggingface turns them on for MarianMT; the defaults are the paper's) --


def tiny(**options) -> tl.TransformerConfig:
    sizes = dict(d_model=D, num_heads=H, d_ff=FF, num_layers=2, dropout=0.0)
    return tl.TransformerConfig(20, 20, **{**sizes, **options})


def test_a_config_prints_its_options_only_when_they_are_set():
    assert repr(tiny()) == (
        "TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=32, num_heads=4, d_ff=64, "
        "num_layers=2, dropout=0.0, attention_dropout=0.0, norm_first=False, "
        "share_embeddings=True, max_len=5000, pad_id=0, positional='sinusoidal')"
    )  # as before the options existed: the notebooks print configs
    assert repr(tiny(activation="silu", num_decoder_layers=3)).endswith(
        "positional='sinusoidal', activation='silu', num_decoder_layers=3)"
    )


def test_options_reach_every_layer_they_name():
    model = tl.Transformer(
        tiny(activation="gelu", layer_norm_eps=1e-6, scale_embeddings=False, embedding_norm=True)
    )
    feed_forwards = [m for m in model.modules() if isinstance(m, tl.PositionwiseFeedForward)]
    assert len(feed_forwards) == 4 and {m.activation for m in feed_forwards} == {"gelu"}
    norms = [m for m in model.modules() if isinstance(m, tl.LayerNorm)]
    # + the embedding norm
    assert len(norms) == 2 * 2 + 2 * 3 + 1 and {m.eps for m in norms} == {1e-6}
    assert model.src_embed.scale == 1.0 and model.positions.norm is not None


def test_separate_decoder_depth_builds_caches_for_it_and_decodes_the_same_with_them():
    model = tl.Transformer(tiny(num_decoder_layers=3)).eval()
    assert (len(model.encoder.layers), len(model.decoder.layers), model.config.decoder_layers) == (
        2,
        3,
        3,
    )
    src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
    memory, src_mask = model.encode(src), model.source_mask(src)
    full = model.decode(tgt, memory, src_mask)  # (B, T_tgt, d_model)
    cache = model.new_cache()
    assert len(cache.layers) == len(cache.cross) == 3
    steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert tiny().decoder_layers == 2  # None: the paper's one N


def test_output_bias_starts_at_zero_and_adds_one_number_per_target_token(model):
    biased = tl.Transformer(tiny(output_bias=True)).eval()
    assert biased.output_projection.bias.shape == (20,) and not biased.output_projection.bias.any()
    assert model.output_projection.bias is None  # the paper: no bias, tied weights
    assert tl.count_parameters(biased)["total"] == tl.count_parameters(model)["total"] + 20
    src, tgt = torch.randint(1, 20, (2, 7)), torch.randint(1, 20, (2, 5))
    before = biased(src, tgt)
    with torch.no_grad():
        biased.output_projection.bias.fill_(0.5)
    torch.testing.assert_close(biased(src, tgt), before + 0.5)


@pytest.mark.parametrize(
    "options, error, message",
    [
        (
            {"activation": "swish"},
            ValueError,
            r"must be one of \('relu', 'gelu', 'gelu_tanh', 'silu', 'swiglu'\)",
        ),
        ({"sinusoid_layout": "split"}, ValueError, "sinusoid_layout must be one of"),
        (
            {"layer_norm_eps": 0.0},
            ValueError,
            "layer_norm_eps must be finite and > 0, got layer_norm_eps=0.0",
        ),
        ({"layer_norm_eps": "1e-5"}, TypeError, "layer_norm_eps must be a float > 0"),
        ({"scale_embeddings": 1}, TypeError, "scale_embeddings must be True or False, got 1"),
        ({"embedding_norm": "yes"}, TypeError, "embedding_norm must be True or False"),
        ({"output_bias": None}, TypeError, "output_bias must be True or False"),
        ({"num_decoder_layers": 0}, ValueError, "num_decoder_layers must be >= 1"),
        ({"attention_dropout": 1.0}, ValueError, r"attention_dropout must lie in \[0, 1\)"),
        ({"pad_id": None}, ValueError, "pad_id=None is for the language models"),
        (
            {"norm": "batchnorm"},
            ValueError,
            r"norm must be one of \('layernorm', 'rmsnorm'\), got norm='batchnorm'",
        ),
        ({"bias": 0}, TypeError, "bias must be True or False, got 0"),
        ({"n_kv_heads": 3}, ValueError, "num_heads=4 is not divisible by n_kv_heads=3"),
        ({"n_kv_heads": 0}, ValueError, "n_kv_heads must be >= 1"),
        (
            {"positional": "rope", "rope_theta": 0.0},
            ValueError,
            "rope_theta must be finite and > 0",
        ),
        ({"rope_theta": 500.0}, ValueError, "rope_theta=500.0 is read only with positional='rope'"),
        (
            {"positional": "rope", "d_model": 12, "num_heads": 4},
            ValueError,
            "d_k must be even, got d_k=3 \\(d_model // num_heads = 12 // 4\\)",
        ),
    ],
)
def test_bad_option_values_are_named_with_what_was_expected(options, error, message):
    with pytest.raises(error, match=message):
        tiny(**options)


def test_a_config_reaches_its_layers_field_by_field_and_checks_every_declared_switch():
    """block_options reads BlockOptions' fields by name and check_config reads the declared bools:
    a new option is declared in ModelOptions and BlockOptions, and nowhere in between."""
    import dataclasses

    from transformer_lib.model.layers import BlockOptions
    from transformer_lib.model.transformer import block_options

    changed = dict(dropout=0.2, attention_dropout=0.1, norm_first=True, activation="gelu")
    changed.update(layer_norm_eps=1e-6, norm="rmsnorm", bias=False, n_kv_heads=2, d_k=8, d_v=4)
    config = tl.TransformerConfig(20, 20, d_model=32, num_heads=4, positional="rope", **changed)
    options = block_options(config)
    assert options == BlockOptions(**changed, rope_theta=10000.0)
    assert {f.name for f in dataclasses.fields(BlockOptions)} <= {
        f.name for f in dataclasses.fields(config)
    }
    switches = [f.name for f in dataclasses.fields(config) if f.type is bool]
    assert len(switches) == 6
    for name in switches:
        with pytest.raises(TypeError, match=f"{name} must be True or False, got 1 of type int"):
            config.replace(**{name: 1})
