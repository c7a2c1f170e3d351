"""Data parallelism with two local processes (gloo on CPU): averaged gradients equal one big batch,
and several data-parallel steps lower the loss while the replicas stay identical."""

import subprocess
import sys

import torch.distributed as dist
import torch.multiprocessing as mp

from transformer_lib.training.parallel import compare_with_big_batch, train_data_parallel


def _worker(rank: int, world_size: int, rendezvous: str, results) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size
    )
    try:
        gradient_gap = compare_with_big_batch(rank, world_size)
        losses, replica_gap = train_data_parallel(rank, world_size, steps=20)
        results[rank] = (gradient_gap, losses, replica_gap)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_ddp_in_two_processes_matches_one_big_batch_and_trains(tmp_path):
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_worker, args=(2, str(tmp_path / "rendezvous"), results), nprocs=2, join=True)
        results = dict(results)
    assert sorted(results) == [0, 1]
    for gradient_gap, losses, replica_gap in results.values():
        assert gradient_gap < 1e-6  # the averaged gradient is the big batch's
        assert len(losses) == 20 and losses[-1] < losses[0] / 1.5  # the global loss went down
        assert replica_gap == 0.0  # every process took the same steps
    assert results[0][1] == results[1][1]  # both processes report the same global losses


def test_torchrun_entry_point_reports_agreement_and_training():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "transformer_lib.training.parallel",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "equal to one big batch: True" in result.stdout
    assert "data-parallel steps" in result.stdout
