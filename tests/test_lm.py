"""The decoder-only and masked language models (notebook 11) and the standard-library text
corpus."""

import pytest
import torch

import transformer_lib as tl
from transformer_lib.lm import IGNORE_INDEX, LMConfig, language_model_loss, mask_tokens


def tiny_config(**changes) -> LMConfig:
    return LMConfig(
        vocab_size=23, d_model=16, num_heads=2, d_ff=32, num_layers=2, dropout=0.0, max_len=40
    ).replace(**changes)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_only_cannot_see_the_future(positional, norm_first):
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config(positional=positional, norm_first=norm_first)).eval()
    tokens = torch.randint(1, 23, (3, 12))  # (B, T)
    changed = tokens.clone()
    t = 5
    # every token after position t differs
    changed[:, t + 1 :] = torch.randint(1, 23, (3, 12 - t - 1))
    before, after = model(tokens), model(changed)  # (B, T, V)
    torch.testing.assert_close(before[:, : t + 1], after[:, : t + 1])
    assert not torch.allclose(before[:, t + 1 :], after[:, t + 1 :])


def test_masked_lm_sees_both_directions():
    torch.manual_seed(0)
    model = tl.MaskedLM(tiny_config(norm_first=False)).eval()
    tokens = torch.randint(1, 23, (2, 10))
    changed = tokens.clone()
    changed[:, -1] = (tokens[:, -1] % 22) + 1  # change only the last token
    # the first position notices
    assert not torch.allclose(model(tokens)[:, 0], model(changed)[:, 0])


def test_masked_lm_ignores_padding_keys():
    torch.manual_seed(0)
    model = tl.MaskedLM(tiny_config(norm_first=False)).eval()
    tokens = torch.randint(1, 23, (1, 6))
    # three <pad> after the text
    padded = torch.cat([tokens, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(tokens), model(padded)[:, :6], atol=1e-5, rtol=1e-5)


# Llama's switches on the tiny model: rotary positions (offset by the cache), grouped keys and
# values in the cache
MODERN = dict(positional="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=1, bias=False)


@pytest.mark.parametrize("options", [{}, MODERN], ids=["paper", "modern"])
@pytest.mark.parametrize("sampling", [False, True])
def test_cached_generation_equals_uncached(sampling, options):
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config(**options))
    prompt = torch.randint(1, 23, (2, 4))

    def run(use_cache):
        choose = None
        if sampling:
            generator = torch.Generator().manual_seed(7)
            choose = tl.decode.sampler(temperature=1.5, top_k=10, generator=generator)
        return tl.lm.generate(model, prompt, 20, choose=choose, use_cache=use_cache)

    cached, uncached = run(True), run(False)
    assert cached.shape == (2, 24)
    torch.testing.assert_close(cached, uncached, rtol=0, atol=0)
    torch.testing.assert_close(cached[:, :4], prompt, rtol=0, atol=0)


def test_generation_refuses_more_than_max_len():
    model = tl.DecoderOnlyLM(tiny_config())
    with pytest.raises(ValueError, match="max_len=40"):
        tl.lm.generate(model, torch.ones(1, 30, dtype=torch.long), 11)


def test_mask_tokens_follows_80_10_10_and_never_picks_specials():
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(5, 50, (200, 500))  # (B, T): 100,000 maskable positions
    tokens[:, -50:] = 0  # padding
    mask_id = 4
    inputs, targets = mask_tokens(
        tokens, mask_id, 50, special_ids=(0, 1, 2, 3), generator=generator
    )
    shares = tl.lm.masking_shares(tokens, inputs, targets, mask_id, special_ids=(0, 1, 2, 3))
    expected = tl.lm.expected_masking_shares(50, mask_id, special_ids=(0, 1, 2, 3))
    # about 15,000 picked positions: a share of picked ones has a standard deviation of at most
    # 0.004
    for part, share in shares.items():
        assert abs(share - expected[part]) < 0.015, (part, share, expected[part])
    assert shares["share of the special positions picked"] == 0.0  # padding is never picked
    assert shares["share of random replacements that are special or mask_id"] == 0.0


def test_masking_shares_count_by_hand():
    tokens = torch.tensor([[0, 5, 6, 7, 8]])  # 0 is special
    # 5 -> <mask> (4), 6 -> another token, 7 picked but kept
    inputs = torch.tensor([[0, 4, 9, 7, 8]])
    targets = torch.tensor([[IGNORE_INDEX, 5, 6, 7, IGNORE_INDEX]])
    shares = tl.lm.masking_shares(tokens, inputs, targets, mask_id=4, special_ids=(0,))
    assert shares["share of the non-special positions picked"] == 3 / 4
    assert shares["share of picked positions set to mask_id"] == 1 / 3
    assert shares["share of picked positions given another token"] == 1 / 3
    assert shares["share of positions not picked that were changed"] == 0.0


def test_masked_lm_loss_counts_only_masked_positions():
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 9)
    targets = torch.full((2, 6), IGNORE_INDEX)
    targets[0, 1], targets[1, 4] = 3, 7
    expected = torch.stack(
        [-logits[0, 1].log_softmax(-1)[3], -logits[1, 4].log_softmax(-1)[7]]
    ).mean()
    torch.testing.assert_close(language_model_loss(logits, targets), expected)
    other = logits.clone()
    other[0, 0] += 100.0  # a position that is not masked
    torch.testing.assert_close(language_model_loss(other, targets), expected)


