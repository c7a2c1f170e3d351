"""Data parallelism with two local processes (gloo on CPU): averaged gradients equal one big batch."""

import subprocess
import sys

import torch.distributed as dist
import torch.multiprocessing as mp

from transformer_lib.parallel import compare_with_big_batch


def _worker(rank: int, world_size: int, rendezvous: str, results) -> None:
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size)
    try:
        results[rank] = compare_with_big_batch(rank, world_size)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_ddp_gradients_equal_one_big_batch_in_two_processes(tmp_path):
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_worker, args=(2, str(tmp_path / "rendezvous"), results), nprocs=2, join=True)
        differences = dict(results)
    assert sorted(differences) == [0, 1]
    assert max(differences.values()) < 1e-6


def test_torchrun_entry_point_reports_agreement():
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "transformer_lib.parallel"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "equal to one big batch: True" in result.stdout
