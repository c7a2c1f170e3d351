"""Hugging Face models copied into the library's (``tl.interop.from_huggingface``) compute the same
function: GPT-2, BERT, MarianMT and Llama (RMSNorm, rotary positions, SwiGLU, grouped-query
attention, no biases).

No network: every Hugging Face model is built from a small config with random weights, then every
parameter is redrawn (norm gains around 1, biases and Marian's logit bias non-zero), so that a
weight copied to the wrong place, transposed, or not copied at all changes the logits. The loading
path is exercised through ``save_pretrained`` to a temporary folder and ``from_pretrained`` from it.
"""

import pytest
import torch
from helpers import max_abs_diff

import transformer_lib as tl
from transformer_lib.model.attention import apply_rope

transformers = pytest.importorskip("transformers")

# EOS: a token the Marian model below emits
VOCAB, D_MODEL, HEADS, PAD_MARIAN, EOS_MARIAN = 50, 32, 4, 49, 19
TOLERANCE = 1e-5  # fp32; the measured differences are below 1e-6


def redraw(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every weight random and of a size that keeps activations O(1); Marian's sinusoid tables are
    left alone (fixed tables, not weights; both of its stacks share the same one)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            noise = torch.randn(p.shape, generator=generator)
            if p.dim() > 1:
                p.copy_(noise * p.size(-1) ** -0.5)
            elif name.endswith("weight"):  # LayerNorm gains
                p.copy_(1 + 0.2 * noise)
            else:  # biases, BERT's output bias
                p.copy_(0.2 * noise)
        for name, buffer in model.named_buffers():
            if name == "final_logits_bias":  # Marian's output bias is a buffer
                buffer.copy_(0.2 * torch.randn(buffer.shape, generator=generator))
    return model.eval()


def reloaded(hf_model, tmp_path):
    """The model as a user gets it: saved, then loaded with ``from_pretrained`` (no network: a local
    folder)."""
    hf_model.save_pretrained(tmp_path)
    return type(hf_model).from_pretrained(tmp_path).eval()


def padded_batch(seed: int, low: int = 0, high: int = VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """``ids (3, 9)`` and Hugging Face's ``attention_mask (3, 9)``: row 0 full, row 1 right-, row 2
    left-padded."""
    ids = torch.randint(low, high, (3, 9), generator=torch.Generator().manual_seed(seed))
    attention_mask = torch.ones(3, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    attention_mask[2, :3] = 0
    return ids, attention_mask


def as_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``(B, T)`` 0/1 attention_mask -> the library's ``(B, 1, 1, T)`` bool, True =
    may attend."""
    return attention_mask.bool()[:, None, None, :]


# --- GPT-2 ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=32,
        n_embd=D_MODEL,
        n_layer=2,
        n_head=HEADS,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    theirs = reloaded(
        redraw(transformers.GPT2LMHeadModel(config), seed=1), tmp_path_factory.mktemp("gpt2")
    )
    return theirs, tl.from_huggingface(theirs)


def test_gpt2_config_turns_on_gpt2s_switches(gpt2):
    _, ours = gpt2
    c = ours.config
    assert isinstance(ours, tl.DecoderOnlyLM) and not ours.training
    assert (c.norm_first, c.positional, c.activation, c.scale_embeddings, c.pad_id) == (
        True,
        "learned",
        "gelu_tanh",
        False,
        None,
    )
    assert ours.embed.embedding.padding_idx is None  # no token is a padding row
    assert tl.count_parameters(ours)["total"] == sum(p.numel() for p in gpt2[0].parameters())


def test_gpt2_logits_equal(gpt2):
    theirs, ours = gpt2
    ids, _ = padded_batch(seed=2)
    with torch.no_grad():
        assert max_abs_diff(ours(ids), theirs(ids).logits) <= TOLERANCE


def test_gpt2_logits_equal_with_a_padding_mask(gpt2):
    theirs, ours = gpt2
    ids, attention_mask = padded_batch(seed=3)
    with torch.no_grad():
        expected = theirs(ids, attention_mask=attention_mask).logits  # (B, T, V)
        got = ours(ids, mask=as_padding_mask(attention_mask))  # (B, T, V)
    real = attention_mask.bool()  # padded positions' logits mean nothing on either side
    assert max_abs_diff(got[real], expected[real]) <= TOLERANCE
    with torch.no_grad():  # and the mask matters: without it row 2 would read its left padding
        assert max_abs_diff(ours(ids)[real], expected[real]) > 1e-3


def test_gpt2_cached_greedy_generation_equals_hugging_faces(gpt2):
    theirs, ours = gpt2
    prompt = torch.randint(0, VOCAB, (3, 4), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():  # eos_token_id=None: both run the full 12 steps
        expected = theirs.generate(
            prompt, do_sample=False, max_new_tokens=12, eos_token_id=None, pad_token_id=0
        )
    got = tl.lm.generate(ours, prompt, 12, use_cache=True)
    assert torch.equal(got, expected), (got, expected)
    # not one token repeated: the comparison has teeth
    assert len(set(got[:, 4:].flatten().tolist())) > 2


def left_padded_prompts(seed: int, low: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts of 6, 3 and 5 real tokens, left-padded to ``(3, 6)`` with token 0, and Hugging
    Face's ``attention_mask (3, 6)``."""
    ids = torch.randint(low, VOCAB, (3, 6), generator=torch.Generator().manual_seed(seed))
    attention_mask = torch.ones(3, 6, dtype=torch.long)
    attention_mask[1, :3] = 0
    attention_mask[2, :1] = 0
    return ids.masked_fill(attention_mask == 0, 0), attention_mask


def check_left_padded_generation_equals_hugging_faces(theirs, ours, seed: int) -> None:
    """Greedy ``generate`` on a left-padded batch, with an ``<eos>`` that one row emits midway:
    ours gives Hugging Face's tokens, cached and uncached, finished rows padded; each row is what
    that prompt gives alone; and without the attention mask the padded rows would differ."""
    prompt, attention_mask = left_padded_prompts(seed)
    settings = dict(do_sample=False, max_new_tokens=10, pad_token_id=0)
    with torch.no_grad():
        free = theirs.generate(prompt, attention_mask=attention_mask, eos_token_id=None, **settings)
        eos = free[0, 6 + 4].item()  # row 0's fifth new token: it ends row 0 (at least) there
        expected = theirs.generate(
            prompt, attention_mask=attention_mask, eos_token_id=eos, **settings
        )
    for use_cache in (True, False):
        got = tl.lm.generate(
            ours,
            prompt,
            10,
            use_cache=use_cache,
            attention_mask=attention_mask,
            eos_id=eos,
            pad_id=0,
        )
        assert torch.equal(got, expected), (use_cache, got, expected)
    finished = (expected[:, 6:] == eos).any(dim=1)
    assert finished[0] and not finished.all()  # one row ends, another runs on
    assert len(set(expected[:, 6:].flatten().tolist())) > 3  # the rows do not repeat one token
    for row, start in enumerate((0, 3, 1)):  # each row alone, without padding
        alone = tl.lm.generate(ours, prompt[row : row + 1, start:], 10, eos_id=eos, pad_id=0)
        width = min(alone.size(1), got.size(1) - start)
        assert torch.equal(alone[0, :width], got[row, start : start + width])
    unmasked = tl.lm.generate(ours, prompt, 10, eos_id=eos, pad_id=0)
    assert not torch.equal(unmasked[1:], got[1:])


def test_gpt2_left_padded_batched_generation_equals_hugging_faces(gpt2):
    check_left_padded_generation_equals_hugging_faces(*gpt2, seed=5)


def test_gpt2_with_an_untied_output_head_copies_it():
    config = transformers.GPT2Config(
        vocab_size=VOCAB,
        n_positions=16,
        n_embd=D_MODEL,
        n_layer=1,
        n_head=HEADS,
        tie_word_embeddings=False,
    )
    theirs = redraw(transformers.GPT2LMHeadModel(config), seed=13)
    ours = tl.from_huggingface(theirs)
    assert not ours.config.tie_embeddings and torch.equal(ours.output.weight, theirs.lm_head.weight)
    ids, _ = padded_batch(seed=14)
    with torch.no_grad():
        assert max_abs_diff(ours(ids), theirs(ids).logits) <= TOLERANCE


# --- BERT -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=D_MODEL,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    theirs = reloaded(
        redraw(transformers.BertForMaskedLM(config), seed=5), tmp_path_factory.mktemp("bert")
    )
    return theirs, tl.from_huggingface(theirs)


def test_bert_config_turns_on_berts_switches(bert):
    theirs, ours = bert
    c = ours.config
    assert isinstance(ours, tl.MaskedLM)
    assert (c.norm_first, c.activation, c.scale_embeddings, c.layer_norm_eps, c.embedding_norm) == (
        False,
        "gelu",
        False,
        1e-12,
        True,
    )
    assert c.type_vocab_size == 2 and c.pad_id == 0
    assert tl.count_parameters(ours)["total"] == sum(p.numel() for p in theirs.parameters())


def test_bert_logits_equal_with_and_without_a_padding_mask(bert):
    theirs, ours = bert
    # no pad id inside: every token real unless masked
    ids, attention_mask = padded_batch(seed=6, low=1)
    token_types = torch.randint(0, 2, ids.shape, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        unmasked = ours(ids, token_types=token_types)
        assert max_abs_diff(unmasked, theirs(ids, token_type_ids=token_types).logits) <= TOLERANCE
        expected = theirs(ids, attention_mask=attention_mask, token_type_ids=token_types).logits
        got = ours(ids, mask=as_padding_mask(attention_mask), token_types=token_types)
    real = attention_mask.bool()
    assert max_abs_diff(got[real], expected[real]) <= TOLERANCE
    assert max_abs_diff(unmasked[real], expected[real]) > 1e-3  # the mask changed something


def test_bert_default_mask_hides_the_pad_token_as_attention_mask_does(bert):
    theirs, ours = bert
    ids, attention_mask = padded_batch(seed=8, low=1)
    ids = ids.masked_fill(attention_mask == 0, theirs.config.pad_token_id)
    with torch.no_grad():
        expected = theirs(ids, attention_mask=attention_mask).logits
        got = ours(ids)  # the mask comes from pad_id
    real = attention_mask.bool()
    assert max_abs_diff(got[real], expected[real]) <= TOLERANCE


def test_bert_base_with_berts_switches_has_bert_for_masked_lms_parameter_count():
    config = transformers.BertConfig()  # bert-base-uncased's sizes
    with torch.device("meta"):
        theirs = transformers.BertForMaskedLM(config)
        ours = tl.MaskedLM(tl.interop.config_from_huggingface(config))
    assert sum(p.numel() for p in theirs.parameters()) == 109_514_298
    assert tl.count_parameters(ours)["total"] == 109_514_298


# --- MarianMT -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    config = transformers.MarianConfig(
        vocab_size=VOCAB,
        d_model=D_MODEL,
        encoder_layers=2,
        decoder_layers=3,  # separate depths
        encoder_attention_heads=HEADS,
        decoder_attention_heads=HEADS,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        activation_function="swish",  # the opus-mt models' choice
        scale_embedding=True,
        pad_token_id=PAD_MARIAN,
        eos_token_id=EOS_MARIAN,
        decoder_start_token_id=PAD_MARIAN,  # Marian starts every target with <pad>
        forced_eos_token_id=None,
    )
    torch.manual_seed(0)
    theirs = reloaded(
        redraw(transformers.MarianMTModel(config), seed=20), tmp_path_factory.mktemp("marian")
    )
    return theirs, tl.from_huggingface(theirs)


def marian_source(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Source ids ``(4, 7)`` with row 1 padded after 5 tokens, and Hugging Face's attention_mask."""
    src = torch.randint(1, PAD_MARIAN, (4, 7), generator=torch.Generator().manual_seed(seed))
    attention_mask = torch.ones_like(src)
    attention_mask[1, 5:] = 0
    return src.masked_fill(attention_mask == 0, PAD_MARIAN), attention_mask


def test_marian_config_turns_on_marians_switches(marian):
    theirs, ours = marian
    c = ours.config
    assert isinstance(ours, tl.Transformer)
    assert (c.num_layers, c.decoder_layers, c.activation, c.sinusoid_layout, c.output_bias) == (
        2,
        3,
        "silu",
        "halves",
        True,
    )
    # theirs: the sinusoid tables are stored as (frozen) parameters, the logit bias as a buffer;
    # ours the reverse
    weights = sum(
        p.numel() for name, p in theirs.named_parameters() if "embed_positions" not in name
    )
    assert tl.count_parameters(ours)["total"] == weights + theirs.final_logits_bias.numel()


def test_marian_sinusoids_are_ours_in_the_halves_layout(marian):
    theirs, _ = marian
    # (64, d_model), computed in float64
    table = theirs.model.encoder.embed_positions.create_weight()
    assert max_abs_diff(tl.sinusoidal_encoding(D_MODEL, 64, layout="halves"), table) <= 1e-5
    # the paper's layout is not
    assert max_abs_diff(tl.sinusoidal_encoding(D_MODEL, 64), table) > 0.5


def test_marian_logits_equal_with_source_padding(marian):
    theirs, ours = marian
    src, attention_mask = marian_source(seed=10)
    tgt = torch.randint(1, PAD_MARIAN, (4, 6), generator=torch.Generator().manual_seed(11))
    # the decoder start token, which Marian does not hide: so neither may ours
    tgt[:, 0] = PAD_MARIAN
    with torch.no_grad():
        expected = theirs(src, attention_mask=attention_mask, decoder_input_ids=tgt).logits
        got = ours(src, tgt, src_mask=as_padding_mask(attention_mask), tgt_mask=tl.causal_mask(6))
        assert max_abs_diff(got, expected) <= TOLERANCE
        default_masks = ours(src, tgt, tgt_mask=tl.causal_mask(6))  # the source mask from pad_id
    assert max_abs_diff(default_masks, expected) <= TOLERANCE


def test_marian_cached_greedy_decoding_equals_hugging_faces(marian):
    theirs, ours = marian
    src, attention_mask = marian_source(seed=12)
    with torch.no_grad():  # our decoders never emit <pad>; tell Hugging Face's the same
        expected = theirs.generate(
            src,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=10,
            bad_words_ids=[[PAD_MARIAN]],
        )
    got = tl.greedy_decode(ours, src, 10, bos_id=PAD_MARIAN, eos_id=EOS_MARIAN, use_cache=True)
    assert torch.equal(got, expected[:, 1:]), (got, expected)  # theirs starts with the start token
    # Teeth: the rows differ, some change token midway, and one ends with <eos> and is padded after
    # it. (A random model with tied embeddings tends to repeat its last token: its hidden state
    # stays near that token's row.)
    assert len(set(got.flatten().tolist())) >= 5
    finished = (got == EOS_MARIAN).any(dim=1)
    assert finished.any() and (got[finished][:, -1] == PAD_MARIAN).all()


def test_marian_uncached_decoding_and_log_probabilities_read_the_pad_start_token(marian):
    """Marian starts every target with <pad> (decoder_start_token_id == pad_token_id). Hugging Face
    reads that start token; so must ours, with and without the cache: greedy and beam search give
    the same tokens either way, greedy gives Hugging Face's, and sequence_log_prob gives the sum of
    Hugging Face's per-token log-probabilities (<pad> excluded, as both decoders exclude it)."""
    theirs, ours = marian
    src, attention_mask = marian_source(seed=12)
    with torch.no_grad():
        expected = theirs.generate(
            src,
            attention_mask=attention_mask,
            do_sample=False,
            max_new_tokens=10,
            bad_words_ids=[[PAD_MARIAN]],
            output_scores=True,
            return_dict_in_generate=True,
        )
        # (B, 10): log softmax of the processed scores, <pad> at -inf
        per_token = theirs.compute_transition_scores(
            expected.sequences, expected.scores, normalize_logits=True
        )
    hf_tokens = expected.sequences[:, 1:]  # (B, 10), without the start token
    cached, uncached = (
        tl.greedy_decode(ours, src, 10, PAD_MARIAN, EOS_MARIAN, use_cache=c) for c in (True, False)
    )
    assert torch.equal(cached, hf_tokens) and torch.equal(uncached, hf_tokens)
    counted = per_token.masked_fill(hf_tokens == PAD_MARIAN, 0.0)  # padding after <eos>
    expected_log_p = counted.sum(dim=1)  # (B,)
    got_log_p = tl.sequence_log_prob(ours, src, cached, PAD_MARIAN, EOS_MARIAN)  # (B,)
    assert max_abs_diff(got_log_p, expected_log_p) <= 1e-4
    beams = [
        tl.beam_search(ours, src, 10, PAD_MARIAN, EOS_MARIAN, beam_width=3, use_cache=c)
        for c in (True, False)
    ]
    assert beams[0] == beams[1]


# --- Llama ----------------------------------------------------------------------------------------

# grouped-query (4 query heads share 2 key/value heads); a non-default theta
KV_HEADS, ROPE_THETA = 2, 500.0


def llama_config(**changes):
    settings = dict(
        vocab_size=VOCAB,
        hidden_size=D_MODEL,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=32,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA},
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.LlamaConfig(**{**settings, **changes})


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    torch.manual_seed(0)
    theirs = reloaded(
        redraw(transformers.LlamaForCausalLM(llama_config()), seed=30),
        tmp_path_factory.mktemp("llama"),
    )
    return theirs, tl.from_huggingface(theirs)


def test_llama_config_turns_on_llamas_switches(llama):
    theirs, ours = llama
    c = ours.config
    assert isinstance(ours, tl.DecoderOnlyLM) and not ours.training
    assert (
        c.norm_first,
        c.norm,
        c.positional,
        c.rope_theta,
        c.activation,
        c.n_kv_heads,
        c.bias,
    ) == (
        True,
        "rmsnorm",
        "rope",
        ROPE_THETA,
        "swiglu",
        KV_HEADS,
        False,
    )
    assert (c.scale_embeddings, c.tie_embeddings, c.layer_norm_eps) == (False, False, 1e-6)
    assert tl.count_parameters(ours)["total"] == sum(p.numel() for p in theirs.parameters())


def test_llama_logits_equal_with_and_without_a_padding_mask(llama):
    theirs, ours = llama
    ids, attention_mask = padded_batch(seed=31)
    with torch.no_grad():
        unmasked = ours(ids)
        assert max_abs_diff(unmasked, theirs(ids).logits) <= TOLERANCE
        expected = theirs(ids, attention_mask=attention_mask).logits  # (B, T, V)
        got = ours(ids, mask=as_padding_mask(attention_mask))  # (B, T, V)
    real = attention_mask.bool()  # padded positions' logits mean nothing on either side
    assert max_abs_diff(got[real], expected[real]) <= TOLERANCE
    # the mask matters (row 2's left padding)
    assert max_abs_diff(unmasked[real], expected[real]) > 1e-3


def test_llama_cached_greedy_generation_equals_hugging_faces(llama):
    theirs, ours = llama
    prompt = torch.randint(0, VOCAB, (3, 4), generator=torch.Generator().manual_seed(32))
    with torch.no_grad():  # eos_token_id=None: both run the full 12 steps
        expected = theirs.generate(
            prompt, do_sample=False, max_new_tokens=12, eos_token_id=None, pad_token_id=0
        )
    got = tl.lm.generate(ours, prompt, 12, use_cache=True)
    assert torch.equal(got, expected), (got, expected)
    # not one token repeated: the comparison has teeth
    assert len(set(got[:, 4:].flatten().tolist())) > 2


def test_llama_left_padded_batched_generation_equals_hugging_faces(llama):
    check_left_padded_generation_equals_hugging_faces(*llama, seed=33)


def test_llama_rope_layout_is_permuted_at_the_copy():
    """Ours rotates neighbouring pairs (2i, 2i+1); Hugging Face's "rotate half" pairs (i, i +
    d_k/2). The row permutation of interop._rope_rows turns one into the other: rotating then
    permuting equals permuting then rotating, for queries and keys at any position."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = llama_config()
    d_k = D_MODEL // HEADS
    # (B, h, T, d_k), Hugging Face's layout
    q, k = torch.randn(2, HEADS, 6, d_k), torch.randn(2, KV_HEADS, 6, d_k)
    positions = torch.arange(3, 9)  # not from 0: as after a cache
    cos, sin = LlamaRotaryEmbedding(config)(q, positions[None])  # (1, T, d_k) each
    their_q, their_k = apply_rotary_pos_emb(q, k, cos, sin)

    def to_ours(x):  # the per-head feature order of interop._rope_rows, applied to activations
        return tl.interop._rope_rows(x.movedim(-1, 0), 1).movedim(0, -1)

    for theirs, x in ((their_q, q), (their_k, k)):
        assert max_abs_diff(to_ours(theirs), apply_rope(to_ours(x), positions, ROPE_THETA)) <= 1e-6
        # unpermuted, the layouts differ
        assert max_abs_diff(theirs, apply_rope(x, positions, ROPE_THETA)) > 1e-2


def test_llama_copy_without_the_permutation_would_differ(llama, monkeypatch):
    theirs, _ = llama
    # Hugging Face's rows as they are
    monkeypatch.setattr(tl.interop, "_rope_rows", lambda weight, num_heads: weight)
    unpermuted = tl.from_huggingface(theirs)
    ids, _ = padded_batch(seed=33)
    with torch.no_grad():
        assert max_abs_diff(unpermuted(ids), theirs(ids).logits) > 1e-2


def test_llama_with_biases_and_multi_query_attention_copies_them():
    config = llama_config(
        num_key_value_heads=1, attention_bias=True, mlp_bias=True, tie_word_embeddings=True
    )
    theirs = redraw(transformers.LlamaForCausalLM(config), seed=34)
    ours = tl.from_huggingface(theirs)
    assert (ours.config.bias, ours.config.n_kv_heads, ours.config.tie_embeddings) == (True, 1, True)
    assert tl.count_parameters(ours)["total"] == sum(p.numel() for p in theirs.parameters())
    ids, _ = padded_batch(seed=35)
    with torch.no_grad():
        assert max_abs_diff(ours(ids), theirs(ids).logits) <= TOLERANCE


def test_llama_settings_our_blocks_lack_are_refused_clearly():
    scaled = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    with pytest.raises(ValueError, match="rope_type='linear'"):
        tl.interop.config_from_huggingface(llama_config(rope_parameters=scaled))
    with pytest.raises(ValueError, match="head_dim=16"):
        tl.interop.config_from_huggingface(llama_config(head_dim=16))
    with pytest.raises(ValueError, match="attention_bias=True but mlp_bias=False"):
        tl.interop.config_from_huggingface(llama_config(attention_bias=True))
    with pytest.raises(ValueError, match="hidden_act='gelu'"):
        tl.interop.config_from_huggingface(llama_config(hidden_act="gelu"))


# --- errors ---------------------------------------------------------------------------------------


def test_unknown_model_types_name_the_supported_ones():
    model = transformers.GPT2Model(
        transformers.GPT2Config(vocab_size=10, n_embd=8, n_layer=1, n_head=2)
    )
    with pytest.raises(
        TypeError,
        match="GPT2LMHeadModel, BertForMaskedLM, MarianMTModel, LlamaForCausalLM; got GPT2Model",
    ):
        tl.from_huggingface(model)
    with pytest.raises(
        ValueError, match="gpt2, bert, marian and llama configs, got model_type='t5'"
    ):
        tl.interop.config_from_huggingface(transformers.T5Config())


def test_settings_our_blocks_lack_are_refused_clearly():
    with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
        tl.interop.config_from_huggingface(
            transformers.GPT2Config(scale_attn_by_inverse_layer_idx=True)
        )
    with pytest.raises(ValueError, match="activation 'quick_gelu' has no counterpart"):
        tl.interop.config_from_huggingface(
            transformers.GPT2Config(activation_function="quick_gelu")
        )
    with pytest.raises(ValueError, match="separate source and target embeddings"):
        tl.interop.config_from_huggingface(
            transformers.MarianConfig(share_encoder_decoder_embeddings=False)
        )