def test_loss_shapes_must_agree():
    with pytest.raises(ValueError, match=r"\(2, 6, 9\)"):
        language_model_loss(torch.zeros(2, 6, 9), torch.zeros(2, 5, dtype=torch.long))


def test_parameter_counts_of_published_configurations():
    with torch.device("meta"):
        gpt2 = tl.DecoderOnlyLM(LMConfig.gpt2_small())
        bert = tl.MaskedLM(LMConfig.bert_base())
    # GPT-2 small: exactly the 124,439,808 of the released model (tied output, learned positions,
    # pre-LN)
    assert tl.count_parameters(gpt2)["total"] == 124_439_808
    # BERT-base: the released BertForMaskedLM has 109,514,298; ours lacks its token-type embedding
    # (2 x 768) and the LayerNorm after its embeddings (2 x 768)
    assert tl.count_parameters(bert)["total"] == 109_514_298 - 2 * 768 - 2 * 768


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="num_heads=5"):
        tiny_config(num_heads=5)
    with pytest.raises(ValueError, match="positional"):
        tiny_config(positional="rotary")
    with pytest.raises(ValueError, match="pad_id"):
        tiny_config(pad_id=23)


# --- padding masks and the options GPT-2 and BERT need (defaults: the paper's block) --------------


def test_decoder_only_padding_mask_leaves_the_real_positions_as_without_padding():
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config(pad_id=None)).eval()
    tokens = torch.randint(1, 23, (2, 6))
    right = torch.cat([tokens, torch.randint(1, 23, (2, 3))], dim=1)  # 3 junk tokens after the text
    real = torch.tensor([True] * 6 + [False] * 3)
    mask = real.expand(2, 9)[:, None, None, :]  # (B, 1, 1, T): True = may attend
    torch.testing.assert_close(model(right, mask=mask)[:, :6], model(tokens), atol=1e-5, rtol=1e-5)
    # junk before the text: it must be hidden
    left = torch.cat([torch.randint(1, 23, (2, 3)), tokens], dim=1)
    left_mask = real.flip(0).expand(2, 9)[:, None, None, :]
    unmasked, masked = model(left)[:, 3:], model(left, mask=left_mask)[:, 3:]
    assert not torch.allclose(unmasked, masked)
    # positions still count from the first column, as Hugging Face's do without position_ids
    shifted = tl.DecoderOnlyLM(tiny_config(pad_id=None, positional="sinusoidal")).eval()
    assert shifted(left, mask=left_mask).shape == (2, 9, 23)


def test_decoder_only_padding_mask_with_a_cache_covers_the_cached_tokens():
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config()).eval()
    tokens = torch.randint(1, 23, (2, 7))
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., :2] = False  # row 1 is left-padded by two
    full = model(tokens, mask=mask)  # (B, T, V)
    cache = model.new_cache()
    steps = [
        model(tokens[:, : t + 1][:, cache.length :], cache=cache, mask=mask[..., : t + 1])
        for t in range(7)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1)[:, 2:], full[:, 2:], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope"])
