"""The benchmark's plumbing on tiny sizes. It asserts what it measures, never how fast: timings
belong to `python -m transformer_lib.bench`, not to tests."""

import pytest
import torch

import transformer_lib as tl
from transformer_lib import bench


def test_compare_attention_reports_every_variant_against_pytorch():
    rows = bench.compare_attention(
        batch=2, length=8, d_model=16, num_heads=2, device=torch.device("cpu"), repeats=1
    )
    assert [r["variant"].split(",")[0] for r in rows] == [
        "nn.MultiheadAttention(need_weights=False)",
        "ours",
        "ours",
    ]
    assert rows[0]["forward_ratio"] == 1.0
    assert all(r["forward_s"] > 0 and r["forward_backward_s"] > 0 for r in rows)


def test_attention_growth_computes_the_weights_size():
    rows = bench.attention_growth(
        lengths=(8, 16), batch=2, d_model=16, num_heads=2, device=torch.device("cpu"), repeats=1
    )
    assert [r["T"] for r in rows] == [8, 16]
    assert rows[1]["weights_MiB"] == 2 * 2 * 16 * 16 * 4 / 2**20
    assert all(r["fast_s"] > 0 and r["explicit_s"] > 0 for r in rows)


def test_main_prints_both_tables(capsys, monkeypatch):
    compare, growth = bench.compare_attention, bench.attention_growth
    monkeypatch.setattr(
        bench,
        "compare_attention",
        lambda **kw: compare(
            batch=1, length=4, d_model=8, num_heads=2, device=kw["device"], repeats=1
        ),
    )
    monkeypatch.setattr(
        bench,
        "attention_growth",
        lambda **kw: growth(
            lengths=(4,), batch=1, d_model=8, num_heads=2, device=kw["device"], repeats=1
        ),
    )
    memory = bench.attention_memory
    monkeypatch.setattr(
        bench,
        "attention_memory",
        lambda **kw: memory(lengths=(4,), batch=1, d_model=8, num_heads=2, device=kw["device"]),
    )
    speed = bench.beam_search_speed
    monkeypatch.setattr(
        bench,
        "beam_search_speed",
        lambda **kw: speed(
            num_sources=2, max_len=3, config=tiny_date_config(), device=kw["device"], repeats=1
        ),
    )
    grouped = bench.grouped_query_decoding
    monkeypatch.setattr(
        bench,
        "grouped_query_decoding",
        lambda **kw: grouped(
            new_tokens=2, batch=1, config=tiny_llama_config(), device=kw["device"], repeats=1
        ),
    )
    throughput = bench.training_throughput
    monkeypatch.setattr(
        bench,
        "training_throughput",
        lambda **kw: throughput(device=kw["device"], steps=1, translation_pairs=200),
    )
    _shrink_the_new_parts(monkeypatch)
    bench.main(["--device", "cpu", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "device: this CPU" in out
    assert "Mixed precision on this CPU" in out and "bf16" in out
    assert "share of the best square-GEMM rate" in out and "stock torch.nn.Transformer" in out
    assert "Fused attention backends" not in out  # CUDA only
    assert "Training throughput" in out
    assert "Grouped-query attention" in out and "multi-query" in out and "cache bytes/token" in out
    assert (
        "nn.MultiheadAttention(need_weights=False)" in out
        and "Growth with T" in out
        and "Peak memory" in out
    )
    assert "Beam search" in out and "one source at a time" in out and "sentences/s" in out


def test_attention_memory_measures_a_quadratic_explicit_peak_and_a_smaller_fused_one():
    rows = bench.attention_memory(
        lengths=(64, 128, 256), batch=2, d_model=32, num_heads=2, device=torch.device("cpu")
    )
    assert [r["T"] for r in rows] == [64, 128, 256]
    for row in rows:  # the explicit path holds at least the (B, h, T, T) weights at its peak
        assert row["explicit_peak_MiB"] >= row["weights_MiB"] > 0
        assert 0 < row["fast_peak_MiB"] < row["explicit_peak_MiB"]
    # x16 in T^2 over two doublings
    assert rows[-1]["explicit_peak_MiB"] > 8 * rows[0]["explicit_peak_MiB"]


def test_peak_memory_counts_a_tensor_that_lives_inside_the_call():
    # 4 MiB, freed inside
    peak = bench.peak_memory_MiB(lambda: torch.ones(2**20).sum(), torch.device("cpu"))
    assert peak >= 4.0


def test_peak_memory_on_the_cpu_writes_nothing_to_stderr(capfd):
    """The profiler's native `USDT: ... profiler_start/stop` lines must not reach stderr (they
    clutter notebook 09)."""
    peak = bench.peak_memory_MiB(lambda: torch.ones(2**18).sum(), torch.device("cpu"))
    captured = capfd.readouterr()
    assert peak > 0
    assert "profiler_start" not in captured.err and "USDT" not in captured.err, captured.err


def test_recipe_mode_reports_time_and_exact_match(capsys, monkeypatch):
    monkeypatch.setattr(
        bench,
        "recipe_check",
        lambda: {"train_s": 31.5, "valid_exact_match": 0.998, "test_exact_match": 1.0},
    )
    bench.main(["--recipe"])
    out = capsys.readouterr().out
    assert "trained in 31.5 s; exact match: validation 0.998, test 1.000" in out
    assert "Self-attention" not in out  # only the recipe runs


def test_recipe_check_trains_the_date_task_and_scores_both_held_out_splits(monkeypatch):
    import transformer_lib as tl

    monkeypatch.setattr(
        bench,
        "train_task",
        lambda task, seed, progress: tl.train_task(
            task, steps=20, warmup=5, seed=seed, progress=progress
        ),
    )
    result = bench.recipe_check()
    assert set(result) == {"train_s", "valid_exact_match", "test_exact_match"}
    assert 0.0 <= result["valid_exact_match"] <= 1.0 and result["train_s"] > 0


def test_time_call_summarises_the_runs_as_asked(monkeypatch):
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])  # three runs of 3, 1 and 2 "seconds"
    monkeypatch.setattr(bench.time, "perf_counter", lambda: next(clock))
    assert (
        bench.time_call(lambda: None, torch.device("cpu"), repeats=3, warmup=0, summary=min) == 1.0
    )
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])
    # the median by default
    assert bench.time_call(lambda: None, torch.device("cpu"), repeats=3, warmup=0) == 2.0


