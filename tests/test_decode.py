import math
import types

import pytest
import torch

import transformer_lib as tl
from transformer_lib.applications.decode import filter_top_k_top_p


@pytest.fixture(scope="module")
def copy_model():
    """A tiny model trained briefly on the copy task: good enough that decodes end in <eos>."""
    task = tl.CopyTask(num_test=100)
    tl.seed_everything(0)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(len(task.vocab)))
    optimizer, scheduler = tl.adam_with_warmup(model, lr=5e-3, warmup=30, total_steps=300)
    tl.Trainer(model, optimizer, scheduler).fit(
        lambda s: task.train_batch(s, 64), 300, progress=False
    )
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


@pytest.mark.parametrize("use_cache", [False, True])
def test_the_one_loop_feeds_unseen_tokens_pads_after_eos_and_stops_when_every_row_ended(use_cache):
    """autoregress, the loop of greedy_decode, sample_decode and lm.generate, on a step that
    predicts the last token + 1: with a cache a step reads only the tokens the cache lacks."""
    vocab_size, eos, pad = 6, 4, 0
    cache, read = (tl.attention.DecoderCache() if use_cache else None), []

    def step(new, cache):
        read.append(new.size(1))
        if cache is not None:
            cache.length += new.size(1)  # as a model's stack does
        next_token = (new[:, -1] + 1) % vocab_size  # (B,)
        return torch.nn.functional.one_hot(next_token, vocab_size).float().log()  # (B, V)

    prefix = torch.tensor([[1, 1], [2, 3]])  # (B, 2)
    out = tl.decode.autoregress(step, prefix, 10, tl.decode.greedy, cache, eos_id=eos, pad_id=pad)
    assert out.tolist() == [[1, 1, 2, 3, 4], [2, 3, 4, 0, 0]]  # row 1 ended first; 3 steps, not 10
    assert read == ([2, 1, 1] if use_cache else [2, 3, 4])
    no_eos = tl.decode.autoregress(step, prefix, 2, tl.decode.greedy)  # runs every step
    assert no_eos.tolist() == [[1, 1, 2, 3], [2, 3, 4, 5]]


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
    correct = sum(
        v.decode(ids) == t for ids, (_, t) in zip(cached, task.test_pairs[:8], strict=True)
    )
    assert correct >= 7


def test_decoding_rejects_bad_settings(copy_model):
    model, task = copy_model
    with pytest.raises(
        ValueError, match="temperature must be finite and >= 0, got temperature=-1.0"
    ):
        tl.sample_decode(model, sources(task, 1), 5, 1, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="beam_width must be >= 1, got beam_width=0"):
        tl.beam_search(model, sources(task, 1), 5, 1, 2, beam_width=0)


def test_top_k_1_and_a_vanishing_temperature_are_greedy(copy_model):
    model, task = copy_model
    v, src = task.vocab, sources(task)
    greedy = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id)
    for settings in ({"top_k": 1, "temperature": 5.0}, {"temperature": 0.0}, {"temperature": 1e-9}):
        sampled = tl.sample_decode(
            model,
            src,
            12,
            v.bos_id,
            v.eos_id,
            generator=torch.Generator().manual_seed(0),
            **settings,
        )
        assert torch.equal(sampled, greedy), settings


def test_top_k_keeps_the_k_largest_logits():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0, 0.0]])
    kept = filter_top_k_top_p(logits, top_k=2)
    assert torch.isfinite(kept).tolist() == [[False, True, True, False, False]]
    assert torch.equal(filter_top_k_top_p(logits, top_k=50), logits)  # k above V keeps every token


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    probs = torch.tensor([[0.1, 0.5, 0.25, 0.15]])
    logits = probs.log()
    kept = lambda p: torch.isfinite(filter_top_k_top_p(logits, top_p=p))[0].tolist()
    assert kept(0.5) == [False, True, False, False]  # 0.5 alone reaches 0.5
    assert kept(0.6) == [False, True, True, False]  # 0.5 + 0.25
    assert kept(0.75) == [False, True, True, False]  # reaches exactly
    assert kept(0.76) == [False, True, True, True]
    assert kept(1.0) == [True, True, True, True]
    assert kept(0.01) == [False, True, False, False]  # the most likely token always survives


