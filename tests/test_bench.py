"""The benchmark's plumbing on tiny sizes. It asserts what it measures, never how fast: timings belong to
`python -m transformer_lib.bench`, not to tests."""

import torch

from transformer_lib import bench


def test_compare_attention_reports_every_variant_against_pytorch():
    rows = bench.compare_attention(batch=2, length=8, d_model=16, num_heads=2, device=torch.device("cpu"), repeats=1)
    assert [r["variant"].split(",")[0] for r in rows] == ["nn.MultiheadAttention(need_weights=False)", "ours", "ours"]
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
        lambda **kw: compare(batch=1, length=4, d_model=8, num_heads=2, device=kw["device"], repeats=1),
    )
    monkeypatch.setattr(
        bench,
        "attention_growth",
        lambda **kw: growth(lengths=(4,), batch=1, d_model=8, num_heads=2, device=kw["device"], repeats=1),
    )
    bench.main(["--device", "cpu", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "nn.MultiheadAttention(need_weights=False)" in out and "Growth with T" in out