def test_positions_from_the_mask_make_a_left_padded_row_equal_the_row_alone(positional):
    """Left padding moves a row's real tokens right; positions counted from its first real token
    (Hugging Face's attention_mask.cumsum(-1) - 1) give back exactly the unpadded logits."""
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config(pad_id=None, positional=positional)).eval()
    tokens = torch.randint(1, 23, (1, 6))
    padded = torch.cat([torch.randint(1, 23, (1, 3)), tokens], dim=1)  # (1, 9)
    real = torch.tensor([[False] * 3 + [True] * 6])  # (1, 9)
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)  # (1, 9): 0 0 0 0 1 2 3 4 5
    got = model(padded, mask=real[:, None, None, :], positions=positions)[:, 3:]
    torch.testing.assert_close(got, model(tokens), atol=1e-5, rtol=1e-5)
    if positional != "rope":  # an added table: the default positions 3..8 give other logits
        shifted = model(padded, mask=real[:, None, None, :])[:, 3:]
        assert not torch.allclose(shifted, model(tokens), atol=1e-3)


def test_positions_are_checked_with_what_was_expected():
    model = tl.DecoderOnlyLM(tiny_config())
    tokens = torch.randint(1, 23, (2, 5))
    with pytest.raises(ValueError, match=r"positions must be \(B, T\) = \(2, 5\)"):
        model(tokens, positions=torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match="integer tensor"):
        model(tokens, positions=torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"\[0, max_len=40\)"):
        model(tokens, positions=torch.full((2, 5), 40))
    rope = tl.DecoderOnlyLM(tiny_config(positional="rope"))
    rope(tokens, positions=torch.arange(5).expand(2, 5) + 7)  # one shift per row: accepted
    with pytest.raises(ValueError, match="shifted by one amount per row"):
        rope(tokens, positions=torch.tensor([0, 2, 4, 6, 8]).expand(2, 5))


def test_generate_stops_rows_at_eos_and_pads_them():
    torch.manual_seed(0)
    model = tl.DecoderOnlyLM(tiny_config()).eval()  # pad_id 0
    prompt = torch.randint(1, 23, (3, 4))
    free = tl.lm.generate(model, prompt, 12)
    eos = free[0, 4 + 2].item()  # row 0's third new token
    out = tl.lm.generate(model, prompt, 12, eos_id=eos)
    for row, ids in zip(free.tolist(), out.tolist(), strict=True):
        new = row[4:]
        end = new.index(eos) + 1 if eos in new else len(new)
        assert ids[: 4 + end] == row[: 4 + end] and set(ids[4 + end :]) <= {0}
    assert out.size(1) <= free.size(1)
    with pytest.raises(ValueError, match="attention_mask must be"):
        tl.lm.generate(model, prompt, 2, attention_mask=torch.ones(3, 5))
    with pytest.raises(ValueError, match="eos_id"):
        tl.lm.generate(model, prompt, 2, eos_id=23)