def tiny_date_config():
    return tl.TransformerConfig.cpu_tiny(len(tl.DateTask(num_test=1, num_valid=0).vocab))


def test_beam_search_speed_times_both_modes_on_the_same_sources():
    rows = bench.beam_search_speed(
        num_sources=3,
        beam_width=2,
        max_len=4,
        config=tiny_date_config(),
        device=torch.device("cpu"),
        repeats=1,
    )
    assert [r["mode"] for r in rows] == ["batched (one call)", "one source at a time"]
    assert all(
        r["seconds"] > 0 and r["sentences_per_s"] == pytest.approx(3 / r["seconds"]) for r in rows
    )
    assert rows[1]["speedup"] == 1.0 and rows[0]["speedup"] == pytest.approx(
        rows[1]["seconds"] / rows[0]["seconds"]
    )
    assert all(r["same_outputs"] for r in rows)  # batching changes the speed, never the search


def tiny_llama_config():
    return tl.LMConfig.llama_like(50, d_model=16, num_heads=4, d_ff=32, num_layers=1, max_len=32)


def test_grouped_query_decoding_shrinks_the_cache_by_the_ratio_of_key_value_heads():
    rows = bench.grouped_query_decoding(
        new_tokens=3, batch=2, config=tiny_llama_config(), device=torch.device("cpu"), repeats=1
    )
    assert [r["kv_heads"] for r in rows] == [4, 1]  # h, then h/4 = 1 = multi-query, listed once
    by_heads = {r["kv_heads"]: r for r in rows}
    assert by_heads[4]["kind"] == "multi-head" and by_heads[1]["kind"] == "multi-query"
    # 2 (k and v) * 1 layer * h_kv * d_k (4) * 4 bytes
    assert (
        by_heads[4]["cache_bytes_per_token"]
        == 2 * 1 * 4 * 4 * 4
        == 4 * by_heads[1]["cache_bytes_per_token"]
    )
    assert all(r["ms_per_token"] > 0 for r in rows)


