"""The Table 3 runner: a 2-run micro grid writes its CSV, resumes after an interruption, and the
task it trains on keeps its held-out splits out of training by construction."""

import csv
import dataclasses
import itertools
import math
import random
import re
import statistics

import pytest
import torch

from transformer_lib import experiments as ex
from transformer_lib.model.transformer import Transformer, TransformerConfig, count_parameters
from transformer_lib.teaching.checks.nb10_paper_experiments import judge_own_row
from transformer_lib.training.data import StringProgramTask
from transformer_lib.training.train import make_trainer

MICRO = ex.Grid(
    "micro",
    base=dict(d_model=16, num_heads=2, d_ff=32, num_layers=1, dropout=0.0, eps_ls=0.0),
    rows=(ex.Row("base", "base"), ex.Row("A h=1", "A", {"num_heads": 1})),
    seeds=(0,),
    steps=6,
    batch_size=8,
    warmup=2,
)


def _csv_rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_micro_grid_writes_one_row_per_run_and_skips_finished_runs(tmp_path):
    path = tmp_path / "results" / "table3.csv"
    logged = []
    new = ex.run_grid(MICRO, path, progress=False, log=logged.append)
    assert [(r["config"], r["seed"]) for r in new] == [("base", 0), ("A h=1", 0)]
    rows = _csv_rows(path)
    assert list(rows[0]) == ex.COLUMNS
    assert [(r["grid"], r["config"], r["seed"]) for r in rows] == [
        ("micro", "base", "0"),
        ("micro", "A h=1", "0"),
    ]
    for r in ex.read_results(path):
        assert r["steps"] == 6 and r["device"] == "cpu" and r["parameters"] > 0 and r["wall_s"] >= 0
        assert r["dev_ppl"] == pytest.approx(torch.tensor(r["dev_loss"]).exp().item(), rel=1e-3)
        # an untrained model is near uniform
        assert 1.0 <= r["dev_ppl"] <= len(StringProgramTask().vocab) * 3
        assert 0.0 <= r["exact_match"] <= 1.0 and 0.0 <= r["gen_exact_match"] <= 1.0
    assert {r["h"] for r in ex.read_results(path)} == {2, 1}

    again = ex.run_grid(MICRO, path, progress=False, log=logged.append)
    assert again == [] and len(_csv_rows(path)) == 2
    assert "2 run(s) already in" in logged[-1]


