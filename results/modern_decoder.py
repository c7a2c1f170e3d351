"""Controlled runs of notebook 13 (the modern decoder) on notebook 11's corpus, the standard
library's source.

Three comparisons, each over seeds 0 1 2; within a comparison only the named switch differs:

- ``positions``: the modern block (pre-norm RMSNorm, SwiGLU, no biases) with sinusoidal, learned or
  rotary positions. Trained on windows of ``TRAIN_T`` = 64 characters, scored on validation windows
  of 128: the loss of positions 0-63 (inside the training length) and of positions 64-127 (past it;
  learned rows 64-127 were never trained, they keep their initial values).
- ``kv_heads``: the modern block with rotary positions and h = 8 query heads sharing 8, 2 or 1
  key/value heads.
- ``blocks``: the paper's block (post-LN LayerNorm, sinusoids added, ReLU feed-forward of 4 d_model,
  biases) vs the modern block (pre-norm RMSNorm, rotary, SwiGLU, no biases), at nearly equal
  parameter counts (the modern d_ff is chosen for that; both counts are written), the same steps and
  the same batches.

Every run: d_model 64, 2 layers, 4 heads (8 in ``kv_heads``), tied embeddings, no dropout, ``STEPS``
steps of ``BATCH`` windows of 64 characters, AdamW (betas 0.9, 0.95; weight decay 0.1 on the linear
layers' weights only) with a cosine schedule after a linear warm-up, the same for every model. The
seed sets the initial weights; the batches are the same for every run (the corpus draws batch ``s``
from ``s``). The validation windows are fixed. So the seed-to-seed spread is the noise of the
initial weights alone, and runs with the same seed are paired. Losses are nats per character.
Train seconds are single-threaded and indicative only (the machine was shared).

    # all three comparisons -> modern_decoder.csv
    OMP_NUM_THREADS=1 python results/modern_decoder.py
    # one comparison, one seed, written elsewhere
    OMP_NUM_THREADS=1 python results/modern_decoder.py --only blocks --seeds 0 --out /tmp/blocks.csv

``tests/test_results_reproduce.py`` trains the paper block's seed-0 row again and compares it with
the CSV.

The test split is not read.
"""

import argparse
import csv
import math
import time
from pathlib import Path

import torch

import transformer_lib as tl
from transformer_lib import lm

CSV = Path(__file__).with_name("modern_decoder.csv")
FIELDS = [
    "comparison",
    "variant",
    "seed",
    "parameters",
    "steps",
    "loss_in",
    "loss_past",
    "train_seconds",
]
STEPS, BATCH, TRAIN_T, EVAL_T, LR = 400, 16, 64, 128, 3e-3
WARMUP = STEPS // 10
D_MODEL, LAYERS = 64, 2