def test_temperature_top_k_and_top_p_combine():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    # T = 1: probabilities about .03 .09 .24 .64 -> top_p=0.8 keeps two tokens
    assert torch.isfinite(filter_top_k_top_p(logits, top_p=0.8)).sum() == 2
    # a high temperature flattens them (.21 .24 .26 .29): the same p now needs four; top_k=3 cuts to
    # three
    flat = logits / 10.0
    assert torch.isfinite(filter_top_k_top_p(flat, top_p=0.8)).sum() == 4
    assert torch.isfinite(filter_top_k_top_p(flat, top_k=3, top_p=0.8)).sum() == 3
    # top_p is measured after the top-k cut: of .30 .33 .37 (renormalised) 0.65 needs the two
    # largest, of all four (.21 .24 .26 .29) it needs three
    assert torch.isfinite(filter_top_k_top_p(flat, top_k=3, top_p=0.65))[0].tolist() == [
        False,
        False,
        True,
        True,
    ]
    assert torch.isfinite(filter_top_k_top_p(flat, top_p=0.65))[0].tolist() == [
        False,
        True,
        True,
        True,
    ]


def test_sampling_with_top_k_and_top_p_draws_only_kept_tokens(copy_model):
    model, task = copy_model
    v, src = task.vocab, sources(task)
    greedy = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id)
    generator = torch.Generator().manual_seed(0)
    hot = tl.sample_decode(
        model, src, 12, v.bos_id, v.eos_id, temperature=50.0, generator=generator
    )
    nucleus = tl.sample_decode(
        model,
        src,
        12,
        v.bos_id,
        v.eos_id,
        temperature=50.0,
        top_k=2,
        top_p=0.01,
        generator=generator,
    )  # top_p=0.01 keeps only the most likely of the top two
    assert not torch.equal(hot, greedy)  # a very hot distribution wanders ...
    assert torch.equal(nucleus, greedy)  # ... but the cut leaves one token per step


def pad_loving_model(seed=0):
    """An untrained model whose weights favour <pad>: without masking, every decoder would emit it
    first."""
    tl.seed_everything(seed)
    model = tl.Transformer(tl.TransformerConfig.cpu_tiny(12).replace(share_embeddings=False)).eval()
    # the same weights plus a bias that lifts <pad> above every token
    projection = torch.nn.Linear(64, 12)
    with torch.no_grad():
        projection.weight.copy_(model.output_projection.weight)
        projection.bias.zero_()
        projection.bias[0] = 20.0
    model.output_projection = projection
    return model


@pytest.mark.parametrize("seed", [0, 1])
def test_no_decoder_emits_pad_and_cache_never_changes_the_tokens(seed):
    model = pad_loving_model(seed)
    src = torch.randint(4, 12, (4, 6))
    src[2, 3:] = 0
    memory_logits = model(src, torch.full((4, 1), 1))  # (B, 1, V): unmasked, <pad> is the favourite
    assert (memory_logits.argmax(-1) == 0).all()
    greedy = [tl.greedy_decode(model, src, 10, 1, 2, use_cache=c) for c in (True, False)]
    sampled = [
        tl.sample_decode(
            model, src, 10, 1, 2, generator=torch.Generator().manual_seed(7), use_cache=c
        )
        for c in (True, False)
    ]
    nucleus = [
        tl.sample_decode(
            model,
            src,
            10,
            1,
            2,
            top_k=3,
            top_p=0.9,
            use_cache=c,
            generator=torch.Generator().manual_seed(7),
        )
        for c in (True, False)
    ]
    beams = [tl.beam_search(model, src, 10, 1, 2, beam_width=3, use_cache=c) for c in (True, False)]
    for cached, plain in (greedy, sampled, nucleus):
        assert torch.equal(cached, plain)
        for row in cached.tolist():  # <pad> appears only after <eos>
            assert 0 not in (row[: row.index(2)] if 2 in row else row)
    assert beams[0] == beams[1] and all(0 not in beam for beam in beams[0])