def test_interrupted_grid_resumes_with_the_missing_run_only(tmp_path, monkeypatch):
    path = tmp_path / "table3.csv"
    real_run_one, calls = ex.run_one, []

    def interrupted_after_one(*args, **kwargs):
        calls.append(args[1].name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C during the second run
        return real_run_one(*args, **kwargs)

    monkeypatch.setattr(ex, "run_one", interrupted_after_one)
    with pytest.raises(KeyboardInterrupt):
        ex.run_grid(MICRO, path, progress=False, log=lambda _: None)
    assert [r["config"] for r in _csv_rows(path)] == ["base"]  # the finished run was saved

    monkeypatch.setattr(ex, "run_one", real_run_one)
    resumed = ex.run_grid(MICRO, path, progress=False, log=lambda _: None)
    assert [r["config"] for r in resumed] == ["A h=1"]
    assert [r["config"] for r in _csv_rows(path)] == ["base", "A h=1"]


def test_same_seed_gives_the_same_result():
    task = StringProgramTask(num_test=1, num_valid=50, num_gen=50)
    first = ex.run_one(MICRO, MICRO.rows[0], 0, task)
    second = ex.run_one(MICRO, MICRO.rows[0], 0, task)
    assert first["dev_loss"] == second["dev_loss"]


def test_read_results_rejects_a_foreign_csv(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="expected"):
        ex.read_results(path)
    assert ex.read_results(tmp_path / "missing.csv") == []


def test_summary_and_spread_vs_noise():
    results = [
        {
            "grid": "g",
            "config": name,
            "group": "x",
            "seed": s,
            "dev_ppl": v,
            "parameters": 1,
            "wall_s": 1.0,
            "exact_match": 0.5,
        }
        for name, values in {"good": [1.0, 1.2, 1.1], "bad": [2.0, 2.2, 2.1]}.items()
        for s, v in enumerate(values)
    ]
    summary = ex.summarise(results, grid="g")
    assert [s["config"] for s in summary] == ["good", "bad"]
    assert summary[0]["mean"] == pytest.approx(1.1) and summary[0]["std"] == pytest.approx(0.1)
    sv = ex.spread_vs_noise(summary)
    assert (sv["best"], sv["worst"]) == ("good", "bad")
    assert sv["spread"] == pytest.approx(1.0) and sv["ratio"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="at least two"):
        ex.spread_vs_noise(summary[:1])


def test_rows_reject_unknown_changes():
    with pytest.raises(ValueError, match="unknown change"):
        ex.Row("x", "A", {"heads": 2})
    with pytest.raises(ValueError, match="commas"):
        ex.Row("a,b", "A")
    with pytest.raises(ValueError, match="no row"):
        ex.GRIDS["cpu"].row("nonsense")


def test_grids_cover_every_group_with_three_seeds():
    for grid in ex.GRIDS.values():
        assert {row.group for row in grid.rows} == {"base", "A", "B", "C", "D", "E"}
        assert len(grid.seeds) >= 3
        assert len({row.name for row in grid.rows}) == len(grid.rows)
    assert len(ex.GRIDS["cuda"].rows) > len(ex.GRIDS["cpu"].rows)


def test_a_config_with_a_smaller_d_k_shrinks_queries_and_keys_only():
    config = TransformerConfig(20, 20, d_model=32, num_heads=4, d_ff=64, num_layers=1, dropout=0.0)
    base, small = Transformer(config), Transformer(config.replace(d_k=2))
    attn = small.decoder.layers[0].cross_attn
    assert (attn.d_k, attn.d_v) == (2, 8)
    assert attn.w_q.weight.shape == (8, 32) and attn.w_v.weight.shape == (32, 32)
    # Three attention layers (encoder self, decoder self, decoder cross), each losing 2 x (32 x 24 +
    # 24).
    assert count_parameters(base)["total"] - count_parameters(small)["total"] == 3 * 2 * (
        32 * 24 + 24
    )
    src, tgt = torch.randint(4, 20, (2, 5)), torch.randint(4, 20, (2, 3))
    assert small(src, tgt).shape == (2, 3, 20)
    with pytest.raises(ValueError, match="d_k must be >= 1, got d_k=0"):
        config.replace(d_k=0)


def test_rows_b_and_e_are_config_fields_and_run(tmp_path):
    rows = (
        ex.Row("B d_k=2", "B", {"d_k": 2}),
        ex.Row("E learned positions", "E", {"positional": "learned"}),
    )
    grid = dataclasses.replace(MICRO, rows=rows)
    results = ex.run_grid(grid, tmp_path / "table3.csv", progress=False, log=lambda _: None)
    assert [(r["d_k"], r["positional"]) for r in results] == [(2, "sinusoidal"), (8, "learned")]
    assert [r["config"] for r in ex.read_results(tmp_path / "table3.csv")] == [
        "B d_k=2",
        "E learned positions",
    ]


def test_paper_table3_transcription():
    paper = ex.PAPER_TABLE3
    assert paper["base"]["PPL_dev"] == 4.92 and paper["base"]["params_M"] == 65
    assert (paper["A h=1"]["d_k"], paper["A h=1"]["PPL_dev"]) == (512, 5.29)
    assert (paper["B d_k=16"]["d_v"], paper["B d_k=16"]["PPL_dev"]) == (64, 5.16)
    assert paper["C N=2"]["PPL_dev"] == 6.11 and paper["D eps_ls=0.0"]["PPL_dev"] == 4.67
    assert paper["big"]["train_steps"] == "300K"


def test_string_program_task_holds_out_its_splits_by_construction():
    task = StringProgramTask()
    assert task.run("rn", "cabd") == "ecbd"
    assert (
        task.run("s", "dcba") == "abcd"
        and task.run("l", "abc") == "bca"
        and task.run("p", "abcde") == "badce"
    )
    assert task.run("n", "h") == "a"  # cyclic
    with pytest.raises(ValueError, match="unknown operation"):
        task.run("x", "abc")
    for step in range(30):
        for src, tgt in task.train_pairs(step, 32):
            program, text = src.split(":")
            assert task.split_of(text) == "train" and program not in task.gen_programs
            assert task.run(program, text) == tgt
    for split, pairs, programs in [
        ("valid", task.valid_pairs, task.train_programs),
        ("test", task.test_pairs, task.train_programs),
        ("generalisation", task.generalisation_pairs, task.gen_programs),
    ]:
        assert len(pairs) == 500
        for src, _ in pairs:
            program, text = src.split(":")
            assert task.split_of(text) == split and program in programs
    all_longest = {"".join(p) for p in itertools.product(task.OPERATIONS, repeat=3)}
    assert set(task.gen_programs) < all_longest and not set(task.gen_programs) & set(
        task.train_programs
    )
    with pytest.raises(ValueError, match="alphabet"):
        StringProgramTask(alphabet="aab")
    with pytest.raises(ValueError, match="min_len"):
        StringProgramTask(min_len=5, max_len=2)


def _repeats(task, held_out, training, count=400):
    """The held-out programs that compute a training program's function, judged on ``count``
    random strings drawn here (not the task's own probes): a program missing from the answer
    differs from every training program on one of these strings, which proves it a new function."""
    rng = random.Random("tests/test_experiments.py")
    probes = [
        "".join(rng.choice(task.alphabet) for _ in range(rng.randint(task.min_len, task.max_len)))
        for _ in range(count)
    ]
    taught = {tuple(task.run(p, text) for text in probes) for p in training}
    return [p for p in held_out if tuple(task.run(p, text) for text in probes) in taught]


def test_string_program_task_holds_out_new_functions_not_new_spellings():
    old_split = ["lln", "lns", "lpr", "lsp", "prs", "psp", "rpp", "slr", "sls", "snn", "snp", "srr"]
    for seed in (0, 1):
        task = StringProgramTask(seed=seed)
        assert len(task.gen_programs) == 12 and len(task.train_programs) == 155 - 12
        assert _repeats(task, task.gen_programs, task.train_programs) == []
    # the split before issue 36 (notebook 10's 12 held-out programs): 9 were new spellings only
    everything = task.train_programs + task.gen_programs
    repeats = _repeats(task, old_split, [p for p in everything if p not in old_split])
    assert repeats == ["lln", "lns", "lsp", "prs", "psp", "rpp", "sls", "snp", "srr"]
    # a held-out function is held out with all its spellings: `snp` and `spn` are one function
    assert {"snp", "spn"} <= set(StringProgramTask().gen_programs)
    with pytest.raises(ValueError, match="between 0 and 66"):
        StringProgramTask(num_gen_programs=67)
    with pytest.raises(ValueError, match="between 0 and 4"):
        StringProgramTask(max_ops=1, num_gen_programs=5)  # training keeps one program


def test_main_rejects_an_unavailable_device(capsys):
    if torch.cuda.is_available():
        pytest.skip("cuda is available here")
    with pytest.raises(SystemExit):
        ex.main(["--device", "cuda"])
    assert "not available" in capsys.readouterr().err


def _micro_results(rows=(("base", (9.0, 9.5, 10.0)), ("A h=1", (9.2, 9.6, 10.4)))):
    return [
        {
            "grid": "micro",
            "config": config,
            "group": config[0],
            "seed": s,
            "dev_ppl": v,
            "parameters": 1,
            "wall_s": 1.0,
            "exact_match": 0.0,
        }
        for config, values in rows
        for s, v in enumerate(values)
    ]


def test_judge_own_row_trains_the_row_and_reports_the_prediction():
    task = StringProgramTask(num_test=1, num_valid=20, num_gen=20)
    row = ex.Row("mine", "C", {"d_ff": 64})  # a new shape: judged against the base's mean
    message = judge_own_row((row, "Lower"), _micro_results(), grid=MICRO, task=task)
    assert "'mine'" in message and "dev perplexity" in message
    assert "compared with the base's mean over 3 seeds (9.500 ± 0.500" in message
    assert "its seed 0 alone reached 9.000" in message and "same batches" not in message
    message = judge_own_row(({"d_ff": 64}, 5.0), _micro_results(), grid=MICRO, task=task)
    assert "you predicted 5.00" in message


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (ex.Row("x", "C", {"d_ff": 64}), "pair (row, prediction)"),
        (("d_ff=64", "lower"), "Row or a dict"),
        ((ex.Row("x", "C", {"d_ff": 64}), "better"), "'lower', 'same' or 'higher'"),
        ((ex.Row("x", "C", {"d_ff": 64}), 0.5), "a number >= 1"),
        ((ex.Row("x", "C", {"d_ff": 32}), "same"), "changes nothing"),
        ((ex.Row("x", "A", {"num_heads": 1}), "same"), "already has this row"),
        # d_ff=32 is the base's: row A h=1
        (({"num_heads": 1, "d_ff": 32}, "same"), "already has this row"),
        # d_k = d_model / h: row A h=1
        (({"num_heads": 1, "d_k": 16}, "same"), "already has this row"),
        (({"num_heads": 0}, "same"), "not a valid model"),
        ((ex.Row("x", "A", {"num_heads": 3}), "same"), "not a valid model"),
        ((ex.Row("x", "C", {"num_layers": 40}), "lower"), "within 4x"),
        # counted on the meta device: no allocation
        (({"d_model": 100_000, "num_heads": 8}, "lower"), "within 4x"),
    ],
)
def test_judge_own_row_names_what_is_wrong(answer, words):
    with pytest.raises((TypeError, ValueError), match=re.escape(words)):
        judge_own_row(answer, _micro_results(), grid=MICRO)


