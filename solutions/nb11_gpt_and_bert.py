"""Notebook 11 · GPT and BERT from the same blocks: the GPT block, BERT's masking recipe, a parameter count."""

import torch

import transformer_lib as tl
from transformer_lib import lm


def my_gpt_block(layer, x):
    """An encoder layer whose self-attention may not look ahead: the causal mask ``(1, 1, T, T)``."""
    return layer(x, tl.causal_mask(x.size(1)))  # (B, T, d_model)


def my_mask_tokens(tokens, mask_id, vocab_size, special_ids, rate, generator):
    """BERT's 80/10/10 recipe on the positions whose token is not special; targets only where picked."""
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


def my_parameter_count(config):
    """Embedding (tied to the output), learned positions, N blocks, and the final LayerNorm of a pre-LN stack."""
    d, d_ff = config.d_model, config.d_ff
    attention = 4 * (d * d + d)  # w_q, w_k, w_v, w_o with biases
    feed_forward = d * d_ff + d_ff + d_ff * d + d
    norms = 2 * (2 * d)  # two LayerNorms, each a gain and a shift
    total = config.vocab_size * d + config.num_layers * (attention + feed_forward + norms)
    if config.positional == "learned":
        total += config.max_len * d
    if config.norm_first:
        total += 2 * d  # the final LayerNorm
    return total


ANSWERS = {
    "4": (
        "A masked language model is trained to predict hidden tokens from both sides: at every position it has "
        "seen the right-hand context during training. Writing left to right, the right-hand context does not exist "
        "yet, so the model is asked something it never learned (a row of <mask> tokens with nothing after them), "
        "and it gives one independent guess per masked position, not a joint distribution over the whole line: "
        "filling five masks at once can pick five characters that are each plausible but do not fit together. To "
        "sample a line you would have to generate iteratively: append one <mask>, predict it, keep the guess, "
        "append the next <mask>, and so on (or start from all masks and re-mask and re-predict the least confident "
        "positions over several rounds, as later non-autoregressive and diffusion-style models do). Each step runs "
        "the whole bidirectional model again, with no KV cache (earlier positions change when later ones are "
        "added), and the result is still not a proper sample from one probability model. A decoder-only model "
        "factorises P(text) = prod_t P(x_t | x_<t) by construction, so sampling left to right is exact and cheap."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_gpt_block": (lambda layer, x: layer(x), "causal mask"),
    "my_mask_tokens": (
        lambda tokens, mask_id, v, specials, rate, generator: lm.mask_tokens(tokens, mask_id, v, (), rate, generator),
        "special_ids were ignored",
    ),
    "my_parameter_count": (
        lambda config: tl.count_parameters(tl.DecoderOnlyLM(config.replace(max_len=1)))["total"],
        "max_len x d_model",
    ),
}
