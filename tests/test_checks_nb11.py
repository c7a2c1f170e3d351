"""Notebook 11's checks: the next-token loss, the sampling loop and BERT's masking recipe. Each
classic mistake gets its own hint; correct code written another way passes."""

from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checks_students import assert_check_leaves_random_state_alone

import transformer_lib as tl
from transformer_lib.teaching.checks import nb11_gpt_and_bert as entries

# --- the next-token loss --------------------------------------------------------------------------


def loss_by_hand(logits, tokens, pad_id):
    """Right, written without cross_entropy's ignore_index: log-softmax, gather, mask, mean."""
    log_probs = logits[:, :-1].log_softmax(dim=-1)  # (B, T - 1, V)
    targets = tokens[:, 1:]  # (B, T - 1)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T - 1)
    real = targets != pad_id
    return -(picked * real).sum() / real.sum()


def loss_with_view(logits, tokens, pad_id):
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.size(-1)), tokens[:, 1:].view(-1), ignore_index=pad_id
    )


def loss_unflattened(logits, tokens, pad_id):
    return F.cross_entropy(logits[:, :-1], tokens[:, 1:], ignore_index=pad_id)


def test_a_loss_written_by_hand_passes():
    assert tl.checks.check_next_token_loss(loss_by_hand)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (
            lambda lg, tk, pad: F.cross_entropy(lg.flatten(0, 1), tk.flatten(), ignore_index=pad),
            "no shift",
        ),
        (
            lambda lg, tk, pad: F.cross_entropy(
                lg[:, 1:].flatten(0, 1), tk[:, :-1].flatten(), ignore_index=pad
            ),
            "the wrong way",
        ),
        (
            lambda lg, tk, pad: F.cross_entropy(lg[:, :-1].flatten(0, 1), tk[:, 1:].flatten()),
            "counts padding",
        ),
        (partial(entries._masked_mean, by="inputs"), "read from the inputs"),
        (partial(entries._masked_mean, over_all=True), "divides by every position"),
        (partial(entries._masked_mean, per_row=True), "all non-padding targets at once"),
        (
            lambda lg, tk, pad: F.cross_entropy(
                lg[:, :-1].flatten(0, 1), tk[:, 1:].flatten(), ignore_index=pad, reduction="sum"
            ),
            "a sum",
        ),
        (
            lambda lg, tk, pad: F.cross_entropy(
                lg[:, :-1].flatten(0, 1), tk[:, 1:].flatten(), ignore_index=0
            ),
            "the `pad_id` argument",
        ),
        (lambda lg, tk, pad: entries._next_token_loss(lg, tk, pad).item(), "`.item()`"),
        (loss_with_view, "`.reshape(-1)`"),
        (loss_unflattened, "classes on axis 1"),
    ],
)
def test_each_classic_loss_mistake_gets_its_hint(code, words):
    result = tl.checks.check_next_token_loss(code)
    assert not result and words in result.message, result.message


# --- the sampling loop ----------------------------------------------------------------------------


def gumbel_max(model, prompt, max_new_tokens, temperature, generator):
    """Right, without multinomial: the argmax of logits / T plus Gumbel noise is a sample of
    softmax(logits / T)."""
    tokens = prompt
    for _ in range(max_new_tokens):
        logits = model(tokens[:, -model.config.max_len :])[:, -1] / temperature
        noise = -torch.log(-torch.log(torch.rand(logits.shape, generator=generator)))
        tokens = torch.cat([tokens, (logits + noise).argmax(-1, keepdim=True)], dim=1)
    return tokens


def sampler(
    *,
    context=lambda tokens, n: tokens[:, -n:],
    weights=lambda logits, t: (logits / t).softmax(-1),
    rng=True,
):
    def generate(model, prompt, max_new_tokens, temperature, generator):
        tokens = prompt
        for _ in range(max_new_tokens):
            w = weights(model(context(tokens, model.config.max_len))[:, -1], temperature)
            new = torch.multinomial(w, 1, generator=generator if rng else None)
            tokens = torch.cat([tokens, new], dim=1)
        return tokens

    return generate


def test_a_sampler_written_another_way_passes_and_the_reference_solution_uses_lm_generates_crop():
    assert tl.checks.check_generate(gumbel_max)
    # unnormalised weights
    assert tl.checks.check_generate(sampler(weights=lambda logits, t: (logits / t).exp()))


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (sampler(weights=lambda logits, t: logits / t), "sampled from the logits"),
        (
            sampler(weights=lambda logits, t: (logits / t).log_softmax(-1)),
            "not logits nor log-probabilities",
        ),
        (sampler(weights=lambda logits, t: logits.softmax(-1)), "temperature was ignored"),
        (
            sampler(weights=lambda logits, t: (logits * t).softmax(-1)),
            "multiplied by the temperature",
        ),
        (sampler(context=lambda tokens, n: tokens), "the last max_len tokens"),
        (sampler(context=lambda tokens, n: tokens[:, :n]), "the *first* max_len tokens"),
        (sampler(rng=False), "global stream"),
        (partial(entries._sampler, greedy=True), "greedy decoding"),
        (partial(entries._sampler, position=0), "first position's logits"),
        (lambda model, prompt, n, t, generator: prompt, "followed by the new tokens"),
    ],
)
def test_each_classic_sampling_mistake_gets_its_hint(code, words):
    result = tl.checks.check_generate(code)
    assert not result and words in result.message, result.message


# --- BERT's masking recipe ------------------------------------------------------------------------


