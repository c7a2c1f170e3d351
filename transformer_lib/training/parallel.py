"""Data-parallel training with ``torch.distributed``: one model per process, a shard of each batch,
gradients averaged after every backward pass. Two CPU processes (gloo):
``torchrun --standalone --nproc_per_node 2 -m transformer_lib.training.parallel``.

With equal target tokens per shard, the averaged gradient is the big batch's gradient
(:func:`compare_with_big_batch`); :func:`train_data_parallel` then trains with identical replicas.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..model.transformer import Transformer, TransformerConfig
from .data import CopyTask, make_batch
from .runtime import seed_everything
from .train import LabelSmoothingLoss

__all__ = ["compare_with_big_batch", "train_data_parallel", "main"]


def _gradients(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def _equal_length_task() -> CopyTask:
    """Strings of one length: every shard of a batch has the same number of target tokens."""
    return CopyTask(min_len=6, max_len=6, seed=0)


def _fresh_model(task: CopyTask) -> Transformer:
    seed_everything(0)  # identical initial weights in every process (DDP also broadcasts rank 0's)
    return Transformer(TransformerConfig.cpu_tiny(len(task.vocab)).replace(dropout=0.0))


def compare_with_big_batch(rank: int, world_size: int, batch_size: int = 8) -> float:
    """In process ``rank`` of ``world_size`` (a process group must be initialised): the largest
    difference between the DDP-averaged gradient and the gradient of the whole batch computed in
    this one process."""
    task = _equal_length_task()
    # the same global batch everywhere
    pairs = task.train_pairs(step=0, batch_size=batch_size * world_size)
    loss_fn = LabelSmoothingLoss(0.1)

    model = _fresh_model(task)
    big = make_batch(pairs, task.vocab)
    loss_fn(model(big.src, big.tgt_in), big.tgt_out).backward()
    big_batch_gradients = _gradients(model)
    model.zero_grad(set_to_none=True)

    ddp_model = DistributedDataParallel(model)
    # this process's part
    shard = make_batch(pairs[rank * batch_size : (rank + 1) * batch_size], task.vocab)
    loss_fn(ddp_model(shard.src, shard.tgt_in), shard.tgt_out).backward()  # all-reduce happens here
    averaged = _gradients(model)
    return max(
        (a - b).abs().max().item() for a, b in zip(averaged, big_batch_gradients, strict=True)
    )


def train_data_parallel(
    rank: int, world_size: int, steps: int = 40, batch_size: int = 16, lr: float = 3e-3
) -> tuple[list[float], float]:
    """Train the copy task with DDP for ``steps`` steps; process ``rank`` takes its ``batch_size``
    pairs of every global batch of ``batch_size * world_size``. Returns the loss of the whole global
    batch at each step (the processes' losses averaged with an all-reduce; equal shards make that
    the big batch's mean) and, after training, the largest difference between this process's weights
    and any other process's."""
    task = _equal_length_task()
    ddp_model = DistributedDataParallel(_fresh_model(task))
    optimizer = torch.optim.Adam(ddp_model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = LabelSmoothingLoss(0.0)
    losses = []
    for step in range(steps):
        # the same global batch in every process
        pairs = task.train_pairs(step, batch_size * world_size)
        shard = make_batch(pairs[rank * batch_size : (rank + 1) * batch_size], task.vocab)
        loss = loss_fn(ddp_model(shard.src, shard.tgt_in), shard.tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP averages the gradients across processes here
        optimizer.step()  # the same averaged gradient, so the same step, in every process
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)  # sum over processes
        losses.append(global_loss.item() / world_size)
    weights = torch.cat([p.detach().flatten() for p in ddp_model.parameters()])  # (num_parameters,)
    highest, lowest = weights.clone(), weights.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    return losses, (highest - lowest).max().item()


def main() -> None:
    """Entry point for ``torchrun``: compare gradients, then train; print from rank 0; fail unless
    the gradients agree, the replicas stay identical and the loss went down."""
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)  # one core per process
    worst = torch.tensor(compare_with_big_batch(rank, world_size))
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    losses, replica_gap = train_data_parallel(rank, world_size)
    if rank == 0:
        print(f"{world_size} processes, gloo backend")
        print(f"max |DDP-averaged gradient - big-batch gradient| = {worst.item():.1e}")
        print("equal to one big batch:", worst.item() < 1e-6)
        print(f"training {len(losses)} data-parallel steps, loss of the global batch:")
        for step in (0, *range(9, len(losses), 10)):
            print(f"  step {step + 1:3d}: {losses[step]:.3f}")
        print(f"max weight difference between processes after training: {replica_gap:.1e}")
    dist.barrier()  # nobody tears the group down while another process still talks to it
    dist.destroy_process_group()
    failed = worst.item() >= 1e-6 or replica_gap > 1e-6 or not losses[-1] < losses[0] / 2
    # Skip the interpreter's teardown, where gloo's threads can abort a finished run (SIGABRT;
    # pytorch/pytorch#179291, measured in results/README.md).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main()
