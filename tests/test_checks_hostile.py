"""The checks refuse the wrong answers a probe of 513 student answers found passing (issue 35),
never raise or hang on hostile student code, and leave no state behind; correct answers written in
other styles still pass."""

import math
import signal
import threading
import time
from collections import Counter
from collections.abc import Mapping
from itertools import pairwise

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_lib as tl
from transformer_lib.teaching.checks import engine, nb12_translation
from transformer_lib.teaching.checks import nb13_modern_decoder as nb13

# --- plain wrong answers that passed --------------------------------------------------------------

D_K = 4  # a head width written as a number, as a learner may keep it from the notebook's example


@pytest.mark.parametrize(
    "split",
    [
        lambda x, h: x.view(x.size(0), x.size(1), -1, 4).transpose(1, 2),
        lambda x, h: torch.stack([x[..., i * D_K : (i + 1) * D_K] for i in range(h)], dim=1),
    ],
)
def test_a_head_width_written_as_a_number_fails_split_heads(split):
    result = tl.checks.check_split_heads(split)
    assert not result and "num_heads=2" in result.message, result.message


@pytest.mark.parametrize(
    "split",
    [
        lambda x, h: x.view(x.size(0), x.size(1), h, -1).transpose(1, 2),
        lambda x, h: x.reshape(*x.shape[:2], h, x.size(-1) // h).permute(0, 2, 1, 3),
        lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2),
        lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
        lambda x, h: torch.stack(
            [x[..., i * (x.size(-1) // h) : (i + 1) * (x.size(-1) // h)] for i in range(h)], dim=1
        ),
    ],
)
def test_split_heads_written_in_any_correct_form_passes(split):
    assert tl.checks.check_split_heads(split)


def test_shifted_targets_sliced_for_one_length_fail_and_any_correct_slicing_passes():
    result = tl.checks.check_shifted_targets(lambda t: (t[:, 0:5], t[:, 1:6]))
    assert not result and "length 4" in result.message, result.message
    assert tl.checks.check_shifted_targets(lambda t: (t[:, : t.size(1) - 1], t[:, 1:]))
    assert tl.checks.check_shifted_targets(lambda t: (t.narrow(1, 0, t.size(1) - 1), t[..., 1:]))


def test_a_complex_result_fails_label_smoothing_with_a_hint():
    result = tl.checks.check_label_smoothing(lambda *args: tl.smoothed_targets(*args) + 7j)
    assert not result and "complex" in result.message and "7j" in result.message, result.message
    # a real result of another float dtype still passes
    assert tl.checks.check_label_smoothing(lambda *args: tl.smoothed_targets(*args).double())


def _sample(context):
    """A sampling loop that feeds the model ``context(tokens, max_len)``."""

    def generate(model, prompt, max_new_tokens, temperature, generator):
        tokens = prompt
        for _ in range(max_new_tokens):
            logits = model(context(tokens, model.config.max_len))[:, -1] / temperature
            new = torch.multinomial(logits.softmax(-1), 1, generator=generator)
            tokens = torch.cat([tokens, new], dim=1)
        return tokens

    return generate


@pytest.mark.parametrize(
    ("context", "words"),
    [
        (lambda tokens, n: tokens[:, -1:], "only the last token"),
        (lambda tokens, n: tokens[:, -(n - 1) :], "max_len - 1 tokens"),
    ],
)
def test_a_loop_that_feeds_the_model_the_wrong_window_fails_generate(context, words):
    result = tl.checks.check_generate(_sample(context))
    assert not result and words in result.message, result.message


def test_a_loop_that_crops_only_when_needed_passes_generate():
    def crop_when_needed(tokens, n):
        return tokens if tokens.size(1) <= n else tokens[:, tokens.size(1) - n :]

    assert tl.checks.check_generate(_sample(crop_when_needed))


def _masking(replacements):
    """BERT's recipe, its random replacements drawn by ``replacements(candidates, shape, gen)``."""

    def mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator):
        maskable = ~torch.isin(tokens, torch.tensor(list(special_ids)))
        picked = maskable & (torch.rand(tokens.shape, generator=generator) < rate)
        action = torch.rand(tokens.shape, generator=generator)
        allowed = ~torch.isin(torch.arange(vocab_size), torch.tensor([*special_ids, mask_id]))
        candidates = allowed.nonzero()[:, 0]
        random_ids = replacements(candidates, tokens.shape, generator)
        inputs = torch.where(picked & (action < 0.8), mask_id, tokens)
        inputs = torch.where(picked & (action >= 0.8) & (action < 0.9), random_ids, inputs)
        return inputs, torch.where(picked, tokens, tl.lm.IGNORE_INDEX)

    return mask_tokens


@pytest.mark.parametrize(
    "replacements",
    [
        # the index into the candidates used as the id
        lambda candidates, shape, gen: torch.randint(len(candidates), shape, generator=gen),
        lambda candidates, shape, gen: torch.randint(10, shape, generator=gen),
    ],
)
def test_replacements_from_too_narrow_a_range_fail_mask_tokens(replacements):
    result = tl.checks.check_mask_tokens(_masking(replacements))
    assert not result and "never take the ids" in result.message, result.message


def test_replacements_drawn_among_the_candidates_pass_mask_tokens():
    def indexed(candidates, shape, gen):
        return candidates[torch.randint(len(candidates), shape, generator=gen)]

    def offset(candidates, shape, gen):  # ids 6..39 drawn as a range
        return torch.randint(int(candidates.min()), int(candidates.max()) + 1, shape, generator=gen)

    assert tl.checks.check_mask_tokens(_masking(indexed))
    assert tl.checks.check_mask_tokens(_masking(offset))


def _merge_step(*, once_per_word=False, tie=lambda p: p, first=False):
    """One BPE step with a knob per mistake: pairs counted once per word, another tie-break, only
    the first occurrence merged."""

    def merge(symbols, pair):
        out, i, done = [], 0, False
        while i < len(symbols):
            if not done and i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                out.append(symbols[i] + symbols[i + 1])
                i, done = i + 2, first
            else:
                out.append(symbols[i])
                i += 1
        return tuple(out)

    def merge_step(words):
        counts = Counter()
        for symbols, count in words.items():
            for pair in set(pairwise(symbols)) if once_per_word else pairwise(symbols):
                counts[pair] += count
        pair = min(counts, key=lambda p: (-counts[p], tie(p)))
        return pair, {merge(symbols, pair): count for symbols, count in words.items()}

    return merge_step


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (_merge_step(first=True), "not only the first"),
        (_merge_step(once_per_word=True), "set(zip(...))"),
        (_merge_step(tie=lambda p: p[0] + p[1]), "smallest (left, right)"),
        # tl.learn_bpe's rule (older symbols first) is not the notebook's: they part on merged ones
        (_merge_step(tie=lambda p: [(len(s) > 1, s) for s in p]), "smallest (left, right)"),
    ],
)
def test_each_merge_step_mistake_fails_with_its_hint(code, words):
    result = tl.checks.check_merge_step(code)
    assert not result and words in result.message, result.message


