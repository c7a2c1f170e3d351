"""``python -m transformer_lib.applications.experiments``: the paper's Table 3 (variations of the
base model) at laptop scale. It lives among the applications because it both trains (the training
family) and decodes (``exact_match``, :mod:`~transformer_lib.applications.decode`).

Every row of the grid changes one thing of a small base model, in the spirit of the paper's groups:
(A) the number of heads at constant compute, (B) a smaller key width ``d_k``, (C) depth, width and
``d_ff``, (D) dropout and label smoothing, (E) learned positional embeddings instead of sinusoids.
Each row trains for several seeds on the same data
(:class:`~transformer_lib.training.data.StringProgramTask`) for the same number of steps, with the
library's :class:`~transformer_lib.training.train.Trainer`, and is scored on the task's held-out
validation split (the dev set; its test split is never read here) by per-token perplexity, as the
paper's Table 3 does, and by exact match of greedy decoding.

Each finished run is appended to a CSV file at once (``results/table3.csv``), and runs already in
the file are skipped, so an interrupted grid (Ctrl-C) resumes where it stopped. ``--device cuda``
runs a bigger grid (wider model, more steps), recorded in the ``grid`` column; the two grids are
never mixed in one summary.
"""

import argparse
import csv
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .._package_data import package_data
from ..model.transformer import Transformer, TransformerConfig, count_parameters, head_width
from ..training.data import StringProgramTask, make_batch
from ..training.runtime import pick_device
from ..training.train import CPU_RECIPE, TrainingRecipe, make_trainer, perplexity
from .decode import exact_match

__all__ = [
    "Row",
    "Grid",
    "GRIDS",
    "PAPER_TABLE3",  # noqa: F822 (read on first use, through the module's __getattr__)
    "paper_table3",
    "paper_counterpart",
    "same_shapes",
    "COLUMNS",
    "COMMITTED_CSV",
    "PAPER_CSV",
    "read_csv",
    "evaluate",
    "train_row",
    "run_one",
    "run_grid",
    "read_results",
    "summarise",
    "spread_vs_noise",
    "student_t_p",
    "paired_t_test",
    "welch_t_test",
    "sign_flip_p",
    "holm",
    "compare_with_base",
    "main",
]

# where the command line writes, from the repository's root
DEFAULT_CSV = Path("results/table3.csv")
# The data of Table 3 that ships with the package (data_files/table3/, its README says what each
# file is), so notebook 10 and its check work from an installed copy too: the committed results of
# the CPU grid (a copy of results/table3.csv; tests/test_experiments.py keeps the two identical)
# and the paper's table.
COMMITTED_CSV = package_data("table3", "table3.csv")

# The CSV's columns, in order. ``d_k`` is the per-head key width; ``wall_s`` is training plus
# evaluation, and ``cpu_s`` the CPU time the process spent on it (on a shared machine wall time
# grows with the others' load).
COLUMNS = [
    "grid",
    "group",
    "config",
    "seed",
    "N",
    "d_model",
    "d_ff",
    "h",
    "d_k",
    "P_drop",
    "eps_ls",
    "positional",
    "parameters",
    "steps",
    "batch_size",
    "wall_s",
    "cpu_s",
    "device",
    "threads",
    "dev_loss",
    "dev_ppl",
    "exact_match",
    "gen_exact_match",
]

# Changes a row may make to the base: fields of TransformerConfig, and the recipe's eps_ls.
_ROW_KEYS = {"num_layers", "d_model", "d_ff", "num_heads", "d_k", "dropout", "eps_ls", "positional"}