def test_judge_own_row_needs_committed_base_runs():
    with pytest.raises(ValueError, match="fewer than two seeds"):
        judge_own_row((ex.Row("x", "C", {"d_ff": 64}), "lower"), [], grid=MICRO)
    # a same-shape row needs the noise of a paired difference: a same-shape row with seeds
    only_base = _micro_results(rows=(("base", (9.0, 9.5, 10.0)),))
    with pytest.raises(ValueError, match="no row of grid 'micro' with the base's shapes"):
        judge_own_row((ex.Row("x", "D", {"dropout": 0.2}), "lower"), only_base, grid=MICRO)


def test_judge_own_row_compares_a_same_shape_row_with_the_same_seed_of_the_base(monkeypatch):
    """Seed 0 of the base is far above its mean here: a same-shape row (its seed 0 starts from the
    base's seed-0 weights) 0.05 above base seed 0 is "same" (paired), though far above the mean."""
    results = _micro_results(rows=(("base", (11.0, 9.0, 9.1)), ("A h=1", (11.1, 9.2, 9.1))))
    monkeypatch.setattr(ex, "run_one", lambda *args, **kwargs: {"dev_ppl": 11.05})
    message = judge_own_row(({"dropout": 0.2}, "same"), results, grid=MICRO)
    assert "compared with the base's seed 0 (11.000)" in message
    assert "difference of +0.050 is 'same' (as you predicted)" in message