def test_beam_search_returns_hypotheses_with_their_sequence_log_probability(copy_model):
    model, task = copy_model
    v, src = task.vocab, sources(task, 4)
    found = tl.beam_search(model, src, 12, v.bos_id, v.eos_id, beam_width=3, return_hypotheses=True)
    assert [hyps[0].tokens for hyps in found] == tl.beam_search(
        model, src, 12, v.bos_id, v.eos_id, beam_width=3
    )
    for row, hyps in zip(src, found, strict=True):
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        best = hyps[0]
        scored = tl.sequence_log_prob(
            model, row[None], torch.tensor([best.tokens]), v.bos_id, v.eos_id
        )
        assert scored.item() == pytest.approx(best.log_prob, abs=1e-4)


def test_sequence_log_prob_stops_at_eos_and_beam_never_scores_below_greedy_at_width_1(copy_model):
    model, task = copy_model
    v, src = task.vocab, sources(task, 6)
    greedy = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id)  # (6, <= 12), padded after <eos>
    greedy_lp = tl.sequence_log_prob(model, src, greedy, v.bos_id, v.eos_id)
    assert greedy_lp.shape == (6,) and (greedy_lp <= 0).all()
    # more padding changes nothing
    widened = torch.cat([greedy, torch.full((6, 3), v.pad_id)], dim=1)
    torch.testing.assert_close(
        tl.sequence_log_prob(model, src, widened, v.bos_id, v.eos_id), greedy_lp
    )
    beam_1 = tl.beam_search(
        model, src, 12, v.bos_id, v.eos_id, beam_width=1, return_hypotheses=True
    )
    torch.testing.assert_close(
        torch.tensor([hyps[0].log_prob for hyps in beam_1]), greedy_lp, atol=1e-4, rtol=0
    )


def test_beam_width_must_be_below_the_vocabulary(copy_model):
    model, task = copy_model
    size = len(task.vocab)
    with pytest.raises(
        ValueError, match=f"beam_width={size} must be below the vocabulary size {size}"
    ):
        tl.beam_search(model, sources(task, 1), 5, 1, 2, beam_width=size)
    assert len(tl.beam_search(model, sources(task, 1), 5, 1, 2, beam_width=size - 1)) == 1


# --------------------------------------------------------------------------------------------------
# Beam search on hand-built next-token tables: the right answer is known by enumerating every
# output.

# a five-token vocabulary; the table never gives <pad> or <bos> probability
PAD, BOS, EOS, X, Y = range(5)