def _shrink_the_new_parts(monkeypatch):
    """Tiny sizes for the parts main() runs after the attention tables."""
    precision, share, versus = (
        bench.mixed_precision_steps,
        bench.attention_gemm_share,
        bench.versus_torch_transformer,
    )
    monkeypatch.setattr(
        bench,
        "mixed_precision_steps",
        lambda **kw: precision(device=kw["device"], repeats=1, cases=[_tiny_case()]),
    )
    monkeypatch.setattr(
        bench,
        "attention_gemm_share",
        lambda **kw: share(
            device=kw["device"],
            dtype=kw["dtype"],
            batch=1,
            length=4,
            d_model=8,
            num_heads=2,
            repeats=1,
            rounds=1,
            gemm_sizes=(16,),
        ),
    )
    monkeypatch.setattr(
        bench,
        "versus_torch_transformer",
        lambda **kw: versus(device=kw["device"], steps=1, translation_pairs=60, max_tokens=300),
    )


def _tiny_case():
    task = tl.DateTask(num_test=1, num_valid=0)
    return ("cpu_tiny, 4 dates", tiny_date_config(), lambda: task.train_batch(0, 4))


def test_main_runs_only_the_parts_asked_for(capsys, monkeypatch):
    _shrink_the_new_parts(monkeypatch)
    bench.main(["--device", "cpu", "--repeats", "1", "--parts", "precision"])
    out = capsys.readouterr().out
    assert "Mixed precision" in out and "Self-attention" not in out and "GEMM" not in out
    with pytest.raises(SystemExit):
        bench.main(["--parts", "precision,colour"])
    assert "--parts takes names from" in capsys.readouterr().err


def test_mixed_precision_times_each_precision_against_float32(monkeypatch):
    rows = bench.mixed_precision_steps(
        device=torch.device("cpu"), repeats=1, cases=[_tiny_case()], precisions=("fp32", "bf16")
    )
    assert [(r["case"], r["precision"]) for r in rows] == [
        ("cpu_tiny, 4 dates", "fp32"),
        ("cpu_tiny, 4 dates", "bf16"),
    ]
    assert rows[0]["speedup"] == 1.0
    assert rows[1]["speedup"] == pytest.approx(rows[0]["ms_per_step"] / rows[1]["ms_per_step"])
    # a precision the device lacks is reported, not timed
    real = tl.training.train._check_precision

    def no_fp16(precision, device):
        if precision == "fp16":
            raise ValueError("precision='fp16' is not supported on device 'cpu'")
        return real(precision, device)

    monkeypatch.setattr(tl.training.train, "_check_precision", no_fp16)
    rows = bench.mixed_precision_steps(
        device=torch.device("cpu"), repeats=1, cases=[_tiny_case()], precisions=("fp32", "fp16")
    )
    assert rows[1]["ms_per_step"] is None and "not supported" in rows[1]["unsupported"]


def test_the_default_precision_cases_are_a_launch_bound_and_a_large_model():
    cases = bench._precision_cases(torch.device("cpu"))
    assert [label for label, _, _ in cases] == [
        "cpu_small, 32 dates",
        "d_model 512, N=1, 6 x 32 tokens",
    ]
    assert cases[1][2]().src.shape == (6, 32)