def test_merge_step_accepts_the_notebooks_tie_rule_in_any_form():
    assert tl.checks.check_merge_step(_merge_step())
    # the same rule written as a sort of the tied pairs
    assert tl.checks.check_merge_step(_merge_step(tie=lambda p: list(p)))


def test_merge_steps_tie_rule_is_learn_bpes_on_every_case():
    """On words spelled in characters, the notebook's rule and learn_bpe's agree: learn_bpe's first
    merge is the check's pair."""
    for case in nb12_translation._cases():
        words = case.args[0]
        if all(len(s) == 1 for symbols in words for s in symbols):
            text = {"".join(symbols): count for symbols, count in words.items()}
            first = tl.learn_bpe(text, 1)[0]
            assert (first.left, first.right) == nb12_translation._best(
                nb12_translation._pair_counts(words)
            )


def test_merge_steps_tie_rule_parts_from_learn_bpes_after_merges():
    """After learn_bpe's first merge the words hold a merged symbol, and its second step breaks a
    tie between (ab, c) and (b, c) by age, (b, c); the notebook's rule, which one step can follow,
    takes the smaller tuple, (ab, c). Notebook 12 shows the same parting on its own example."""
    words = {"abc": 2, "bc": 2, "ab": 3}
    first, second = tl.learn_bpe(words, 2)
    spelled = {
        nb12_translation._merge(tuple(w), (first.left, first.right)): n for w, n in words.items()
    }
    counts = nb12_translation._pair_counts(spelled)
    assert counts["ab", "c"] == counts["b", "c"]
    assert (second.left, second.right) == ("b", "c")
    assert nb12_translation._winners(counts) == [("ab", "c")]


