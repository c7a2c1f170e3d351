import pytest
import torch

import transformer_lib as tl


@pytest.fixture(scope="module")
def copy_model():
    """A tiny model trained briefly on the copy task: good enough that decodes end in <eos>."""
    task = tl.CopyTask(num_test=100)
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    optimizer, scheduler = tl.adam_with_warmup(model, lr=5e-3, warmup=30, total_steps=300)
    tl.Trainer(model, optimizer, scheduler).fit(lambda s: task.train_batch(s, 64), 300, progress=False)
    return model.eval(), task


def sources(task, n=16):
    return tl.make_batch(task.test_pairs[:n], task.vocab).src


def test_trained_copy_model_copies(copy_model):
    model, task = copy_model
    assert tl.exact_match(model, task.test_pairs, task.vocab) > 0.9


def test_kv_cache_gives_the_same_tokens_as_plain_decoding(copy_model):
    model, task = copy_model
    v = task.vocab
    src = sources(task)
    cached = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id, use_cache=True)
    plain = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id, use_cache=False)
    assert torch.equal(cached, plain)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    sampled_cached = tl.sample_decode(model, src, 12, v.bos_id, v.eos_id, 1.5, g1, use_cache=True)
    sampled_plain = tl.sample_decode(model, src, 12, v.bos_id, v.eos_id, 1.5, g2, use_cache=False)
    assert torch.equal(sampled_cached, sampled_plain)


def test_kv_cache_on_an_untrained_multi_layer_model():
    tl.seed_everything(1)
    model = tl.Transformer(tl.TransformerConfig.cpu_small(30).replace(dropout=0.0)).eval()
    src = torch.randint(4, 30, (3, 9))
    src[1, 6:] = 0
    cached = tl.greedy_decode(model, src, 15, 1, 2, use_cache=True)
    plain = tl.greedy_decode(model, src, 15, 1, 2, use_cache=False)
    assert torch.equal(cached, plain)


def test_cached_hidden_states_equal_the_full_decode():
    tl.seed_everything(2)
    model = tl.Transformer(tl.TransformerConfig.cpu_small(30).replace(dropout=0.0)).eval()
    src, tgt = torch.randint(4, 30, (2, 7)), torch.randint(4, 30, (2, 6))
    memory, src_mask = model.encode(src), model.source_mask(src)
    full = model.decode(tgt, memory, src_mask)  # (B, 6, d_model), causal
    cache = model.new_cache()
    steps = [model.decode(tgt[:, t : t + 1], memory, src_mask, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 6


def test_beam_search_with_width_1_equals_greedy(copy_model):
    model, task = copy_model
    v = task.vocab
    src = sources(task)
    greedy = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id)
    beams = tl.beam_search(model, src, 12, v.bos_id, v.eos_id, beam_width=1)
    for row, beam in zip(greedy.tolist(), beams, strict=True):
        assert [t for t in row if t != v.pad_id] == beam


def test_beam_search_with_and_without_cache_agree_and_decode_correctly(copy_model):
    model, task = copy_model
    v = task.vocab
    src = sources(task, 8)
    cached = tl.beam_search(model, src, 12, v.bos_id, v.eos_id, beam_width=3, use_cache=True)
    plain = tl.beam_search(model, src, 12, v.bos_id, v.eos_id, beam_width=3, use_cache=False)
    assert cached == plain
    correct = sum(v.decode(ids) == t for ids, (_, t) in zip(cached, task.test_pairs[:8], strict=True))
    assert correct >= 7


def test_decoding_rejects_bad_settings(copy_model):
    model, task = copy_model
    with pytest.raises(ValueError, match="temperature must be > 0"):
        tl.sample_decode(model, sources(task, 1), 5, 1, 2, temperature=0)
    with pytest.raises(ValueError, match="beam_width must be >= 1"):
        tl.beam_search(model, sources(task, 1), 5, 1, 2, beam_width=0)
