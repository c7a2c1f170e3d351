"""Notebook 09 · GPU and scale: the loss each data-parallel process backpropagates."""

import torch.nn.functional as F


def my_shard_loss(logits, target, global_tokens, world_size):
    """Cross-entropy summed over this shard's non-pad tokens, times ``world_size`` (DDP divides the
    summed gradients by it), divided by ``global_tokens``: the average over processes is the big
    batch's mean."""
    total = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=0, reduction="sum")
    return total * world_size / global_tokens


ANSWERS = {
    "2": (
        "Every query must still meet every key: the T x T dot products q·k and the weighted sum "
        "over T values are O(T^2 · d_k) arithmetic per head whatever the kernel does; a fused "
        "kernel only avoids storing the T x T matrix and moving it through main memory. To grow "
        "more slowly the model itself must change so that each query sees fewer keys or the keys "
        "are summarised: local or sliding-window attention (each query sees w keys: O(T · w)), "
        "sparse patterns (Child, Gray, Radford and Sutskever, 2019, 'Generating Long Sequences "
        "with Sparse Transformers'), or linear attention that replaces softmax(QK^T)V by a kernel "
        "feature map (Katharopoulos, Vyas, Pappas and Fleuret, 2020, 'Transformers are RNNs: Fast "
        "Autoregressive Transformers with Linear Attention'). Each changes what the model can "
        "compute, not just how fast."
    ),
}

# A typical wrong answer to each exercise, and words that the hint its check gives must contain
# (tests/test_solutions.py feeds each to the check).
WRONG_ANSWERS = {
    "my_shard_loss": (
        lambda logits, target, n, w: F.cross_entropy(
            logits.flatten(0, 1), target.flatten(), ignore_index=0
        ),
        "own tokens",
    ),
}