def test_a_kv_head_count_that_is_no_divisor_fails():
    def by_division(config, budget_bytes, dtype):
        per_head = tl.kv_cache_bytes_per_token(config.replace(n_kv_heads=1), dtype)
        fit = min(budget_bytes // per_head, config.num_heads)
        return config.num_heads // math.ceil(config.num_heads / fit)

    result = tl.checks.check_kv_heads_for_budget(by_division)
    assert not result and "h = 10" in result.message, result.message
    assert tl.checks.check_kv_heads_for_budget(nb13._kv_heads_for_budget)


# --- student code that made a check raise ---------------------------------------------------------


class _Nameless(type):
    @property
    def __name__(cls):
        raise SystemExit("no name")


class NamelessError(BaseException, metaclass=_Nameless):
    pass


def test_an_exception_whose_type_has_no_readable_name_becomes_a_message():
    def raises(q, k, v, mask=None):
        raise NamelessError("odd")

    result = tl.checks.check_attention(raises)
    assert not result and "object" in result.message, result.message


class ClasslessCallable:
    """An object whose ``__class__`` raises (``isinstance`` asks for it)."""

    @property
    def __class__(self):
        raise SystemExit("no class")

    def __call__(self, *args):
        return 1


@pytest.mark.parametrize("check", ["check_positional_encoding", "check_causal_decoder"])
def test_an_object_whose_class_cannot_be_read_gets_a_message(check):
    result = getattr(tl.checks, check)(ClasslessCallable())
    assert isinstance(result, tl.checks.CheckResult) and not result, result.message


def test_a_with_cache_option_that_is_no_bool_gets_a_message():
    class Undecided:
        def __bool__(self):
            raise SystemExit("neither")

    result = tl.checks.check_causal_mask(lambda t: tl.causal_mask(t)[0, 0], with_cache=Undecided())
    assert not result and "with_cache" in result.message, result.message


# --- hangs: containers that never end -------------------------------------------------------------


class _Endless:
    """Items without end; fails the test (not hangs it) once more than a few thousand are read."""

    def __init__(self, item):
        self.item, self.read = item, 0

    def __iter__(self):
        while True:
            self.read += 1
            assert self.read < 10_000, "the check reads an endless container to its end"
            yield self.item


class EndlessTuple(tuple):
    def __iter__(self):
        return iter(_Endless(self[0]))

    def __len__(self):
        return 2


class EndlessDict(dict):
    def items(self):
        return iter(_Endless((("e", "s"), 1)))

    def __iter__(self):
        return iter(_Endless(("e", "s")))


class EndlessMapping(Mapping):
    def __getitem__(self, key):
        return 1

    def __len__(self):
        return 1

    def __iter__(self):
        return iter(_Endless(("x", "y")))


@pytest.mark.parametrize(
    "returns",
    [
        lambda words: EndlessTuple((("e", "s"), {})),
        lambda words: (("e", "s"), EndlessDict({("n", "e", "w", "es", "t"): 6})),
        lambda words: (("e", "s"), EndlessMapping()),
        lambda words: (EndlessTuple(("e", "s")), {}),
    ],
)
def test_merge_step_reads_a_bounded_part_of_what_it_is_given(returns):
    result = tl.checks.check_merge_step(returns)
    assert not result and "reads an endless" not in result.message, result.message


def test_mask_tokens_reads_a_bounded_part_of_what_it_is_given():
    result = tl.checks.check_mask_tokens(lambda tokens, *args: EndlessTuple((tokens, tokens)))
    assert not result and "reads an endless" not in result.message, result.message


# --- state that survives a check ------------------------------------------------------------------


class HandMadeMHA(nn.Module):
    """Multi-head attention written by hand (no library function), scaled by ``scale``."""

    def __init__(self, d_model, num_heads, scale=True):
        super().__init__()
        self.h, self.scale = num_heads, scale
        self.w_q, self.w_k, self.w_v, self.w_o = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(4)
        )

    def forward(self, query, key, value, mask=None):
        b, t_q, d = query.shape
        q, k, v = (
            w(x).view(b, x.size(1), self.h, -1).transpose(1, 2)
            for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        scores = q @ k.transpose(-2, -1) / (math.sqrt(q.size(-1)) if self.scale else 1.0)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.exp(scores - scores.amax(-1, keepdim=True))
        weights = weights / weights.sum(-1, keepdim=True)
        return self.w_o((weights @ v).transpose(1, 2).reshape(b, t_q, d))


def _unscaled(q, k, v, mask=None, **kwargs):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1).nan_to_num(0.0)
    return weights @ v, weights