class ProbabilityTable:
    """Next-token probabilities as a function of the prefix: ``rules[prefix]`` (a dict token ->
    probability, tokens after <bos>), ``default`` for every prefix without a rule. Serves beam
    search's core as a step function, the public API as a stand-in model, and the tests as the
    ground truth (exhaustive search)."""

    vocab_size = 5

    def __init__(self, rules, default):
        self.rules, self.default = rules, default
        self.calls = 0

    def probabilities(self, prefix):
        return self.rules.get(tuple(prefix), self.default)

    def step(self, prefixes):
        """``prefixes (R, t)`` starting with <bos> -> ``(R, V)`` log-probabilities."""
        self.calls += 1
        out = torch.full((prefixes.size(0), self.vocab_size), float("-inf"))  # (R, V)
        for r, row in enumerate(prefixes.tolist()):
            for token, p in self.probabilities(row[1:]).items():
                out[r, token] = torch.tensor(p).log()
        return out

    def search(self, max_len, beam_width, length_penalty, min_len=0):
        return tl.decode._beam_search_steps(
            self.step,
            lambda index: None,
            1,
            max_len,
            BOS,
            EOS,
            beam_width,
            length_penalty,
            min_len=min_len,
        )[0]

    def best_by_enumeration(self, max_len, alpha, min_len=0):
        """The highest-scoring output that ends in <eos> within ``max_len`` tokens and has at least
        ``min_len`` tokens before it, by visiting every prefix."""
        best, frontier = None, [([], 0.0)]
        while frontier:
            prefix, log_p = frontier.pop()
            for token, p in self.probabilities(prefix).items():
                tokens, total = prefix + [token], log_p + torch.tensor(p).log().item()
                if token == EOS and len(prefix) < min_len:
                    continue
                if token == EOS:
                    score = total / ((5 + len(tokens)) / 6) ** alpha
                    if best is None or score > best[1]:
                        best = (tokens, score)
                elif len(tokens) < max_len:
                    frontier.append((tokens, total))
        return best[0]

    def as_model(self):
        """The table behind the interface beam_search reads from a Transformer (without a KV
        cache)."""
        table = self

        class TableModel(torch.nn.Module):
            config = types.SimpleNamespace(pad_id=PAD, tgt_vocab_size=table.vocab_size)
            output_projection = torch.nn.Identity()  # decode already returns the log-probabilities

            def source_mask(self, src):
                return tl.padding_mask(src, PAD)  # (B, 1, 1, S)

            def encode(self, src, src_mask=None):
                # (B, S, 1): the table ignores the source
                return torch.zeros(src.size(0), src.size(1), 1)

            def decode(self, prefix, memory, src_mask, tgt_mask=None, cache=None):
                assert cache is None, (
                    "the table model has no KV cache: call beam_search with use_cache=False"
                )
                steps = [table.step(prefix[:, : t + 1]) for t in range(prefix.size(1))]
                return torch.stack(steps, dim=1)  # (B, t, V)

        return TableModel()


# W = 2. Step 1 keeps x (.6) and y (.3). Step 2's best two are xx (.54) and y<eos> (.18): y<eos>
# finishes. Step 3's best two are xxx (.324) and xx<eos> (.189): a second finished output. The most
# likely output, xxx<eos> (.321), needs a fourth step; a search that stops after W finished outputs
# returns xx<eos>.
TWO_SHORT_ENDINGS_FIRST = ProbabilityTable(
    {
        (): {X: 0.6, Y: 0.3, EOS: 0.1},
        (X,): {X: 0.9, Y: 0.04, EOS: 0.06},
        (Y,): {EOS: 0.6, X: 0.23, Y: 0.17},
        (X, X): {X: 0.6, EOS: 0.35, Y: 0.05},
        (X, X, X): {EOS: 0.99, X: 0.006, Y: 0.004},
    },
    default={EOS: 0.7, X: 0.17, Y: 0.13},
)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_does_not_stop_when_w_short_endings_finish_first(alpha):
    table = TWO_SHORT_ENDINGS_FIRST
    best = table.best_by_enumeration(max_len=8, alpha=alpha)
    assert best == [X, X, X, EOS]
    model, src = table.as_model(), torch.tensor([[5, 6]])
    found = tl.beam_search(
        model,
        src,
        8,
        BOS,
        EOS,
        beam_width=2,
        length_penalty=alpha,
        use_cache=False,
        return_hypotheses=True,
    )
    hypotheses = found[0]
    assert hypotheses[0].tokens == best
    assert hypotheses[0].log_prob == pytest.approx(math.log(0.6 * 0.9 * 0.6 * 0.99), abs=1e-5)
    # the short ending was found, and ranked below
    assert [X, X, EOS] in [h.tokens for h in hypotheses[1:]]
    assert tl.beam_search(
        model, src, 8, BOS, EOS, beam_width=2, length_penalty=alpha, use_cache=False
    ) == [best]