def test_padding_masks_of_the_wrong_shape_or_dtype_say_what_is_expected():
    model = tl.DecoderOnlyLM(tiny_config())
    tokens = torch.randint(1, 23, (2, 5))
    with pytest.raises(
        ValueError, match=r"padding mask of shape \(B, 1, 1, T_k\) = \(2, 1, 1, 5\).*attention_mask"
    ):
        model(tokens, mask=torch.ones(2, 1, 5, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.bool"):
        tl.MaskedLM(tiny_config())(tokens, mask=torch.ones(2, 1, 1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="dims"):
        # Hugging Face's (B, T) needs [:, None, None, :]
        model(tokens, mask=torch.ones(2, 5, dtype=torch.bool))


def test_masked_lm_explicit_mask_replaces_the_pad_id_mask():
    torch.manual_seed(0)
    model = tl.MaskedLM(tiny_config(norm_first=False)).eval()
    tokens = torch.randint(1, 23, (2, 8))
    tokens[1, 5:] = 0
    torch.testing.assert_close(model(tokens, mask=tl.padding_mask(tokens, 0)), model(tokens))
    everything = torch.ones(2, 1, 1, 8, dtype=torch.bool)
    assert not torch.allclose(model(tokens, mask=everything)[1, :5], model(tokens)[1, :5])


def test_without_a_pad_id_no_token_is_padding():
    torch.manual_seed(0)
    model = tl.MaskedLM(tiny_config(norm_first=False, pad_id=None)).eval()
    assert model.embed.embedding.padding_idx is None and model.embed.weight[0].abs().sum() > 0
    tokens = torch.randint(1, 23, (2, 8))
    tokens[:, -1] = 0  # token 0 is an ordinary token here
    changed = tokens.clone()
    changed[:, -1] = 1
    # position 0 sees the last token
    assert not torch.allclose(model(tokens)[:, 0], model(changed)[:, 0])


def test_token_types_add_one_learned_vector_per_segment():
    torch.manual_seed(0)
    model = tl.MaskedLM(tiny_config(norm_first=False, type_vocab_size=2)).eval()
    assert model.token_type_embed.weight.shape == (2, 16)
    without = tl.MaskedLM(tiny_config(norm_first=False))
    assert tl.count_parameters(model)["total"] == tl.count_parameters(without)["total"] + 2 * 16
    tokens = torch.randint(1, 23, (2, 8))
    zeros, segments = torch.zeros_like(tokens), (torch.arange(8) >= 4).long().expand(2, 8)
    # BERT's default: segment 0
    torch.testing.assert_close(model(tokens), model(tokens, token_types=zeros))
    assert not torch.allclose(model(tokens), model(tokens, token_types=segments))
    with pytest.raises(ValueError, match=r"token_types must lie in \[0, 2\), got min=0, max=2"):
        model(tokens, token_types=zeros + 2 * (segments == 1))
    with pytest.raises(ValueError, match="no token-type embeddings"):
        tl.MaskedLM(tiny_config())(tokens, token_types=zeros)
    with pytest.raises(ValueError, match="belong to the masked model"):
        tl.DecoderOnlyLM(tiny_config(type_vocab_size=2))


def test_untied_output_head_is_a_matrix_of_its_own():
    torch.manual_seed(0)
    tied, untied = (
        tl.DecoderOnlyLM(tiny_config()),
        tl.DecoderOnlyLM(tiny_config(tie_embeddings=False)),
    )
    assert tied.output is None and untied.output.weight.data_ptr() != untied.embed.weight.data_ptr()
    assert tl.count_parameters(untied)["total"] == tl.count_parameters(tied)["total"] + 23 * 16
    tokens = torch.randint(1, 23, (2, 5))
    hidden = untied.hidden_states(tokens, tl.causal_mask(5))
    torch.testing.assert_close(untied(tokens), hidden @ untied.output.weight.T)


def test_lm_options_reach_their_layers_and_print_only_when_set():
    config = tiny_config(
        activation="gelu_tanh", layer_norm_eps=1e-12, attention_dropout=0.1, scale_embeddings=False
    )
    model = tl.MaskedLM(config.replace(embedding_norm=True))
    assert {m.activation for m in model.modules() if isinstance(m, tl.PositionwiseFeedForward)} == {
        "gelu_tanh"
    }
    # head and embedding too
    assert {m.eps for m in model.modules() if isinstance(m, tl.LayerNorm)} == {1e-12}
    assert {m.dropout.p for m in model.modules() if isinstance(m, tl.MultiHeadAttention)} == {0.1}
    assert model.embed.scale == 1.0
    assert repr(LMConfig.cpu_char(101)) == (
        "LMConfig(vocab_size=101, d_model=128, num_heads=4, d_ff=512, num_layers=3, dropout=0.0, "
        "max_len=128, positional='learned', norm_first=True, pad_id=0)"
    )  # notebook 11 prints this
    options = (
        "activation='gelu_tanh', scale_embeddings=False, layer_norm_eps=1e-12, "
        "attention_dropout=0.1)"
    )
    assert repr(config).endswith(options)


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"activation": "tanh"}, ValueError, "activation must be one of"),
        (
            {"type_vocab_size": -1},
            ValueError,
            "type_vocab_size must be >= 0, got type_vocab_size=-1",
        ),
        ({"tie_embeddings": "no"}, TypeError, "tie_embeddings must be True or False"),
        (
            {"pad_id": 1.5},
            TypeError,
            r"pad_id must be an int, got 1.5 of type float \(or None for a language",
        ),
        ({"layer_norm_eps": -1e-5}, ValueError, "layer_norm_eps must be finite and > 0"),
    ],
)
def test_bad_lm_option_values_are_named_with_what_was_expected(options, error, message):
    with pytest.raises(error, match=message):
        tiny_config(**options)