def test_the_larger_cpu_precision_case_does_more_matrix_work_than_the_small_one():
    """Notebook 09 calls the second case the larger one: its forward pass (and so its step) counts
    2.7 times the small one's FLOPs (the docstring's 9.1 against 3.4 GFLOP per training step)."""
    from torch.utils.flop_counter import FlopCounterMode

    counts = []
    for _, config, make in bench._precision_cases(torch.device("cpu")):
        batch, model = make(), tl.Transformer(config).eval()
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(batch.src, batch.tgt_in)
        counts.append(counter.get_total_flops())
    assert counts[1] / counts[0] == pytest.approx(2.7, abs=0.05)


def test_attention_share_of_the_gemm_rate_is_a_fraction_of_a_measured_rate():
    assert bench.gemm_rate(torch.device("cpu"), sizes=(32, 64), repeats=1) > 0
    rows = bench.attention_gemm_share(
        device=torch.device("cpu"),
        batch=1,
        length=8,
        d_model=16,
        num_heads=2,
        repeats=1,
        rounds=3,
        gemm_sizes=(32, 64),
    )
    assert [r["variant"] for r in rows] == [
        "ours, fast path",
        "nn.MultiheadAttention",
        "one projection (B*T, d) @ (d, d)",
    ]
    for row in rows:
        assert row["gemm_size"] in (32, 64) and row["rounds"] == 3
        assert row["dtype"] == "float32" and row["share"] > 0


def test_attention_share_is_the_median_of_ratios_timed_side_by_side(monkeypatch):
    """Each round's share divides attention's rate by the GEMM rate timed in the same round, so a
    machine that slows down between rounds moves both and leaves the share alone."""
    clock = iter(range(1, 10**6))  # each timed call gets slower than the last
    monkeypatch.setattr(bench, "time_call", lambda fn, *a, **k: float(next(clock)))
    monkeypatch.setattr(bench, "_gemm_rates", lambda device, dtype, sizes, repeats: {4: 1.0})
    rows = bench.attention_gemm_share(
        device=torch.device("cpu"), batch=1, length=2, d_model=4, num_heads=1, rounds=3
    )
    flops = 8 * 1 * 2 * 4**2 + 4 * 1 * 2**2 * 4
    # round r times the GEMM, then ours, theirs and one projection, at seconds 4r+1 ... 4r+4
    gemm = [2 * 4**3 / (4 * r + 1) for r in range(3)]
    ours = [(flops / (4 * r + 2)) / gemm[r] for r in range(3)]
    theirs = [(flops / (4 * r + 3)) / gemm[r] for r in range(3)]
    projection = [(2 * 1 * 2 * 4**2 / (4 * r + 4)) / gemm[r] for r in range(3)]
    assert rows[0]["share"] == pytest.approx(sorted(ours)[1])
    assert rows[1]["share"] == pytest.approx(sorted(theirs)[1])
    assert rows[2]["share"] == pytest.approx(sorted(projection)[1])


def test_sdpa_backends_are_a_cuda_comparison():
    with pytest.raises(ValueError, match="compares CUDA kernels, got device cpu"):
        bench.sdpa_backends(torch.device("cpu"))


def test_versus_torch_transformer_trains_both_loops_on_the_same_batches():
    rows = bench.versus_torch_transformer(
        device=torch.device("cpu"), steps=1, translation_pairs=60, max_tokens=300
    )
    assert [r["loop"] for r in rows] == [
        "ours (Trainer, library Transformer)",
        "stock torch.nn.Transformer",
    ]
    assert rows[1]["ratio"] == 1.0 and all(r["tokens_per_s"] > 0 for r in rows)
    # the same sizes: they differ only by biases PyTorch's layers have and ours do not (or back)
    assert abs(rows[0]["parameters"] - rows[1]["parameters"]) < 0.01 * rows[1]["parameters"]