# <eos> first is the most likely single token (.5), so it finishes at step 1 with score log .5 =
# -0.69. The live x (.4) has log P -0.92, which is below -0.69 as a raw log-probability and below it
# after dividing by lp(2); but x x ... x <eos> (ten tokens, log P -1.01) scores -1.01 / lp(10) =
# -0.58: only the bound log P / lp(max_len) keeps it alive.
LONG_ANSWER_BEHIND_AN_EARLY_EOS = ProbabilityTable(
    {
        (): {EOS: 0.5, X: 0.4, Y: 0.1},
        **{(X,) * n: {X: 0.99, EOS: 0.005, Y: 0.005} for n in range(1, 9)},
    },
    default={EOS: 0.99, X: 0.005, Y: 0.005},
)


def test_the_stopping_bound_lets_a_longer_output_win_under_the_length_penalty():
    table = LONG_ANSWER_BEHIND_AN_EARLY_EOS
    best = table.best_by_enumeration(max_len=10, alpha=0.6)
    assert best == [X] * 9 + [EOS]
    hypotheses = table.search(max_len=10, beam_width=2, length_penalty=0.6)
    assert hypotheses[0].tokens == best and hypotheses[0].score > -0.6
    assert [EOS] in [h.tokens for h in hypotheses]  # finished at step 1 and then overtaken
    # without a length penalty the same table's best output is <eos> alone, and the search stops
    # after one step
    table.calls = 0
    assert table.search(max_len=10, beam_width=2, length_penalty=0.0)[0].tokens == [EOS]
    assert table.best_by_enumeration(max_len=10, alpha=0.0) == [EOS]
    assert table.calls == 1


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_min_len_forbids_the_empty_output_and_keeps_the_models_log_probabilities(alpha):
    """The empty-translation failure (issue 35): at alpha = 0 the table's best output is <eos>
    alone. ``min_len=1`` forbids it, and the search then finds the best output of at least one
    token, scored with the table's own (not renormalised) log-probabilities."""
    table = LONG_ANSWER_BEHIND_AN_EARLY_EOS
    assert table.search(max_len=10, beam_width=2, length_penalty=0.0)[0].tokens == [EOS]
    for min_len in (1, 2, 3):
        best = table.best_by_enumeration(max_len=10, alpha=alpha, min_len=min_len)
        hypotheses = table.search(10, 2, alpha, min_len=min_len)
        assert hypotheses[0].tokens == best
        assert all(h.tokens.index(EOS) >= min_len for h in hypotheses)
        log_p = sum(math.log(table.probabilities(best[:i])[token]) for i, token in enumerate(best))
        assert hypotheses[0].log_prob == pytest.approx(log_p, abs=1e-5)
    # the best output of at least one token is the long one (.4 * .99 ** 9), at every alpha
    assert table.best_by_enumeration(max_len=10, alpha=alpha, min_len=1) == [X] * 9 + [EOS]


def test_min_len_in_the_one_loop_and_in_the_public_decoders(copy_model):
    """autoregress chooses <eos> only after ``min_len`` new tokens; greedy, sampled and beam
    decoding pass it on, and ``min_len=0`` leaves them as they were."""
    vocab_size, eos, x = 5, 2, 3
    # <eos> most likely, then x
    row = torch.tensor([0.0, 0.0, 0.6, 0.3, 0.1]).log()

    def step(new, cache):
        return row.expand(new.size(0), vocab_size)  # (B, V)

    prefix = torch.ones(2, 1, dtype=torch.long)  # (B, 1)
    for min_len in (0, 1, 3):
        out = tl.decode.autoregress(step, prefix, 6, tl.decode.greedy, None, eos, 0, min_len)
        assert out.tolist() == [[1] + [x] * min_len + [eos]] * 2
    with pytest.raises(ValueError, match="min_len"):
        tl.decode.autoregress(step, prefix, 6, tl.decode.greedy, None, eos, 0, -1)
    model, task = copy_model
    v, src = task.vocab, sources(task, 8)
    greedy = tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id)
    long = tl.greedy_decode(model, src, 14, v.bos_id, v.eos_id, min_len=13)  # past the copy
    assert (long[:, :13] != v.eos_id).all() and (long[:, :13] != v.pad_id).all()
    assert torch.equal(tl.greedy_decode(model, src, 12, v.bos_id, v.eos_id, min_len=0), greedy)
    sampled = tl.sample_decode(model, src, 14, v.bos_id, v.eos_id, 1.0, min_len=13)
    assert (sampled[:, :13] != v.eos_id).all()
    beams = tl.beam_search(model, src, 14, v.bos_id, v.eos_id, beam_width=2, min_len=13)
    assert all(v.eos_id not in ids[:13] for ids in beams)
    with pytest.raises(ValueError, match="min_len"):
        tl.beam_search(model, src, 14, v.bos_id, v.eos_id, min_len=-1)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_search_stops_as_soon_as_no_live_prefix_can_win(alpha):
    table = TWO_SHORT_ENDINGS_FIRST
    table.calls = 0
    hypotheses = table.search(max_len=30, beam_width=2, length_penalty=alpha)
    assert (
        hypotheses[0].tokens == table.best_by_enumeration(max_len=8, alpha=alpha) == [X, X, X, EOS]
    )
    # not 30: when xxx<eos> finishes (step 4) no live prefix can reach its score
    assert table.calls == 4
    scores = [h.score for h in hypotheses]
    assert scores == sorted(scores, reverse=True) and len(hypotheses) <= 2


