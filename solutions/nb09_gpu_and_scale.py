"""Notebook 09 · GPU and scale: the loss each data-parallel process backpropagates."""

import torch.nn.functional as F


def my_shard_loss(logits, target, global_tokens, world_size):
    """Cross-entropy summed over this shard's non-pad tokens, times ``world_size`` (DDP divides the summed
    gradients by it), divided by ``global_tokens``: the average over processes is the big batch's mean."""
    total = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum")
    return total * world_size / global_tokens


ANSWERS = {
    "2": (
        "float16's range: its smallest normal number is about 6e-5 (subnormals reach 6e-8), while bfloat16 keeps "
        "float32's 8-bit exponent (down to about 1e-38) and gives up mantissa bits instead. Gradients of a loss "
        "averaged over many tokens are often smaller than 1e-5 to 1e-8, so in float16 they underflow to zero and "
        "those weights stop learning. The GradScaler multiplies the loss by a large factor before backward, so the "
        "gradients land in float16's range, unscales them before the optimizer step, and skips steps whose "
        "gradients overflowed to inf/NaN (lowering the factor)."
    ),
}