@dataclass(frozen=True)
class Row:
    """One configuration: a name, its Table 3 group, and what it changes in the base model.

    ``changes`` keys (fields of :class:`~transformer_lib.TransformerConfig`): ``num_layers`` (N),
    ``d_model``, ``d_ff``, ``num_heads`` (h), ``d_k`` (per-head key width; values keep
    ``d_v = d_model // h``), ``dropout`` (P_drop), ``positional`` (``"learned"`` or
    ``"sinusoidal"``); and ``eps_ls``, the label smoothing of the training recipe
    (:class:`~transformer_lib.training.train.TrainingRecipe`).
    """

    name: str
    group: str
    changes: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "," in self.name:
            raise ValueError(
                f"a row's name must be a non-empty string without commas, got {self.name!r}"
            )
        if not isinstance(self.changes, dict):
            raise TypeError(f"a row's changes must be a dict, got {type(self.changes).__name__}")
        unknown = set(self.changes) - _ROW_KEYS
        if unknown:
            raise ValueError(
                f"row {self.name!r}: unknown change(s) {sorted(unknown)}; allowed: "
                f"{sorted(_ROW_KEYS)}"
            )


@dataclass(frozen=True)
class Grid:
    """A base model, the rows that vary it, the seeds, and the training budget every run gets."""

    name: str
    base: dict
    rows: tuple[Row, ...]
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 1000
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 100

    def row(self, name: str) -> Row:
        for row in self.rows:
            if row.name == name:
                return row
        raise ValueError(
            f"grid {self.name!r} has no row {name!r}; rows: {[r.name for r in self.rows]}"
        )


