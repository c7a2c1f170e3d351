#!/usr/bin/env bash
# One GPU session for issue 38, in about 7.5 minutes of wall time on one H100:
#   1. `python -m transformer_lib.bench` (alone on the GPU, at most 90 s): notebook 09's
#      measurements (attention memory and growth, fused backends, mixed precision at a launch-bound
#      and at a large size), attention's share of the GEMM rate, ours against nn.Transformer;
#   2. three translation recipes trained side by side on the same GPU for GPU_RUN_MINUTES (5)
#      training minutes each: CUDA_RECIPE ("cuda", the one `train --device cuda` runs),
#      CUDA_SMALL_RECIPE and CUDA_BIG_RECIPE. They share the GPU, so each runs slower than it would
#      alone: their numbers are conservative. Each logs valid BLEU at 0.1/0.2/0.4/0.6/0.8/0.9/1.0 of
#      its budget (0.5, 1, 2, 3, 4, 4.5, 5 minutes), ships its model, and is scored once on the test
#      split (greedy, beam 4, copy baseline); "cuda" also gets the beam-4 test BLEU of every weight it
#      kept (its test-BLEU curve).
# Everything lands in $OUT (default ./gpu_out): summary.txt, bench.txt, env.txt, runs.tar.gz.
# Dry run on a CPU: GPU_RUN_DEVICE=cpu GPU_RUN_MINUTES=0.2 GPU_RUN_RECIPES=tiny bash tools/gpu_run.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}
MINUTES=${GPU_RUN_MINUTES:-5}
DEVICE=${GPU_RUN_DEVICE:-cuda}
RECIPES=${GPU_RUN_RECIPES:-cuda cuda_small cuda_big}
# the benchmark's parts that notebook 09 and issue 38 ask about (beam, gqa, throughput left out)
BENCH_ARGS=${GPU_RUN_BENCH_ARGS:---parts attention,growth,memory,precision,sdpa,share,versus}
BENCH_SECONDS=${GPU_RUN_BENCH_SECONDS:-90}
# the whole script ends within this many seconds, summary included: every job is stopped in time
TOTAL_SECONDS=${GPU_RUN_SECONDS:-510}
PYTHON=${PYTHON:-python}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1  # a job stopped by its timeout still leaves what it printed
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}  # three trainings share 16 cores
mkdir -p "$OUT"
WORK=$(mktemp -d)
started=$(date +%s)
deadline=$((started + TOTAL_SECONDS - 25))  # 25 s kept for the summary and the archive
stamp() { echo "[$(($(date +%s) - started)) s] $*"; }

{
    date -u
    nvidia-smi 2>&1 | head -20
    $PYTHON -c "import torch, sys; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
    echo "cores: $(nproc)   minutes: $MINUTES   device: $DEVICE   recipes: $RECIPES"
    git log -1 --format='commit %H %s' 2>/dev/null
} > "$OUT/env.txt" 2>&1

# 1. The benchmark, alone on the GPU.
stamp "bench" | tee "$WORK/progress.log"
timeout "$BENCH_SECONDS" $PYTHON -m transformer_lib.bench --device "$DEVICE" $BENCH_ARGS \
    > "$OUT/bench.txt" 2>&1
echo "exit status $? (124: stopped at $BENCH_SECONDS s)" >> "$OUT/bench.txt"

# 2. The recipes, side by side. Valid-BLEU marks at the same fractions of any budget.
MARKS=$($PYTHON -c "m = float('$MINUTES'); print(','.join(f'{m * f:g}' for f in \
(0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0)))")
run_recipe() {
    local name=$1 run="$WORK/$1" extra=()
    [ "$name" = cuda ] && extra=(--run-folder "$run")
    $PYTHON -m transformer_lib.applications.translation train --recipe "$name" \
        --device "$DEVICE" --minutes "$MINUTES" --eval-minutes "$MARKS" --folder "$run" \
        --ship "$run/shipped" \
        && $PYTHON -m transformer_lib.applications.translation evaluate \
            --folder "$run/shipped" --device "$DEVICE" "${extra[@]}"
}
export WORK PYTHON DEVICE MINUTES MARKS  # run_recipe runs in a child shell, under timeout
left=$((deadline - $(date +%s)))
for name in $RECIPES; do
    stamp "train $name" >> "$WORK/progress.log"
    (timeout "$left" bash -c "$(declare -f run_recipe); run_recipe $name"; \
        echo "exit status $? (124: stopped at the script's deadline)") > "$WORK/$name.log" 2>&1 &
done
wait
stamp "all runs done" >> "$WORK/progress.log"

# 3. The summary: per run, the valid-BLEU curve, the averaged weights, the test scores, the memory.
$PYTHON - "$WORK" $RECIPES > "$OUT/summary.txt" 2>&1 <<'PY'
import json
import sys
from pathlib import Path

work, names = Path(sys.argv[1]), sys.argv[2:]
for name in names:
    run = work / name
    print(f"== {name}")
    try:
        recipe = json.loads((run / "recipe.json").read_text())
        log = json.loads((run / "training_log.json").read_text())
    except FileNotFoundError as exc:
        print(f"   no result: {exc}")
        continue
    sizes = ("d_model", "num_layers", "num_heads", "d_ff", "dropout", "max_tokens", "warmup",
             "lr_factor", "precision", "norm_first", "vocab_size")
    print("   " + ", ".join(f"{k}={recipe[k]}" for k in sizes))
    print(f"   training {log['train_seconds']:.0f} s, evaluation {log['eval_seconds']:.0f} s, "
          f"peak GPU memory {log.get('peak_gpu_MiB', 'n/a')} MiB")
    for point in log["curve"]:
        print(f"   {point['minutes']:5g} min  step {point['step']:6d}  loss {point['loss']:.3f}  "
              f"valid BLEU {point['valid_bleu']:6.2f}")
    if "averaged" in log:
        print(f"   averaged {log['averaged']['minutes']}: valid BLEU {log['averaged']['valid_bleu']}")
    metrics = run / "shipped" / "metrics.json"
    if metrics.is_file():
        m = json.loads(metrics.read_text())
        print(f"   TEST ({m['test_pairs']} pairs): beam4 BLEU {m['beam4']['bleu']}  greedy "
              f"{m['greedy']['bleu']}  copy {m['copy_source']['bleu']}  chrF beam4 "
              f"{m['beam4']['chrf']}")
        for point in m.get("curve", []):
            print(f"   test BLEU beam4 after {point['minutes']:g} min (step {point['step']}): "
                  f"{point['test_bleu_beam4']}")
    else:
        print("   no test metrics")
    print()
PY
cat "$WORK/progress.log" >> "$OUT/summary.txt"

# 4. Logs, recipes, training logs and metrics (no weights) in one archive.
tar -czf "$OUT/runs.tar.gz" -C "$WORK" --exclude='*.pt' . 2>/dev/null
stamp "done; results in $OUT" | tee -a "$OUT/summary.txt"
cat "$OUT/summary.txt"