def test_judge_own_row_compares_a_new_shape_with_the_base_mean_fairly(monkeypatch):
    """A row that changes shapes is not paired with a seed of the base: it is set against the base's
    mean over seeds, not its (worst) seed 0, with the noise of one run next to a mean of three, so
    the band is centred and each prediction is judged alike."""
    base = (9.6, 9.0, 9.0)  # seed 0 is the worst; mean 9.2, sd 0.346
    results = _micro_results(rows=(("base", base), ("A h=1", (9.8, 9.2, 9.3))))
    seed_std = statistics.median([statistics.stdev(base), statistics.stdev((9.8, 9.2, 9.3))])
    band = 2 * (seed_std**2 + statistics.variance(base) / 3) ** 0.5
    for ppl, outcome in [
        (9.2 - band - 0.01, "lower"),
        (9.55, "same"),
        (9.2 + band + 0.01, "higher"),
    ]:
        monkeypatch.setattr(ex, "run_one", lambda *args, ppl=ppl, **kwargs: {"dev_ppl": ppl})
        for prediction in ("lower", "same", "higher"):
            message = judge_own_row(({"d_ff": 64}, prediction), results, grid=MICRO)
            assert "compared with the base's mean over 3 seeds (9.200" in message, message
            assert f"is '{outcome}'" in message, message
            assert ("as you predicted" in message) == (prediction == outcome), message