def test_a_source_that_never_finishes_returns_its_prefixes_cut_at_max_len():
    table = ProbabilityTable({}, default={X: 0.7, Y: 0.3})  # <eos> never has probability
    hypotheses = table.search(max_len=4, beam_width=2, length_penalty=0.6)
    assert hypotheses[0].tokens == [X, X, X, X] and len(hypotheses) == 2
    assert all(len(h.tokens) == 4 and EOS not in h.tokens for h in hypotheses)
    assert hypotheses[0].log_prob == pytest.approx(4 * math.log(0.7), abs=1e-5)
    assert hypotheses[0].score > hypotheses[1].score


def test_batched_search_keeps_each_source_apart():
    """Three sources in one call, each with its own table row: rows of a finished source leave the
    batch."""
    tables = [TWO_SHORT_ENDINGS_FIRST, LONG_ANSWER_BEHIND_AN_EARLY_EOS, TWO_SHORT_ENDINGS_FIRST]
    rows_seen = []

    def step(prefixes):  # (A*W, t): source by source, W rows each
        rows_seen.append(prefixes.size(0))
        per_source = prefixes.view(len(active), 2, -1)  # (A, W, t)
        # (A*W, V)
        return torch.cat([tables[s].step(p) for s, p in zip(active, per_source, strict=True)])

    def reorder(index):
        # block i // W belongs to the source in slot i // W
        kept = sorted({i // 2 for i in index.tolist()})
        active[:] = [active[k] for k in kept]

    active = [0, 1, 2]
    found = tl.decode._beam_search_steps(step, reorder, 3, 10, BOS, EOS, 2, 0.6)
    alone = [table.search(10, 2, 0.6) for table in tables]
    assert [[h.tokens for h in hyps] for hyps in found] == [
        [h.tokens for h in hyps] for hyps in alone
    ]
    # sources that are done stop costing decoder rows
    assert rows_seen[0] == 6 and rows_seen[-1] == 2


# --------------------------------------------------------------------------------------------------
# Beam search on a date model trained with the course's recipe.


@pytest.fixture(scope="session")
def date_model():
    """``tl.train_task`` with ``tl.CPU_RECIPE`` cut to 600 of its 1600 steps: 59 to 79 s measured on
    one thread of the shared course machine, where the full recipe took 97 s. Label smoothing leaves
    every token, <eos> included, some probability, so short <eos> endings compete with the right
    date: on the first 200 validation dates, main's beam search (which stopped after W finished
    outputs) returned a lower log-probability than greedy decoding for 3, by up to 4.7."""
    task = tl.DateTask(seed=0)
    model = tl.train_task(task, steps=600, progress=False).model.eval()
    return model, task


def greedy_and_beam_log_probs(model, task, src, **beam_settings):
    v = task.vocab
    greedy = tl.greedy_decode(model, src, 11, v.bos_id, v.eos_id)  # (B, <= 11)
    greedy_log_p = tl.sequence_log_prob(model, src, greedy, v.bos_id, v.eos_id)  # (B,)
    found = tl.beam_search(
        model, src, 11, v.bos_id, v.eos_id, return_hypotheses=True, **beam_settings
    )
    return greedy_log_p, torch.tensor([hyps[0].log_prob for hyps in found]), found


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_never_finds_a_less_likely_date_than_greedy(date_model, alpha):
    model, task = date_model
    src = tl.make_batch(task.valid_pairs[:200], task.vocab).src  # (200, S): held out from training
    greedy_log_p, beam_log_p, found = greedy_and_beam_log_probs(
        model, task, src, beam_width=4, length_penalty=alpha
    )
    gap = beam_log_p - greedy_log_p  # (200,)
    assert (gap >= -1e-4).all(), (
        f"beam below greedy for {int((gap < -1e-4).sum())} dates, by up to {-gap.min():.2f}"
    )
    # the trap is there: some source finished a shorter output before its best one
    assert any(len(h.tokens) < len(hyps[0].tokens) for hyps in found for h in hyps[1:])
    best = [torch.tensor(hyps[0].tokens) for hyps in found]
    # (200, T)
    padded = torch.nn.utils.rnn.pad_sequence(
        best, batch_first=True, padding_value=task.vocab.pad_id
    )
    # (200,)
    rescored = tl.sequence_log_prob(model, src, padded, task.vocab.bos_id, task.vocab.eos_id)
    # the log P that beam reports is the model's
    torch.testing.assert_close(rescored, beam_log_p, atol=1e-4, rtol=0)


def test_batched_beam_equals_one_source_at_a_time_with_and_without_cache(date_model):
    model, task = date_model
    v = task.vocab
    src = tl.make_batch(task.valid_pairs[:24], v).src  # (24, S): padded to the longest source
    batched = tl.beam_search(
        model, src, 11, v.bos_id, v.eos_id, beam_width=3, return_hypotheses=True
    )
    uncached = tl.beam_search(
        model, src, 11, v.bos_id, v.eos_id, beam_width=3, use_cache=False, return_hypotheses=True
    )
    for i, (pair, hyps) in enumerate(zip(task.valid_pairs[:24], batched, strict=True)):
        alone_src = tl.make_batch([pair], v).src  # (1, S_i): no padding
        (alone,) = tl.beam_search(
            model, alone_src, 11, v.bos_id, v.eos_id, beam_width=3, return_hypotheses=True
        )
        for other in (alone, uncached[i]):
            assert [h.tokens for h in other] == [h.tokens for h in hyps]
            assert [h.log_prob for h in other] == pytest.approx(
                [h.log_prob for h in hyps], abs=1e-4
            )


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_of_width_1_is_greedy_on_the_date_model(date_model, alpha):
    model, task = date_model
    v = task.vocab
    src = tl.make_batch(task.valid_pairs[:200], v).src  # (200, S)
    greedy = tl.greedy_decode(model, src, 11, v.bos_id, v.eos_id)  # (200, <= 11)
    beam = tl.beam_search(model, src, 11, v.bos_id, v.eos_id, beam_width=1, length_penalty=alpha)
    assert [[t for t in row if t != v.pad_id] for row in greedy.tolist()] == beam


def test_beam_search_rejects_a_length_penalty_that_is_not_a_finite_number(copy_model):
    model, task = copy_model
    with pytest.raises(ValueError, match="length_penalty must be finite, got length_penalty=nan"):
        tl.beam_search(model, sources(task, 1), 5, 1, 2, length_penalty=float("nan"))
    with pytest.raises(
        TypeError, match="length_penalty must be a real number, got '0.6' of type str"
    ):
        tl.beam_search(model, sources(task, 1), 5, 1, 2, length_penalty="0.6")