def cosine_with_warmup(step: int, warmup: int, total_steps: int, floor: float = 0.1) -> float:
    """A multiplier of the peak learning rate: linear from 0 to 1 over ``warmup`` steps, then half a
    cosine down to ``floor`` at ``total_steps`` (steps count from 1)."""
    step = max(step, 1)
    if step <= warmup:
        return step / warmup
    progress = min(1.0, (step - warmup) / (total_steps - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def adamw_cosine(
    model: torch.nn.Module,
    lr: float = LR,
    warmup: int = WARMUP,
    total_steps: int = STEPS,
    weight_decay: float = 0.1,
):
    """AdamW (Loshchilov & Hutter 2019) with decoupled weight decay on the linear layers' weights
    only (not on embeddings, positions, norm gains or biases), and :func:`cosine_with_warmup`."""
    decayed = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Linear)}
    groups = [
        {
            "params": [p for p in model.parameters() if id(p) in decayed],
            "weight_decay": weight_decay,
        },
        {"params": [p for p in model.parameters() if id(p) not in decayed], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: cosine_with_warmup(i + 1, warmup, total_steps)
    )
    return optimizer, scheduler


def paper_block(vocab_size: int, **changes) -> lm.LMConfig:
    """The paper's block as a decoder-only LM: post-LN LayerNorm, sinusoids added to scaled
    embeddings, ReLU feed-forward of 4 d_model, biases, tied output."""
    fields = dict(
        d_model=D_MODEL,
        num_heads=4,
        d_ff=4 * D_MODEL,
        num_layers=LAYERS,
        dropout=0.0,
        max_len=EVAL_T,
        positional="sinusoidal",
        norm_first=False,
        pad_id=None,
    )
    return lm.LMConfig(vocab_size, **{**fields, **changes})


def modern_block(vocab_size: int, **changes) -> lm.LMConfig:
    """Llama's block (``LMConfig.llama_like``) at this size: pre-norm RMSNorm, rotary positions,
    SwiGLU, no biases; multi-head (n_kv_heads = h) and tied embeddings unless changed."""
    fields = dict(
        d_model=D_MODEL,
        num_heads=4,
        d_ff=matched_d_ff(vocab_size),
        num_layers=LAYERS,
        max_len=EVAL_T,
        n_kv_heads=None,
        tie_embeddings=True,
    )
    return lm.LMConfig.llama_like(vocab_size, **{**fields, **changes})


def parameters(config: lm.LMConfig) -> int:
    with torch.device("meta"):
        return tl.count_parameters(lm.DecoderOnlyLM(config))["total"]


def matched_d_ff(vocab_size: int) -> int:
    """The SwiGLU width whose modern model has the parameter count closest to the paper block's."""
    target = parameters(paper_block(vocab_size))
    base = lm.LMConfig.llama_like(
        vocab_size,
        d_model=D_MODEL,
        num_heads=4,
        num_layers=LAYERS,
        max_len=EVAL_T,
        n_kv_heads=None,
        tie_embeddings=True,
        d_ff=1,
    )
    # each unit of d_ff adds a row of gate and up and a column of down, per layer
    per_unit = 3 * D_MODEL * LAYERS
    return max(1, round((target - parameters(base)) / per_unit) + 1)


def validation_windows(corpus: tl.PythonSourceCorpus, count: int = 16, batch_size: int = 16):
    return [corpus.batch("valid", step, batch_size, EVAL_T) for step in range(count)]


@torch.no_grad()
def split_losses(model: lm.DecoderOnlyLM, windows) -> tuple[float, float]:
    """Mean loss of positions ``0..TRAIN_T-1`` and of positions ``TRAIN_T..EVAL_T-1`` over the
    windows."""
    model.eval()
    inside = past = 0.0
    for inputs, targets in windows:
        # (B, T)
        losses = torch.nn.functional.cross_entropy(
            model(inputs).transpose(1, 2), targets, reduction="none"
        )
        inside += losses[:, :TRAIN_T].mean().item()
        past += losses[:, TRAIN_T:].mean().item()
    return inside / len(windows), past / len(windows)


def train(
    config: lm.LMConfig, seed: int, corpus: tl.PythonSourceCorpus, windows, steps: int = STEPS
) -> dict:
    """Train ``config`` from initial weights ``seed``; its parameters, losses and train seconds."""
    tl.seed_everything(seed)
    model = lm.DecoderOnlyLM(config)
    optimizer, scheduler = adamw_cosine(model, warmup=max(1, steps // 10), total_steps=steps)
    trainer = lm.LanguageModelTrainer(model, optimizer, scheduler)
    started = time.perf_counter()
    trainer.fit(lambda step: corpus.batch("train", step, BATCH, TRAIN_T), steps, progress=False)
    seconds = time.perf_counter() - started
    loss_in, loss_past = split_losses(model, windows)
    return {
        "parameters": tl.count_parameters(model)["total"],
        "steps": steps,
        "loss_in": round(loss_in, 4),
        "loss_past": round(loss_past, 4),
        "train_seconds": round(seconds, 1),
    }


def comparisons(vocab_size: int) -> dict[str, dict[str, lm.LMConfig]]:
    """``{comparison: {variant: config}}``."""
    return {
        "positions": {
            p: modern_block(vocab_size, positional=p, scale_embeddings=True)
            for p in ("sinusoidal", "learned", "rope")
        },
        "kv_heads": {
            f"h_kv={k}": modern_block(vocab_size, num_heads=8, n_kv_heads=k) for k in (8, 2, 1)
        },
        "blocks": {"paper": paper_block(vocab_size), "modern": modern_block(vocab_size)},
    }


def read_rows(path: Path = CSV) -> list[dict]:
    """The committed rows, with numbers as numbers."""
    with open(path, newline="") as f:
        return [
            {
                **r,
                "seed": int(r["seed"]),
                "parameters": int(r["parameters"]),
                "steps": int(r["steps"]),
                "loss_in": float(r["loss_in"]),
                "loss_past": float(r["loss_past"]),
                "train_seconds": float(r["train_seconds"]),
            }
            for r in csv.DictReader(f)
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", default=["positions", "kv_heads", "blocks"])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--out", type=Path, default=CSV)
    args = parser.parse_args()
    torch.set_num_threads(1)
    corpus = tl.PythonSourceCorpus()
    windows = validation_windows(corpus)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for comparison, variants in comparisons(len(corpus.vocab)).items():
            if comparison not in args.only:
                continue
            for seed in args.seeds:
                for variant, config in variants.items():
                    row = {
                        "comparison": comparison,
                        "variant": variant,
                        "seed": seed,
                        **train(config, seed, corpus, windows, args.steps),
                    }
                    writer.writerow(row)
                    f.flush()
                    print(row, flush=True)


if __name__ == "__main__":
    main()
