"""Matched comparison of label smoothing eps_ls = 0 and 0.1 on the date task (notebook 06, section
6).

Both settings train ``tl.CPU_RECIPE`` (``cpu_tiny``, Adam with warm-up and linear decay, 1600 steps
of 64 dates) from the same initial weights (``seed``) on the same batches (the task draws batch
``s`` from ``(task seed, s)``), and the exact match on the validation split is read every
``eval_every`` steps. Only ``eps`` differs.

Regenerate both committed CSVs (seven runs of about 2-5 minutes each on one CPU core, longer on a
shared machine; the rows depend on the CPU and on the order of float sums in the library, so
regenerate them after a change of the training code's numerics, even one that only reorders a sum):

    OMP_NUM_THREADS=1 python results/label_smoothing.py --all

or one of them:

    OMP_NUM_THREADS=1 python results/label_smoothing.py    # seeds 0 1 2: label_smoothing.csv
    OMP_NUM_THREADS=1 python results/label_smoothing.py --seeds 0 --eps 0.1 --paper-factor 0.24 \
        --out results/paper_schedule.csv                   # exercise 3: the paper's schedule

The test split is not read here: the recipe is chosen on the validation split.
"""

import argparse
import csv
import time
from pathlib import Path

import torch

import transformer_lib as tl

CSV = Path(__file__).with_name("label_smoothing.csv")
PAPER_CSV = CSV.with_name("paper_schedule.csv")  # notebook 06's exercise 3
FIELDS = ["schedule", "eps", "seed", "step", "val_exact_match", "train_seconds"]


def track_exact_match(
    eps: float,
    seed: int,
    eval_every: int = 100,
    task: tl.DateTask | None = None,
    paper_factor: float | None = None,
) -> list[dict]:
    """Train ``tl.CPU_RECIPE`` with label smoothing ``eps`` from initial weights ``seed``; one row
    per evaluation: the step, the exact match on the validation split, and the seconds spent
    training so far (evaluation excluded; indicative only, they depend on the machine and its load).

    With ``paper_factor`` the schedule is the paper's instead (``tl.paper_optimizer(d_model, warmup,
    factor)``, notebook 06's exercise 3); everything else stays the recipe's."""
    task = task if task is not None else tl.DateTask()  # the same data and batches for every run
    recipe = tl.CPU_RECIPE.replace(eps_ls=eps)
    config = tl.TransformerConfig.cpu_tiny(len(task.vocab))

    def paper(model):  # exercise 3: the paper's schedule instead of the recipe's
        return tl.paper_optimizer(model, config.d_model, recipe.warmup, paper_factor)

    trainer = tl.train.make_trainer(
        config, recipe, seed, optimizer=None if paper_factor is None else paper
    )
    model = trainer.model
    rows, seconds = [], 0.0
    for step in range(eval_every, recipe.steps + 1, eval_every):
        started = time.perf_counter()
        trainer.fit(
            lambda s: task.train_batch(s, recipe.batch_size), num_steps=step, progress=False
        )
        seconds += time.perf_counter() - started
        accuracy = tl.exact_match(model, task.valid_pairs, task.vocab)
        schedule = "recipe" if paper_factor is None else f"paper, factor {paper_factor}"
        rows.append(
            {
                "schedule": schedule,
                "eps": eps,
                "seed": seed,
                "step": step,
                "val_exact_match": round(accuracy, 4),
                "train_seconds": round(seconds, 1),
            }
        )
    return rows


def read_rows(path: Path = CSV) -> list[dict]:
    """The committed rows, with numbers as numbers (read by the library's one results reader)."""
    types = {
        "eps": float,
        "seed": int,
        "step": int,
        "val_exact_match": float,
        "train_seconds": float,
    }
    return tl.experiments.read_csv(path, types, FIELDS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument(
        "--paper-factor",
        type=float,
        default=None,
        help="train with the paper's schedule and this factor instead of the recipe's",
    )
    parser.add_argument("--out", type=Path, default=CSV)
    parser.add_argument(
        "--all",
        action="store_true",
        help="write both committed CSVs with their settings: label_smoothing.csv (seeds 0 1 2, "
        "eps 0 and 0.1) and paper_schedule.csv (seed 0, eps 0.1, paper factor 0.24)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.all:
        write(CSV, [0, 1, 2], [0.0, 0.1], None)
        write(PAPER_CSV, [0], [0.1], 0.24)
    else:
        write(args.out, args.seeds, args.eps, args.paper_factor)


def write(path: Path, seeds: list[int], eps_values: list[float], paper_factor: float | None):
    """Train every (seed, eps) pair and write its rows to ``path``, printing each row."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        task = tl.DateTask()
        for seed in seeds:
            for eps in eps_values:
                for row in track_exact_match(eps, seed, task=task, paper_factor=paper_factor):
                    writer.writerow(row)
                    print(row, flush=True)
                f.flush()


if __name__ == "__main__":
    main()
