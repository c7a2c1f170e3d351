"""The committed results under ``results/`` come from the committed code: rows of
``results/modern_decoder.py`` are trained again and compared with the CSV.

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
    match at step 900 and ends below 99% at step 1600, where the recipe's three seeds are at 99% or
    more."""
    import runpy

    script = runpy.run_path(str(RESULTS / "label_smoothing.py"))
    paper = script["read_rows"](RESULTS / "paper_schedule.csv")
    recipe = [
        r["val_exact_match"]
        for r in script["read_rows"]()
        if r["schedule"] == "recipe" and r["eps"] == 0.1 and r["step"] == 1600
    ]
    first = next(r["step"] for r in paper if r["val_exact_match"] >= 0.99)
    assert first == 900 and paper[-1]["step"] == 1600
    assert paper[-1]["val_exact_match"] < 0.99 <= min(recipe) and len(recipe) == 3
