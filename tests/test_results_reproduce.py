"""The committed results under ``results/`` come from the committed code: rows of
``results/modern_decoder.py`` and of notebook 10's Table 3 grid are trained again and compared with
their CSV files.

The modern block's rows have reproduced to the last printed digit on every machine that re-ran them,
so its seed-0 row is held to the CSV's rounding. The paper block (post-LN) amplifies rounding: a
change in the order of float additions in the attention's backward pass (commit 1e50ae3, a rewrite
of the NaN guard with the same forward pass) moved its gradients by about 6e-8, and 400 steps turned
that into 0.002 nats inside the training length and 0.02 past it; another CPU moved them by 0.001
and 0.01 (2.1385 / 2.7419 on a reviewer's machine against 2.1376 / 2.7324 on the one that wrote the
CSV, each deterministic). Its tolerances are set above the CPU-to-CPU difference, so they catch a
change of the code that moves the result by more than rounding can, not a reordered sum.
"""

import importlib.util
import pathlib
import re

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
# the torch that wrote the CSV: requirements.txt's pin
PINNED_TORCH = re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)


def _modern_decoder():
    spec = importlib.util.spec_from_file_location("modern_decoder", RESULTS / "modern_decoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("variant", "tolerance_in", "tolerance_past"),
    [
        ("modern", 1e-4, 1e-4),
        pytest.param(
            "paper",
            3e-3,
            3e-2,
            # another torch reorders more sums: torch 2.5.1 (make test-oldest) gave 2.7681 past the
            # training length against the CSV's 2.7324
            marks=pytest.mark.skipif(
                torch.__version__.split("+")[0] != PINNED_TORCH,
                reason=f"the paper block's row reproduces on the pinned torch {PINNED_TORCH} only",
            ),
        ),
    ],
)
def test_modern_decoder_csv_reproduces_its_seed_0_block_rows(variant, tolerance_in, tolerance_past):
    import transformer_lib as tl

    md = _modern_decoder()
    committed = next(
        r
        for r in md.read_rows()
        if (r["comparison"], r["variant"], r["seed"]) == ("blocks", variant, 0)
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script runs
    try:
        corpus = tl.PythonSourceCorpus()
        config = md.comparisons(len(corpus.vocab))["blocks"][variant]
        row = md.train(config, 0, corpus, md.validation_windows(corpus))
    finally:
        torch.set_num_threads(threads)
    assert row["parameters"] == committed["parameters"] and row["steps"] == committed["steps"]
    assert row["loss_in"] == pytest.approx(committed["loss_in"], abs=tolerance_in)
    assert row["loss_past"] == pytest.approx(committed["loss_past"], abs=tolerance_past)


def test_paper_schedule_run_holds_what_notebook_06_exercise_3_compares_with():
    """Notebook 06's exercise 3 asks the learner to predict this run's outcome, so the notebook does
    not assert it: the paper's schedule (factor 0.24, seed 0) first reaches 99% validation exact
    match at step 900 (the recipe's three seeds with the same eps_ls: at step 1100), falls back
    below 99% later, and ends at 0.986 at step 1600, below the recipe's three seeds (all 1.000)."""
    import runpy

    script = runpy.run_path(str(RESULTS / "label_smoothing.py"))
    paper = script["read_rows"](RESULTS / "paper_schedule.csv")
    recipe = [
        r["val_exact_match"]
        for r in script["read_rows"]()
        if r["schedule"] == "recipe" and r["eps"] == 0.1 and r["step"] == 1600
    ]
    first = next(r["step"] for r in paper if r["val_exact_match"] >= 0.99)
    recipe_first = {
        r["seed"]: r["step"]
        for r in reversed(script["read_rows"]())
        if r["schedule"] == "recipe" and r["eps"] == 0.1 and r["val_exact_match"] >= 0.99
    }
    assert first == 900 and set(recipe_first.values()) == {1100} and len(recipe_first) == 3
    assert any(r["val_exact_match"] < 0.99 for r in paper if r["step"] > first)
    assert paper[-1]["step"] == 1600
    assert paper[-1]["val_exact_match"] == 0.986 < min(recipe) == 1.0 and len(recipe) == 3


@pytest.mark.skipif(
    torch.__version__.split("+")[0] != PINNED_TORCH,
    reason=f"the committed grid ran on the pinned torch {PINNED_TORCH}",
)
def test_table3_csv_reproduces_its_seed_0_base_row():
    """The base row of ``results/table3.csv``, seed 0, trained again as ``make experiments`` trains
    it (one thread). The tolerances allow for another CPU's rounding (notebook 10 has seen 0.03 of
    dev perplexity), not for a change of the task or the model: before issue 36 the task's split
    gave this row a dev perplexity of 3.619 and a generalisation exact match of 0.092, against
    3.31 and under 0.01 since (3.309 and 0.008, then 3.304 and 0.006 once LayerNorm called
    F.layer_norm)."""
    from transformer_lib import experiments as ex

    committed = next(
        r
        for r in ex.read_results(RESULTS / "table3.csv")
        if (r["grid"], r["config"], r["seed"]) == ("cpu", "base", 0)
    )
    grid = ex.GRIDS["cpu"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        row = ex.run_one(grid, grid.row("base"), seed=0)
    finally:
        torch.set_num_threads(threads)
    assert row["parameters"] == committed["parameters"] and row["steps"] == committed["steps"]
    assert row["dev_ppl"] == pytest.approx(committed["dev_ppl"], abs=0.05)
    assert row["exact_match"] == pytest.approx(committed["exact_match"], abs=0.03)
    assert row["gen_exact_match"] == pytest.approx(committed["gen_exact_match"], abs=0.03)