def test_bert_base_with_berts_switches_has_the_released_parameter_count():
    bert = LMConfig.bert_base().replace(
        embedding_norm=True,
        type_vocab_size=2,
        scale_embeddings=False,
        layer_norm_eps=1e-12,
        activation="gelu",
    )
    with torch.device("meta"):
        model = tl.MaskedLM(bert)
    # the 3,072 that bert_base() lacks are the token-type embedding (2 x 768) and the embedding
    # LayerNorm
    assert tl.count_parameters(model)["total"] == 109_514_298


# --- the corpus -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus():
    return tl.PythonSourceCorpus()


def test_corpus_splits_by_file_and_is_disjoint(corpus):
    names = {split: set(files) for split, files in corpus.files.items()}
    assert names["train"] and names["valid"] and names["test"]
    assert not names["train"] & names["valid"]
    assert not names["train"] & names["test"]
    assert not names["valid"] & names["test"]
    assert names["train"] | names["valid"] | names["test"] == set(tl.data.read_python_source())
    # the split of a file depends only on its name
    assert tl.PythonSourceCorpus(fractions=(0.8, 0.1, 0.1)).files == corpus.files


def test_corpus_batches_are_shifted_windows(corpus):
    inputs, targets = corpus.batch("valid", step=3, batch_size=4, length=32)
    assert inputs.shape == targets.shape == (4, 32)
    torch.testing.assert_close(inputs[:, 1:], targets[:, :-1])
    again, _ = corpus.batch("valid", step=3, batch_size=4, length=32)
    torch.testing.assert_close(inputs, again)  # the same (seed, split, step) gives the same batch


def test_corpus_vocab_has_a_mask_token(corpus):
    assert corpus.vocab.itos[corpus.mask_id] == "<mask>"
    assert "\n" in corpus.vocab.stoi and "d" in corpus.vocab.stoi


def test_corpus_missing_folder_says_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="root="):
        tl.PythonSourceCorpus(root=tmp_path / "nowhere")


def test_corpus_too_small_is_a_clear_error(tmp_path):
    (tmp_path / "one.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="too little Python source"):
        tl.PythonSourceCorpus(root=tmp_path)


# --- training -------------------------------------------------------------------------------------


def test_language_model_trainer_learns_and_resumes(corpus, tmp_path):
    def run(steps, resume_from=None):
        tl.seed_everything(0)
        model = tl.DecoderOnlyLM(tiny_config(vocab_size=len(corpus.vocab), max_len=32))
        optimizer, scheduler = tl.adam_with_warmup(model, 1e-2, 5, 40)
        trainer = tl.lm.LanguageModelTrainer(model, optimizer, scheduler)
        if resume_from is not None:
            trainer.load_checkpoint(resume_from)
        trainer.fit(lambda step: corpus.batch("train", step, 4, 32), steps, progress=False)
        return trainer

    straight = run(40)
    assert straight.history.loss[-1] < 0.8 * straight.history.loss[0]
    half = run(20)
    half.save_checkpoint(tmp_path / "lm.pt")
    resumed = run(40, resume_from=tmp_path / "lm.pt")
    assert resumed.history.loss == pytest.approx(straight.history.loss)


def test_language_model_trainer_refuses_a_batch_with_nothing_to_learn():
    model = tl.DecoderOnlyLM(tiny_config())
    trainer = tl.lm.LanguageModelTrainer(model, torch.optim.Adam(model.parameters()))
    tokens = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="IGNORE_INDEX"):
        trainer.train_step((tokens, torch.full((2, 5), IGNORE_INDEX)))
    with pytest.raises(TypeError, match="tuple"):
        trainer.train_step(tokens)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    class Uniform(torch.nn.Module):
        def forward(self, tokens):
            return torch.zeros(*tokens.shape, 23)

    batches = [(torch.ones(2, 4, dtype=torch.long), torch.randint(0, 23, (2, 4)))]
    assert tl.lm.perplexity(Uniform(), batches) == pytest.approx(23.0)