def masking(*, pick=None, action=None, replacement="fresh", vocabulary="whole"):
    """BERT's recipe with a knob per way of being right on average and wrong in its randomness."""

    def mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator):
        maskable = ~torch.isin(tokens, torch.tensor(special_ids))
        index = torch.arange(tokens.numel()).view(tokens.shape)
        if pick == "stripes":
            picked = maskable & (index % 7 == 0)
        # a random phase: not the same for every generator, still stripes
        elif pick == "shifted stripes":
            picked = maskable & (index % 7 == torch.randint(7, (), generator=generator))
        else:
            picked = maskable & (torch.rand(tokens.shape, generator=generator) < rate)
        if action == "counter":
            draw = (picked.flatten().cumsum(0).view(tokens.shape) % 10).float() / 10
        else:
            draw = torch.rand(tokens.shape, generator=generator)
        # BERT's released code: any id, special tokens and [MASK] included
        if vocabulary == "whole":
            candidates = torch.arange(vocab_size)
        else:
            candidates = torch.tensor(
                [i for i in range(vocab_size) if i not in (*special_ids, mask_id)]
            )
        shape = (1,) if replacement == "one" else tokens.shape
        random_ids = candidates[torch.randint(len(candidates), shape, generator=generator)].expand(
            tokens.shape
        )
        if replacement == "next id":  # nothing random at all
            random_ids = candidates[(tokens + 1) % len(candidates)]
        inputs = torch.where(picked & (draw < 0.8), mask_id, tokens)
        inputs = torch.where(picked & (draw >= 0.8) & (draw < 0.9), random_ids, inputs)
        return inputs, torch.where(picked, tokens, tl.lm.IGNORE_INDEX)

    return mask_tokens


def test_berts_whole_vocabulary_replacement_passes_as_does_the_restricted_one():
    assert tl.checks.check_mask_tokens(masking(vocabulary="whole"))
    assert tl.checks.check_mask_tokens(masking(vocabulary="non-special"))


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (masking(replacement="one", vocabulary="non-special"), "repeat one token"),
        (masking(pick="stripes", action="counter"), "picked positions follow a pattern"),
        (
            masking(pick="stripes", action="counter", replacement="next id"),
            "nothing in it is random",
        ),
        (masking(pick="shifted stripes"), "picked positions follow a pattern"),
        (masking(action="counter"), "split follows a pattern"),
    ],
)
def test_a_recipe_right_on_average_but_not_random_gets_a_named_hint(code, words):
    result = tl.checks.check_mask_tokens(code)
    assert not result and words in result.message, result.message


def test_masking_from_the_global_random_stream_is_named():
    def global_stream(tokens, mask_id, vocab_size, special_ids, rate, generator):
        # generator not passed
        return tl.lm.mask_tokens(tokens, mask_id, vocab_size, special_ids, rate)

    result = tl.checks.check_mask_tokens(global_stream)
    assert not result and "global stream" in result.message, result.message


@pytest.mark.parametrize("check", ["check_next_token_loss", "check_generate", "check_mask_tokens"])
def test_the_new_checks_leave_the_learners_random_state_alone(check):
    assert_check_leaves_random_state_alone(check)


def test_check_mask_tokens_accepts_a_correct_recipe_that_draws_in_another_order():
    """Exactly round(rate * n) picks per row, chosen with randperm: correct, and its shares differ
    from the library's own draw by more than sampling noise around the expectation would allow."""

    def per_row(tokens, mask_id, vocab_size, special_ids, rate, generator):
        inputs, targets = tokens.clone(), torch.full_like(tokens, -100)
        allowed = torch.tensor(
            [i for i in range(vocab_size) if i not in special_ids and i != mask_id]
        )
        for b in range(tokens.size(0)):
            pos = (~torch.isin(tokens[b], torch.tensor(special_ids))).nonzero()[:, 0]
            chosen = pos[torch.randperm(len(pos), generator=generator)[: round(rate * len(pos))]]
            targets[b, chosen] = tokens[b, chosen]
            action = torch.rand(len(chosen), generator=generator)
            inputs[b, chosen[action < 0.8]] = mask_id
            swapped = chosen[(action >= 0.8) & (action < 0.9)]
            inputs[b, swapped] = allowed[
                torch.randint(len(allowed), (len(swapped),), generator=generator)
            ]
        return inputs, targets

    assert tl.checks.check_mask_tokens(per_row)


def test_check_lm_parameter_count_accepts_a_numpy_integer():
    def count(config):
        with torch.device("meta"):
            return np.int64(sum(p.numel() for p in tl.DecoderOnlyLM(config).parameters()))

    assert tl.checks.check_lm_parameter_count(count)


def test_targets_of_zero_instead_of_ignore_index_get_their_hint():
    def zero_targets(tokens, mask_id, vocab_size, special_ids, rate, generator):
        inputs, targets = tl.lm.mask_tokens(
            tokens, mask_id, vocab_size, special_ids, rate, generator
        )
        return inputs, torch.where(targets == tl.lm.IGNORE_INDEX, 0, targets)

    result = tl.checks.check_mask_tokens(zero_targets)
    assert not result and "IGNORE_INDEX" in result.message and "target 0" in result.message, (
        result.message
    )


def test_a_wrong_tuple_from_mask_tokens_names_its_items():
    result = tl.checks.check_mask_tokens(lambda *args: (1, 2))
    assert not result and "got (int, int)" in result.message, result.message
