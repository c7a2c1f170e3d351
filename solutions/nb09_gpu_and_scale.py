"""Notebook 09 · GPU and scale: the loss each data-parallel process backpropagates."""

import torch.nn.functional as F


def my_shard_loss(logits, target, global_tokens, world_size):
    """Cross-entropy summed over this shard's non-pad tokens, times ``world_size`` (DDP divides the summed
    gradients by it), divided by ``global_tokens``: the average over processes is the big batch's mean."""
    total = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum")
    return total * world_size / global_tokens


ANSWERS = {
    "2": (
        "float16's range. It has 5 exponent bits: its smallest normal number is 2^-14, about 6.1e-5, and its "
        "smallest subnormal 2^-24, about 6e-8; anything smaller rounds to zero. bfloat16 keeps float32's 8 exponent "
        "bits (smallest normal about 1.2e-38) and gives up mantissa bits instead, so it has float32's range. Many "
        "gradient values, especially of weights deep in the network and of a loss averaged over many tokens, are "
        "far below 1e-5: in float16 they lose precision or underflow to zero, and those weights stop learning "
        "(Micikevicius et al. 2018, 'Mixed Precision Training', plot activation gradients of a detector network, "
        "a large share of them below float16's range). The GradScaler "
        "multiplies the loss by a large factor before backward, so the gradients land inside float16's range, "
        "divides them by the same factor before the optimizer step, and skips a step whose gradients overflowed to "
        "inf or NaN, lowering the factor."
    ),
}
