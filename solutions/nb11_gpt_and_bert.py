"""Notebook 11 · GPT and BERT from the same blocks: the next-token loss, the sampling loop, BERT's
masking recipe."""

import torch
import torch.nn.functional as F

from transformer_lib import lm


def my_next_token_loss(logits, tokens, pad_id):
    """The logits at position t score token t + 1; a target that is padding is skipped; the mean
    over the rest."""
    predictions = logits[:, :-1]  # (B, T - 1, V): the last position has no next token
    targets = tokens[:, 1:]  # (B, T - 1): each position's next token
    return F.cross_entropy(predictions.flatten(0, 1), targets.flatten(), ignore_index=pad_id)


def my_generate(model, prompt, max_new_tokens, temperature, generator):
    """Append one sampled token at a time: the model reads the last max_len tokens, the last
    position's logits divided by the temperature become probabilities, and the next token is drawn
    from them with ``generator``."""
    tokens = prompt  # (B, T0)
    for _ in range(max_new_tokens):
        context = tokens[:, -model.config.max_len :]  # (B, <= max_len): the model reads no more
        logits = model(context)[:, -1] / temperature  # (B, V): what comes after the last token
        probs = logits.softmax(dim=-1)  # (B, V)
        new = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        tokens = torch.cat([tokens, new], dim=1)  # (B, t + 1)
    return tokens


def my_mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator):
    """BERT's 80/10/10 recipe on the positions whose token is not special; targets only where
    picked."""
    maskable = ~torch.isin(tokens, torch.tensor(list(special_ids)))  # (B, T)
    picked = maskable & (torch.rand(tokens.shape, generator=generator) < rate)
    action = torch.rand(tokens.shape, generator=generator)  # which of 80 / 10 / 10
    to_mask = picked & (action < 0.8)
    to_random = picked & (action >= 0.8) & (action < 0.9)
    allowed = ~torch.isin(torch.arange(vocab_size), torch.tensor([*special_ids, mask_id]))
    candidates = allowed.nonzero()[:, 0]  # tokens a random replacement may take
    random_ids = candidates[torch.randint(len(candidates), tokens.shape, generator=generator)]
    inputs = torch.where(to_mask, mask_id, tokens)
    inputs = torch.where(to_random, random_ids, inputs)
    targets = torch.where(picked, tokens, lm.IGNORE_INDEX)
    return inputs, targets


ANSWERS = {
    "4": (
        "A masked language model is trained to predict hidden tokens from both sides: at every "
        "position it has "
        "seen the right-hand context during training. Writing left to right, the right-hand "
        "context does not exist "
        "yet, so the model is asked something it never learned (a row of <mask> tokens with "
        "nothing after them), "
        "and it gives one independent guess per masked position, not a joint distribution over the "
        "whole line: "
        "filling five masks at once can pick five characters that are each plausible but do not "
        "fit together. To "
        "sample a line you would have to generate iteratively: append one <mask>, predict it, keep "
        "the guess, "
        "append the next <mask>, and so on (or start from all masks and re-mask and re-predict the "
        "least confident "
        "positions over several rounds, as later non-autoregressive and diffusion-style models "
        "do). Each step runs "
        "the whole bidirectional model again, with no KV cache (earlier positions change when "
        "later ones are "
        "added), and the result is still not a proper sample from one probability model. A "
        "decoder-only model "
        "factorises P(text) = prod_t P(x_t | x_<t) by construction, so sampling left to right is "
        "exact and cheap."
    ),
}


def _sampled_from_logits(model, prompt, max_new_tokens, temperature, generator):
    """The classic slip: multinomial on the logits (no softmax)."""
    tokens = prompt
    for _ in range(max_new_tokens):
        logits = model(tokens[:, -model.config.max_len :])[:, -1] / temperature
        tokens = torch.cat([tokens, torch.multinomial(logits, 1, generator=generator)], dim=1)
    return tokens


# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_next_token_loss": (
        lambda logits, tokens, pad_id: F.cross_entropy(
            logits.flatten(0, 1), tokens.flatten(), ignore_index=pad_id
        ),
        "no shift",
    ),
    "my_generate": (_sampled_from_logits, "sampled from the logits"),
    "my_mask_tokens": (
        lambda tokens, mask_id, v, specials, rate, generator: lm.mask_tokens(
            tokens, mask_id, v, (), rate, generator
        ),
        "special_ids were ignored",
    ),
}