class PatchingUnscaledMHA(HandMadeMHA):
    """Unscaled, and its ``__init__`` makes the library's attention unscaled too."""

    def __init__(self, d_model, num_heads):
        super().__init__(d_model, num_heads, scale=False)
        tl.attention.scaled_dot_product_attention = _unscaled


def test_a_module_that_patches_the_library_cannot_change_the_reference():
    original = tl.attention.scaled_dot_product_attention
    result = tl.checks.check_multi_head_attention(PatchingUnscaledMHA)
    assert not result and "sqrt(d_model)" not in result.message, result.message
    # what student code patched during the check is undone after it
    assert tl.attention.scaled_dot_product_attention is original
    assert tl.checks.check_multi_head_attention(HandMadeMHA)


def test_functions_the_learner_patched_before_a_check_change_no_reference_and_stay_patched():
    original = (tl.attention.scaled_dot_product_attention, torch.softmax, F.softmax)
    try:
        tl.attention.scaled_dot_product_attention = _unscaled
        torch.softmax = F.softmax = lambda x, dim=None, **kwargs: x
        assert tl.checks.check_multi_head_attention(HandMadeMHA)
        unscaled = tl.checks.check_multi_head_attention(lambda d, h: HandMadeMHA(d, h, scale=False))
        assert not unscaled
        assert (tl.attention.scaled_dot_product_attention, torch.softmax) == (_unscaled, F.softmax)
    finally:
        tl.attention.scaled_dot_product_attention, torch.softmax, F.softmax = original


def test_a_method_patched_on_torch_tensor_is_hidden_from_the_reference_and_removed_after():
    def patches(logits, t):
        torch.Tensor.softmax = lambda self, dim=None, **kwargs: self.exp()
        return (logits / t).exp() / (logits / t).exp().sum(-1, keepdim=True)

    assert tl.checks.check_temperature_softmax(patches)
    assert "softmax" not in vars(torch.Tensor)
    assert torch.allclose(torch.zeros(2).softmax(-1), torch.full((2,), 0.5))


def test_settings_student_code_changes_are_restored_and_change_no_verdict():
    before = (
        torch.get_float32_matmul_precision(),
        torch._tensor_str.PRINT_OPTS.precision,
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.are_deterministic_algorithms_enabled(),
    )

    def changes_everything(q, k, v, mask=None):
        torch.set_float32_matmul_precision("medium")
        torch.set_printoptions(precision=1)
        torch.set_default_dtype(torch.float64)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_grad_enabled(False)
        with torch.enable_grad():
            return tl.scaled_dot_product_attention(q, k, v, mask)

    assert tl.checks.check_attention(changes_everything)
    after = (
        torch.get_float32_matmul_precision(),
        torch._tensor_str.PRINT_OPTS.precision,
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.are_deterministic_algorithms_enabled(),
    )
    assert after == before