def _rows(d_model: int, h: int, d_ff: int, num_layers: int, full: bool) -> tuple[Row, ...]:
    """The Table 3 groups around a base of width ``d_model``, ``h`` heads, ``d_ff`` and
    ``num_layers``.

    ``full=False`` keeps one or two rows per group (the CPU grid: 13 rows), ``full=True`` all 17.
    """
    d_k = d_model // h
    rows = [
        (True, Row("base", "base")),
        # (A) heads at constant compute: d_k = d_v = d_model / h keeps the attention's cost.
        (True, Row("A h=1", "A", {"num_heads": 1})),
        (False, Row(f"A h={2 * h}", "A", {"num_heads": 2 * h})),
        (True, Row(f"A h={4 * h}", "A", {"num_heads": 4 * h})),
        # (B) a smaller key width, everything else as the base.
        (True, Row(f"B d_k={d_k // 4}", "B", {"d_k": d_k // 4})),
        (False, Row(f"B d_k={d_k // 2}", "B", {"d_k": d_k // 2})),
        # (C) depth, width (d_k = d_model / h follows the width) and d_ff.
        (True, Row(f"C N={num_layers // 2}", "C", {"num_layers": num_layers // 2})),
        (True, Row(f"C N={2 * num_layers}", "C", {"num_layers": 2 * num_layers})),
        (True, Row(f"C d_model={d_model // 2}", "C", {"d_model": d_model // 2})),
        (True, Row(f"C d_model={2 * d_model}", "C", {"d_model": 2 * d_model})),
        (False, Row(f"C d_ff={d_ff // 4}", "C", {"d_ff": d_ff // 4})),
        (True, Row(f"C d_ff={4 * d_ff}", "C", {"d_ff": 4 * d_ff})),
        # (D) regularisation.
        (True, Row("D P_drop=0.0", "D", {"dropout": 0.0})),
        (False, Row("D P_drop=0.2", "D", {"dropout": 0.2})),
        (True, Row("D eps_ls=0.0", "D", {"eps_ls": 0.0})),
        (True, Row("D eps_ls=0.2", "D", {"eps_ls": 0.2})),
        # (E) positions.
        (True, Row("E learned positions", "E", {"positional": "learned"})),
    ]
    return tuple(row for in_small, row in rows if full or in_small)


# The base keeps the paper's P_drop = eps_ls = 0.1 and post-LN, at a size that trains on a CPU.
GRIDS: dict[str, Grid] = {
    "cpu": Grid(
        "cpu",
        base=dict(d_model=64, num_heads=4, d_ff=256, num_layers=2, dropout=0.1, eps_ls=0.1),
        rows=_rows(64, 4, 256, 2, full=False),
        steps=200,
        batch_size=32,
        warmup=40,
    ),
    "cuda": Grid(
        "cuda",
        base=dict(d_model=256, num_heads=8, d_ff=1024, num_layers=4, dropout=0.1, eps_ls=0.1),
        rows=_rows(256, 8, 1024, 4, full=True),
        steps=4000,
        batch_size=128,
        lr=1e-3,
        warmup=400,
    ),
}


def read_csv(
    path: str | os.PathLike, types: dict[str, type], columns: Sequence[str] | None = None
) -> list[dict]:
    """The one reader of the CSV files under ``results/``: every row as a dict, values converted.

    Args:
        path: the CSV file (a header line, then one line per row).
        types: column -> ``int``, ``float`` or ``str``; an empty cell becomes ``None``; other
            columns stay text.
        columns: the header the file must have, in order (``None``: any); a ValueError names both
            otherwise.

    Returns:
        The rows in file order.
    """
    with Path(path).open(newline="") as f:
        reader = csv.DictReader(f)
        if columns is not None and reader.fieldnames != list(columns):
            raise ValueError(
                f"{os.fspath(path)!r} has columns {reader.fieldnames}, expected {list(columns)}"
            )
        rows = list(reader)
    for row in rows:
        for key, kind in types.items():
            row[key] = None if row[key] == "" else kind(row[key])
    return rows


# "Attention Is All You Need" (Vaswani, Shazeer, Parmar, Uszkoreit, Jones, Gomez, Kaiser,
# Polosukhin, 2017), Table 3: variations on the base model, English-to-German newstest2013 (the dev
# set). Perplexities are per wordpiece. Blank cells of the paper's table are "as the base model"; an
# empty cell where the paper gives no number. The data lives in data_files/table3/paper_table3.csv,
# read on first use (PAPER_TABLE3): our row name -> the paper's row, keyed by its columns.
PAPER_CSV = package_data("table3", "paper_table3.csv")
_PAPER_TYPES = {
    "N": int,
    "d_model": int,
    "d_ff": int,
    "h": int,
    "d_k": int,
    "d_v": int,
    "P_drop": float,
    "eps_ls": float,
    "train_steps": str,
    "PPL_dev": float,
    "BLEU_dev": float,
    "params_M": int,
}


@cache
def paper_table3() -> dict[str, dict]:
    """The paper's Table 3 (:data:`PAPER_CSV`), read once, on first use: our row name -> the
    paper's row, keyed by its columns. ``experiments.PAPER_TABLE3`` is the same dict."""
    return {
        row.pop("row"): row for row in read_csv(PAPER_CSV, _PAPER_TYPES, ["row", *_PAPER_TYPES])
    }


def __getattr__(name: str):
    # PAPER_TABLE3 is read from its file when first asked for, not when the module is imported
    if name == "PAPER_TABLE3":
        return paper_table3()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Which column of the paper's table each change of a row moves.
_PAPER_FIELDS = {
    "num_layers": "N",
    "d_model": "d_model",
    "d_ff": "d_ff",
    "num_heads": "h",
    "d_k": "d_k",
    "dropout": "P_drop",
    "eps_ls": "eps_ls",
}


def paper_counterpart(row: Row, grid: Grid | str = "cpu") -> str | None:
    """The row of :data:`PAPER_TABLE3` that makes the same change as ``row`` does to its base: the
    same group, the same column moved the same way (up, down, to zero), and of those the closest
    ratio to the base's value; of two rows equally close in ratio, the one whose value is ours
    (our h = 1, a quarter of our base's heads, is as far from the paper's h = 1, an eighth, as from
    its h = 4, a half: h = 1). ``"base"`` for the base row; None when the paper has no such row (a
    change of several columns, say)."""
    grid = GRIDS[grid] if isinstance(grid, str) else grid
    if not row.changes:
        return "base"
    if row.changes == {"positional": "learned"}:
        return "E learned positions"
    if len(row.changes) != 1 or next(iter(row.changes)) not in _PAPER_FIELDS:
        return None
    ((key, value),) = row.changes.items()
    ours = value / ({"d_k": grid.base["d_model"] // grid.base["num_heads"]} | grid.base)[key]
    column, paper_base = _PAPER_FIELDS[key], paper_table3()["base"]
    best, best_key = None, (math.inf, True)
    for name, paper in paper_table3().items():
        if name[0] != row.group or paper[column] == paper_base[column]:
            continue
        theirs = paper[column] / paper_base[column]
        if (ours == 0) != (theirs == 0) or (ours > 1) != (theirs > 1):
            continue
        # in ratio, rounded: 1/4 is as far from 1/8 as from 1/2, though the floats' last bits
        # differ; a tie goes to the paper's row with our value itself (h = 1 next to h = 1)
        distance = round(0.0 if ours == 0 else abs(math.log(ours) - math.log(theirs)), 9)
        key = (distance, paper[column] != value)
        if key < best_key:
            best, best_key = name, key
    return best


def _config(
    grid: Grid, row: Row, vocab_size: int, pad_id: int, max_len: int = 64
) -> TransformerConfig:
    """The row's :class:`TransformerConfig`: the grid's base with the row's changes (``d_k``
    included), less ``eps_ls``, which is the recipe's (:func:`_recipe`)."""
    fields = {key: value for key, value in {**grid.base, **row.changes}.items() if key != "eps_ls"}
    return TransformerConfig(vocab_size, vocab_size, max_len=max_len, pad_id=pad_id, **fields)


def _recipe(grid: Grid, row: Row) -> TrainingRecipe:
    """The row's :class:`~transformer_lib.training.train.TrainingRecipe`: the grid's budget, and
    the row's ``eps_ls`` (else the base's, else ``CPU_RECIPE``'s)."""
    eps_ls = row.changes.get("eps_ls", grid.base.get("eps_ls", CPU_RECIPE.eps_ls))
    return TrainingRecipe(grid.steps, grid.batch_size, grid.lr, grid.warmup, eps_ls)


def same_shapes(grid: Grid | str, row: Row) -> bool:
    """Whether ``row``'s parameters have the same names and shapes, in the same order, as the
    grid's base row's. Then seed ``s`` draws the same initial weights for both (the same draws of
    the random generator fill the same tensors), and seed ``s`` of the row and of the base are a
    pair. A row that changes a shape (``d_k``, ``N``, ``d_model``, ``d_ff``, learned positions)
    draws other weights from the same seed after its first changed tensor: it shares with the
    base's seed only what is drawn before (the token embedding, and for some rows a few biases;
    tests/test_experiments.py), so it is treated as unpaired, which is conservative. Built on the
    meta device (no memory) with a nominal vocabulary: both models share the task's, whose size
    changes no comparison."""
    grid = GRIDS[grid] if isinstance(grid, str) else grid

    def shapes(of: Row) -> list[tuple[str, torch.Size]]:
        with torch.device("meta"):
            model = Transformer(_config(grid, of, vocab_size=16, pad_id=0))
        return [(name, p.shape) for name, p in model.named_parameters()]

    return shapes(row) == shapes(grid.row("base"))


def evaluate(
    model: Transformer, pairs: Sequence[tuple[str, str]], vocab, batch_size: int = 500
) -> tuple[float, float]:
    """Teacher-forced cross-entropy (no label smoothing) per target token on ``pairs``, and its
    perplexity ``exp(loss)`` (:func:`~transformer_lib.training.train.perplexity`): the paper's
    "perplexity per wordpiece", here per character (``<eos>`` included)."""
    batches = (
        make_batch(pairs[start : start + batch_size], vocab)
        for start in range(0, len(pairs), batch_size)
    )
    ppl = perplexity(model, batches)
    return math.log(ppl), ppl


def train_row(
    grid: Grid,
    row: Row,
    seed: int,
    task: StringProgramTask | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> Transformer:
    """Train one row for one seed on the grid's budget and return the trained model: the path of
    :func:`run_one`, without the scoring, for a notebook that looks into the model further.

    The same path as :func:`~transformer_lib.training.train.train_task`
    (:func:`~transformer_lib.training.train.make_trainer`, then :meth:`Trainer.fit`) on the grid's
    budget and the row's label smoothing, on ``task``'s training batches.
    """
    task = task if task is not None else StringProgramTask()
    config = _config(grid, row, len(task.vocab), task.vocab.pad_id)
    recipe = _recipe(grid, row)
    trainer = make_trainer(config, recipe, seed, device)
    trainer.fit(
        lambda step: task.train_batch(step, recipe.batch_size), recipe.steps, progress=progress
    )
    return trainer.model


def run_one(
    grid: Grid,
    row: Row,
    seed: int,
    task: StringProgramTask | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
) -> dict:
    """Train one row for one seed on the grid's budget (:func:`train_row`) and return its CSV row
    (a dict over :data:`COLUMNS`). Scores come from ``task.valid_pairs`` and
    ``task.generalisation_pairs``.
    """
    task = task if task is not None else StringProgramTask()
    config = _config(grid, row, len(task.vocab), task.vocab.pad_id)
    recipe = _recipe(grid, row)
    started, cpu_started = time.perf_counter(), time.process_time()
    model = train_row(grid, row, seed, task, device, progress)
    dev_loss, dev_ppl = evaluate(model, task.valid_pairs, task.vocab)
    match = exact_match(model, task.valid_pairs, task.vocab)
    gen_match = (
        exact_match(model, task.generalisation_pairs, task.vocab)
        if task.generalisation_pairs
        else float("nan")
    )
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {
        "grid": grid.name,
        "group": row.group,
        "config": row.name,
        "seed": seed,
        "N": config.num_layers,
        "d_model": config.d_model,
        "d_ff": config.d_ff,
        "h": config.num_heads,
        "d_k": head_width(config),
        "P_drop": config.dropout,
        "eps_ls": recipe.eps_ls,
        "positional": config.positional,
        "parameters": count_parameters(model)["total"],
        "steps": grid.steps,
        "batch_size": grid.batch_size,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "device": torch.device(device).type,
        "threads": torch.get_num_threads(),
        "dev_loss": round(dev_loss, 4),
        "dev_ppl": round(dev_ppl, 4),
        "exact_match": round(match, 4),
        "gen_exact_match": round(gen_match, 4),
    }


_RESULT_TYPES = {
    key: int
    for key in (
        "seed",
        "N",
        "d_model",
        "d_ff",
        "h",
        "d_k",
        "parameters",
        "steps",
        "batch_size",
        "threads",
    )
} | {
    key: float
    for key in (
        "P_drop",
        "eps_ls",
        "wall_s",
        "cpu_s",
        "dev_loss",
        "dev_ppl",
        "exact_match",
        "gen_exact_match",
    )
}


def read_results(path: str | os.PathLike = DEFAULT_CSV) -> list[dict]:
    """The rows of a results CSV (:data:`COLUMNS`), numbers converted; an empty list when the file
    does not exist."""
    return read_csv(path, _RESULT_TYPES, COLUMNS) if Path(path).exists() else []


def _append(path: Path, result: dict) -> None:
    """Append one run to the CSV (writing the header first in a new file) and flush it to disk at
    once."""
    new = not path.exists() or path.stat().st_size == 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(result)
        f.flush()
        os.fsync(f.fileno())


def run_grid(
    grid: Grid | str = "cpu",
    path: str | os.PathLike = DEFAULT_CSV,
    device: torch.device | str = "cpu",
    rows: Iterable[str] | None = None,
    seeds: Iterable[int] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Train every (row, seed) of ``grid`` not yet in ``path``, appending each result at once.

    ``rows`` and ``seeds`` select a part of the grid (names as in ``grid.rows``). Returns the new
    results.
    """
    grid = GRIDS[grid] if isinstance(grid, str) else grid
    path = Path(path)
    selected = [grid.row(name) for name in rows] if rows is not None else list(grid.rows)
    seeds = tuple(seeds) if seeds is not None else grid.seeds
    done = {(r["grid"], r["config"], r["seed"]) for r in read_results(path)}
    task = StringProgramTask()
    pending = [
        (row, seed) for row in selected for seed in seeds if (grid.name, row.name, seed) not in done
    ]
    skipped = len(selected) * len(seeds) - len(pending)
    if skipped:
        log(f"{skipped} run(s) already in {os.fspath(path)}: skipped")
    results = []
    bar = tqdm(pending, desc=f"grid {grid.name}", unit="run", disable=not progress, mininterval=1.0)
    for row, seed in bar:
        bar.set_postfix_str(f"{row.name} seed {seed}", refresh=False)
        result = run_one(grid, row, seed, task, device)
        _append(path, result)
        results.append(result)
    bar.close()
    return results


def summarise(results: Iterable[dict], grid: str = "cpu", metric: str = "dev_ppl") -> list[dict]:
    """Per configuration of ``grid`` (in the grid's order): the seeds, mean, sample standard
    deviation, min and max of ``metric``, and the mean parameters and wall time."""
    by_config: dict[str, list[dict]] = {}
    for r in results:
        if r["grid"] == grid:
            by_config.setdefault(r["config"], []).append(r)
    order = {row.name: i for i, row in enumerate(GRIDS[grid].rows)} if grid in GRIDS else {}
    summary = []
    for name in sorted(by_config, key=lambda n: order.get(n, len(order))):
        runs = by_config[name]
        values = [r[metric] for r in runs]
        summary.append(
            {
                "config": name,
                "group": runs[0]["group"],
                "seeds": len(runs),
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else float("nan"),
                "min": min(values),
                "max": max(values),
                "parameters": runs[0]["parameters"],
                "wall_s": statistics.fmean(r["wall_s"] for r in runs),
                "exact_match": statistics.fmean(r["exact_match"] for r in runs),
            }
        )
    return summary


def spread_vs_noise(summary: Sequence[dict]) -> dict:
    """The grid's spread (worst row mean minus best row mean) against the typical seed-to-seed noise
    (the median of the rows' standard deviations), and their ratio."""
    rows = [s for s in summary if s["seeds"] > 1]
    if len(rows) < 2:
        raise ValueError(
            "spread_vs_noise needs at least two configurations with two or more seeds each"
        )
    best, worst = min(rows, key=lambda s: s["mean"]), max(rows, key=lambda s: s["mean"])
    noise = statistics.median(s["std"] for s in rows)
    spread = worst["mean"] - best["mean"]
    return {
        "best": best["config"],
        "worst": worst["config"],
        "spread": spread,
        "seed_std": noise,
        "ratio": spread / noise if noise > 0 else float("inf"),
    }


# --- statistics: tests that fit a grid of seeded runs ---------------------------------------------
#
# Every run of every row, whatever its seed, trains on the same batches (the task draws the batch of
# step s from s alone), so the batches pair nothing. What pairs seed s of a row with seed s of the
# base is the seed's initial weights (and dropout stream), and only when the row's parameters have
# the base's shapes (same_shapes): those rows get a paired t-test on the per-seed differences, the
# others Welch's unpaired test. scipy is not a dependency: Student's t comes from the regularized
# incomplete beta function, computed below by its continued fraction.


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (modified
    Lentz), on the side where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * value / a


def student_t_p(t: float, df: float) -> float:
    """The two-sided p-value of Student's t statistic ``t`` on ``df`` degrees of freedom: the chance
    of a |t| at least this large when there is no difference, I_{df/(df+t^2)}(df/2, 1/2)."""
    if not (isinstance(df, (int, float)) and df > 0):
        raise ValueError(f"df must be a number > 0, got {df!r}")
    if math.isnan(t):
        raise ValueError(f"t must be a number, got {t!r}")
    if math.isinf(t):
        return 0.0
    return min(1.0, _incomplete_beta(df / 2, 0.5, df / (df + t * t)))


def _samples(name: str, values: Sequence[float], minimum: int = 2) -> list[float]:
    values = list(values)
    if len(values) < minimum or not all(
        isinstance(v, (int, float)) and math.isfinite(v) for v in values
    ):
        raise ValueError(f"{name} must be {minimum} or more finite numbers, got {values!r}")
    return [float(v) for v in values]


def _t_result(mean: float, se: float, df: float) -> tuple[float, float]:
    """t and its two-sided p; a zero standard error gives t = ±inf (p = 0), or t = 0 (p = 1)
    when the mean is zero too."""
    if se == 0.0:
        return (0.0, 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / se
    return t, student_t_p(t, df)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> dict:
    """Student's paired t-test of ``a[i] - b[i]`` (pair i: the same seed): the differences, their
    mean and sample standard deviation, t on n - 1 degrees of freedom and the two-sided p-value.

    It assumes the per-pair differences are independent draws from a normal distribution; with
    three pairs that assumption carries the test (:func:`sign_flip_p` makes none, and cannot reach
    p < 0.25 at n = 3)."""
    a, b = _samples("a", a), _samples("b", b)
    if len(a) != len(b):
        raise ValueError(
            f"a paired test needs as many values in a as in b, got {len(a)} and {len(b)}"
        )
    differences = [x - y for x, y in zip(a, b, strict=True)]
    mean, sd = statistics.fmean(differences), statistics.stdev(differences)
    t, p = _t_result(mean, sd / math.sqrt(len(differences)), len(differences) - 1)
    return {"differences": differences, "mean": mean, "sd": sd, "t": t, "df": len(a) - 1, "p": p}


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> dict:
    """Welch's unpaired t-test of mean(a) - mean(b): for independent samples (no pairing), each with
    its own variance; t, the Welch-Satterthwaite degrees of freedom and the two-sided p-value."""
    a, b = _samples("a", a), _samples("b", b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    mean = statistics.fmean(a) - statistics.fmean(b)
    if va + vb == 0.0:
        df = float(len(a) + len(b) - 2)
    else:
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    t, p = _t_result(mean, math.sqrt(va + vb), df)
    return {"mean": mean, "t": t, "df": df, "p": p}


def sign_flip_p(differences: Sequence[float]) -> float:
    """The exact two-sided p-value of the sign-flip (permutation) test of paired differences: the
    share of the 2^n sign patterns whose mean is at least as far from 0 as the observed one. It
    assumes only that a difference is as likely to be +d as -d when there is no effect; its smallest
    possible value is 2 / 2^n, 0.25 for n = 3."""
    differences = _samples("differences", differences, minimum=1)
    if len(differences) > 20:
        raise ValueError(f"sign_flip_p enumerates 2^n patterns: n <= 20, got {len(differences)}")
    observed = abs(sum(differences)) * (1 - 1e-12)
    count = 0
    for pattern in range(2 ** len(differences)):
        total = sum(-d if pattern >> i & 1 else d for i, d in enumerate(differences))
        count += abs(total) >= observed
    return count / 2 ** len(differences)


def holm(p_values: dict[str, float]) -> dict[str, float]:
    """Holm's step-down adjustment of several p-values (one per comparison) so that the chance of
    any false call among them stays at the level: the k-th smallest is multiplied by (m - k + 1),
    and the adjusted values are kept non-decreasing."""
    adjusted, running = {}, 0.0
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    for k, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - k) * p))
        adjusted[name] = running
    return adjusted


def compare_with_base(
    results: Iterable[dict], grid: Grid | str = "cpu", metric: str = "dev_ppl", base: str = "base"
) -> list[dict]:
    """Every other row of ``grid`` against ``base``, in the grid's order, with the test its design
    calls for.

    A row with the base's parameter shapes (:func:`same_shapes`) starts seed ``s`` from the base's
    seed-``s`` weights: :func:`paired_t_test` on row - base for the seeds both have, and the exact
    sign-flip p (:func:`sign_flip_p`). Any other row (and a row the grid does not define) shares
    nothing with the base's seeds but the batches, which every seed shares: :func:`welch_t_test`
    of the row's seeds against the base's, and no sign-flip p (None).

    Returns:
        One dict per row: ``config``, ``paired`` (True for the paired test), ``test`` ("paired" or
        "Welch"), ``seeds``, ``differences`` (row - base seed by seed when paired, else each of the
        row's seeds minus the base's mean), their ``mean``, ``sd`` (of the paired differences;
        None when unpaired), ``t``, ``df``, ``p``, ``sign_flip_p`` and Holm's p over all the rows
        (``holm_p``).
    """
    grid = GRIDS[grid] if isinstance(grid, str) else grid
    runs: dict[str, dict[int, float]] = {}
    for r in results:
        if r["grid"] == grid.name:
            runs.setdefault(r["config"], {})[r["seed"]] = r[metric]
    if base not in runs:
        raise ValueError(f"the results hold no {base!r} row of grid {grid.name!r}")
    rows = {row.name: row for row in grid.rows}
    order = {name: i for i, name in enumerate(rows)}
    comparisons = []
    for name in sorted(runs, key=lambda n: order.get(n, len(order))):
        if name == base:
            continue
        if name in rows and same_shapes(grid, rows[name]):
            seeds = sorted(set(runs[name]) & set(runs[base]))
            test = paired_t_test([runs[name][s] for s in seeds], [runs[base][s] for s in seeds])
            extra = {
                "paired": True,
                "test": "paired",
                "sign_flip_p": sign_flip_p(test["differences"]),
            }
        else:
            seeds = sorted(runs[name])
            ours, theirs = [runs[name][s] for s in seeds], list(runs[base].values())
            test = welch_t_test(ours, theirs)
            base_mean = statistics.fmean(theirs)
            test |= {"differences": [v - base_mean for v in ours], "sd": None}
            extra = {"paired": False, "test": "Welch", "sign_flip_p": None}
        comparisons.append({"config": name, "seeds": seeds, **extra, **test})
    adjusted = holm({c["config"]: c["p"] for c in comparisons})
    for c in comparisons:
        c["holm_p"] = adjusted[c["config"]]
    return comparisons


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_lib.applications.experiments",
        description="Train the Table 3 grid (resumable: runs already in the CSV are skipped).",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="cpu or cuda (default: the best available); cuda runs the bigger 'cuda' grid",
    )
    parser.add_argument(
        "--out", default=os.fspath(DEFAULT_CSV), help="results CSV (default: %(default)s)"
    )
    parser.add_argument(
        "--rows", nargs="+", default=None, help="only these rows (names as in the CSV)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=None, help="only these seeds")
    parser.add_argument(
        "--grid",
        choices=sorted(GRIDS),
        default=None,
        help="which grid (default: 'cuda' on a cuda device, else 'cpu')",
    )
    args = parser.parse_args(argv)
    try:
        device = pick_device(args.device)
    except ValueError as exc:
        parser.error(str(exc))
    grid = args.grid or ("cuda" if device.type == "cuda" else "cpu")
    started = time.perf_counter()
    try:
        new = run_grid(grid, args.out, device, args.rows, args.seeds)
    except KeyboardInterrupt:
        print(
            f"\ninterrupted; finished runs are in {args.out}: run the same command again to resume"
        )
        return 130
    except ValueError as exc:
        parser.error(str(exc))
    print(
        f"{len(new)} run(s) in {time.perf_counter() - started:.0f} s on {device.type}, appended to "
        f"{args.out}"
    )
    summary = summarise(read_results(args.out), grid)
    if summary:
        for s in summary:
            print(
                f"{s['config']:<22} dev PPL {s['mean']:.3f} ± {s['std']:.3f} ({s['seeds']} seeds)"
            )
        if sum(s["seeds"] > 1 for s in summary) >= 2:
            sv = spread_vs_noise(summary)
            print(
                f"spread {sv['spread']:.3f} ({sv['best']} .. {sv['worst']}) = {sv['ratio']:.1f} x "
                f"seed std {sv['seed_std']:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