def _initial_weights(name: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """The starting weights of the CPU grid's row ``name`` for ``seed``, built as the runner builds
    them (``make_trainer``), by parameter name."""
    task = StringProgramTask(num_test=1, num_valid=1, num_gen=1)
    grid = ex.GRIDS["cpu"]
    row = grid.row(name)
    config = ex._config(grid, row, len(task.vocab), task.vocab.pad_id)
    return dict(make_trainer(config, ex._recipe(grid, row), seed, "cpu").model.named_parameters())


def test_same_shapes_decides_which_seeds_share_initial_weights():
    """Rows with the base's parameter shapes draw the base's initial weights from the same seed;
    rows that change a shape draw others (the reason only the former are paired)."""
    grid = ex.GRIDS["cpu"]
    same = {row.name: ex.same_shapes(grid, row) for row in grid.rows}
    assert [name for name, keeps in same.items() if keeps] == [
        "base",
        "A h=1",
        "A h=16",
        "D P_drop=0.0",
        "D eps_ls=0.0",
        "D eps_ls=0.2",
    ]

    base = _initial_weights("base")
    for name in ("A h=1", "D P_drop=0.0", "B d_k=4", "C d_ff=1024"):
        row = _initial_weights(name)
        identical = all(
            key in row and row[key].shape == p.shape and torch.equal(row[key], p)
            for key, p in base.items()
        )
        assert identical == same[name], name


def test_a_row_that_changes_a_shape_shares_only_what_is_drawn_before_the_change():
    """What section 3 of notebook 10 says a shape-changing row shares with the base's same seed: the
    random tensors drawn before its first changed shape, which is always the token embedding (also
    the output projection) and, for N=1, N=4 and d_ff=1024, some encoder biases; the d_model rows
    share nothing. Constant tensors (LayerNorm's ones and zeros) are equal in every model and not
    counted. Welch's test, which ignores this partial pairing, is the conservative choice."""
    base, other_seed = _initial_weights("base"), _initial_weights("base", seed=1)

    def shared(name):
        row = _initial_weights(name)
        return [
            key
            for key, p in base.items()
            if key in row
            and row[key].shape == p.shape
            and torch.equal(row[key], p)
            and not torch.equal(p, other_seed[key])  # drawn at random, not a constant
        ]

    assert shared("B d_k=4") == shared("E learned positions") == ["src_embed.embedding.weight"]
    for name in ("C N=1", "C N=4", "C d_ff=1024"):
        assert shared(name)[0] == "src_embed.embedding.weight" and len(shared(name)) > 1
        assert all(key.endswith(".bias") for key in shared(name)[1:]), name
    assert shared("C d_model=32") == shared("C d_model=128") == []


def test_student_t_p_matches_tabulated_values():
    # two-sided 5% points of Student's t (df 1, 2, 4, 30) and the normal limit
    for t, df in [(12.7062, 1), (4.30265, 2), (2.77645, 4), (2.04227, 30), (1.95996, 10**7)]:
        assert ex.student_t_p(t, df) == pytest.approx(0.05, abs=2e-5)
    assert ex.student_t_p(2.0, 2) == pytest.approx(1 - 2 / 6**0.5, abs=1e-12)  # closed form, df 2
    assert ex.student_t_p(0.0, 3) == 1.0 and ex.student_t_p(float("inf"), 3) == 0.0
    assert ex.student_t_p(-1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|t| > 1) = 1/2
    with pytest.raises(ValueError, match="df must be a number > 0"):
        ex.student_t_p(1.0, 0)


def test_paired_and_welch_tests_and_holm():
    # a constant shift with a little noise: paired sees it, unpaired (large seed spread) does not
    a, b = [3.62, 3.39, 3.42], [3.40, 3.24, 3.22]
    paired, welch = ex.paired_t_test(b, a), ex.welch_t_test(b, a)
    assert paired["differences"] == pytest.approx([-0.22, -0.15, -0.20])
    assert paired["df"] == 2 and paired["p"] < 0.05 < welch["p"]
    assert paired["p"] == pytest.approx(ex.student_t_p(paired["t"], 2))
    assert ex.paired_t_test([1.0, 2.0], [1.0, 2.0])["p"] == 1.0
    assert ex.paired_t_test([2.0, 3.0], [1.0, 2.0])["p"] == 0.0  # the same shift every time
    assert ex.welch_t_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])["p"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="as many values in a as in b"):
        ex.paired_t_test([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="2 or more finite numbers"):
        ex.paired_t_test([1.0], [2.0])
    # the sign-flip test at n = 3 cannot go below 2/8, however large the effect
    assert ex.sign_flip_p([1.0, 1.1, 0.9]) == 0.25 and ex.sign_flip_p([1.0, -1.0, 0.1]) == 1.0
    assert ex.holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx(
        {"a": 0.03, "c": 0.06, "b": 0.06}
    )


def test_compare_with_base_pairs_same_shape_rows_and_uses_welch_for_the_others():
    grid = dataclasses.replace(MICRO, rows=(*MICRO.rows, ex.Row("C d_ff=64", "C", {"d_ff": 64})))
    results = _micro_results(
        rows=(
            ("base", (9.0, 9.5, 10.0)),
            ("A h=1", (9.2, 9.6, 10.4)),
            ("C d_ff=64", (9.4, 9.0, 9.2)),
        )
    )
    rows = {r["config"]: r for r in ex.compare_with_base(results, grid=grid)}
    paired, welch = rows["A h=1"], rows["C d_ff=64"]
    assert paired["paired"] and paired["test"] == "paired" and paired["seeds"] == [0, 1, 2]
    assert paired["differences"] == pytest.approx([0.2, 0.1, 0.4])
    assert (
        paired["p"] == pytest.approx(ex.paired_t_test([9.2, 9.6, 10.4], [9.0, 9.5, 10.0])["p"])
        and paired["sign_flip_p"] == 0.25
    )
    assert not welch["paired"] and welch["test"] == "Welch" and welch["sign_flip_p"] is None
    assert welch["p"] == pytest.approx(ex.welch_t_test([9.4, 9.0, 9.2], [9.0, 9.5, 10.0])["p"])
    assert welch["differences"] == pytest.approx([-0.1, -0.5, -0.3]) and welch["sd"] is None
    holm = ex.holm({"A h=1": paired["p"], "C d_ff=64": welch["p"]})
    assert {name: r["holm_p"] for name, r in rows.items()} == pytest.approx(holm)
    with pytest.raises(ValueError, match="no 'base' row"):
        ex.compare_with_base(_micro_results(), grid="cpu")


def test_check_table3_row_never_raises():
    import transformer_lib as tl

    def stub():
        raise NotImplementedError

    def broken():
        raise KeyError("oops")

    assert "not implemented yet" in tl.checks.check_table3_row(stub, _micro_results()).message
    for code in (broken, lambda: None, lambda: (ex.Row("x", "C", {"d_ff": 256}), "same"), 42):
        result = tl.checks.check_table3_row(code, _micro_results())
        assert not result and result.message.startswith("❌"), result.message


def test_every_row_of_both_grids_is_a_valid_model_config():
    task = StringProgramTask(num_test=1, num_valid=1, num_gen=1)
    for grid in ex.GRIDS.values():
        for row in grid.rows:
            config = ex._config(grid, row, len(task.vocab), task.vocab.pad_id)
            assert config.d_model % config.num_heads == 0 and (
                config.d_k is None or config.d_k >= 1
            ), row.name


def test_paper_counterpart_makes_the_same_change():
    cpu = {row.name: ex.paper_counterpart(row) for row in ex.GRIDS["cpu"].rows}
    # 4x the base's h
    assert cpu["base"] == "base" and cpu["A h=1"] == "A h=1" and cpu["A h=16"] == "A h=32"
    # our h = 1 (a quarter) is as far in ratio from the paper's h = 1 (an eighth) as from its h = 4
    # (a half): the tie goes to the row with our value itself, not to the floats' last bit
    assert math.log(1 / 4) - math.log(1 / 8) == pytest.approx(math.log(1 / 2) - math.log(1 / 4))
    assert ex.paper_counterpart(ex.Row("A h=1", "A", {"num_heads": 1}), "cpu") == "A h=1"
    flipped = ex.Row("A h=2", "A", {"num_heads": 2})  # a half: the paper's h = 4 (a half)
    assert ex.paper_counterpart(flipped, "cpu") == "A h=4"
    # a quarter, a half
    assert cpu["B d_k=4"] == "B d_k=16" and cpu["C d_model=32"] == "C d_model=256"
    # fewer layers, more layers
    assert cpu["C N=1"] in ("C N=2", "C N=4") and cpu["C N=4"] == "C N=8"
    assert (
        cpu["D P_drop=0.0"] == "D P_drop=0.0"
        and cpu["E learned positions"] == "E learned positions"
    )
    assert all(name in ex.PAPER_TABLE3 for name in cpu.values())
    assert ex.paper_counterpart(ex.Row("two", "C", {"d_ff": 64, "num_layers": 1})) is None