# --- student code that never returns --------------------------------------------------------------

LIMIT_S = 1.0  # the time limit these tests give a check (engine.TIME_LIMIT_S), to stay quick


@pytest.fixture
def short_limit(monkeypatch):
    if not engine._can_limit():  # another thread or Windows: no limit, an endless loop would hang
        pytest.skip("no time limit here (SIGALRM only in the main thread, on POSIX)")
    monkeypatch.setattr(engine, "TIME_LIMIT_S", LIMIT_S)


def _endless(q, k, v, mask=None):
    while True:
        pass


def _endless_that_catches_exception(q, k, v, mask=None):
    while True:
        try:
            while True:
                pass
        except Exception:
            pass


def _sleeps(q, k, v, mask=None):
    time.sleep(3600)


def _right_but_too_late(q, k, v, mask=None):
    try:
        while True:
            pass
    except BaseException:  # swallows the alarm, then answers right: too late, still a failure
        return tl.scaled_dot_product_attention(q, k, v, mask)


def _runs_a_check_that_loops(q, k, v, mask=None):
    tl.checks.check_attention(_endless)  # the outer check's limit answers for it
    return tl.scaled_dot_product_attention(q, k, v, mask)


class _EndlessForward(tl.MultiHeadAttention):
    def forward(self, *args, **kwargs):
        while True:
            pass


def _timed(check, code):
    start = time.monotonic()
    result = check(code)
    return result, time.monotonic() - start


@pytest.mark.parametrize(
    "code",
    [
        _endless,
        _endless_that_catches_exception,
        _sleeps,
        _right_but_too_late,
        _runs_a_check_that_loops,
    ],
)
def test_student_code_that_never_returns_fails_the_check_in_bounded_time(short_limit, code):
    result, seconds = _timed(tl.checks.check_attention, code)
    assert not result and f"did not return within the {LIMIT_S:g} s" in result.message
    assert "your attention" in result.message and "endless loop" in result.message
    assert seconds < LIMIT_S + 3
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_an_endless_forward_fails_the_module_check_in_bounded_time(short_limit):
    result, seconds = _timed(tl.checks.check_multi_head_attention, _EndlessForward)
    assert not result and f"did not return within the {LIMIT_S:g} s" in result.message
    assert "your module" in result.message
    assert seconds < LIMIT_S + 3


def test_the_time_limit_is_for_all_the_calls_of_a_check_together(short_limit):
    def slow(q, k, v, mask=None):  # each call well within the limit, all of them not
        time.sleep(LIMIT_S / 3)
        return tl.scaled_dot_product_attention(q, k, v, mask)

    result, seconds = _timed(tl.checks.check_attention, slow)
    assert not result and "did not return within" in result.message
    assert seconds < LIMIT_S + 3


def test_the_time_limit_puts_back_the_previous_alarm_handler_and_timer(short_limit):
    rang: list = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: rang.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 60.0)
        assert not tl.checks.check_attention(_endless)
        handler, (left, _) = signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)
        assert rang == [] and 50 < left < 60
        assert handler is not engine._ring and handler is not previous
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # the learner's timer, shorter than a check
        assert tl.checks.check_attention(tl.scaled_dot_product_attention)
        deadline = time.monotonic() + 5
        while not rang and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rang == [signal.SIGALRM]  # it rang, in the learner's handler, during or after
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_correct_answers_pass_under_the_time_limit_and_in_another_thread():
    assert tl.checks.check_attention(tl.scaled_dot_product_attention)
    assert tl.checks.check_multi_head_attention(tl.MultiHeadAttention)
    results = []
    thread = threading.Thread(
        target=lambda: results.append(tl.checks.check_attention(tl.scaled_dot_product_attention))
    )
    thread.start()
    thread.join()
    assert results and results[0]  # no limit there (signals reach the main thread only)
