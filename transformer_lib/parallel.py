"""Data-parallel training with ``torch.distributed``: the same model in every process, a different shard of
the batch in each, and gradients averaged across processes after every backward pass.

Run it with two CPU processes (gloo backend):

    torchrun --standalone --nproc_per_node 2 -m transformer_lib.parallel

Each process computes the gradient of its shard; ``DistributedDataParallel`` all-reduces them into their
mean. When every shard holds the same number of target tokens, that mean is exactly the gradient of one big
batch, which :func:`compare_with_big_batch` checks.
"""


import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .data import CopyTask, make_batch
from .model import Transformer, TransformerConfig
from .runtime import seed_everything
from .train import LabelSmoothingLoss

__all__ = ["compare_with_big_batch", "main"]


def _gradients(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def compare_with_big_batch(rank: int, world_size: int, batch_size: int = 8) -> float:
    """In process ``rank`` of ``world_size`` (a process group must be initialised): the largest difference
    between the DDP-averaged gradient and the gradient of the whole batch computed in this one process."""
    task = CopyTask(min_len=6, max_len=6, seed=0)  # equal lengths: every shard has the same token count
    pairs = task.train_pairs(step=0, batch_size=batch_size * world_size)  # the same global batch everywhere
    loss_fn = LabelSmoothingLoss(0.1)

    seed_everything(0)  # identical initial weights in every process (DDP also broadcasts rank 0's)
    model = Transformer(TransformerConfig.cpu_tiny(len(task.vocab)).replace(dropout=0.0))
    big = make_batch(pairs, task.vocab)
    loss_fn(model(big.src, big.tgt_in), big.tgt_out).backward()
    big_batch_gradients = _gradients(model)
    model.zero_grad(set_to_none=True)

    ddp_model = DistributedDataParallel(model)
    shard = make_batch(pairs[rank * batch_size : (rank + 1) * batch_size], task.vocab)  # this process's part
    loss_fn(ddp_model(shard.src, shard.tgt_in), shard.tgt_out).backward()  # all-reduce happens here
    averaged = _gradients(model)
    return max((a - b).abs().max().item() for a, b in zip(averaged, big_batch_gradients, strict=True))


def main() -> None:
    """Entry point for ``torchrun``: compare, print from rank 0, fail unless the gradients agree."""
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # one core per process
    diff = compare_with_big_batch(rank, world_size)
    worst = torch.tensor(diff)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"{world_size} processes, gloo backend")
        print(f"max |DDP-averaged gradient - big-batch gradient| = {worst.item():.1e}")
        print("equal to one big batch:", worst.item() < 1e-6)
    dist.barrier()  # nobody tears the group down while another process still talks to it
    dist.destroy_process_group()
    if worst.item() >= 1e-6:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
