#!/usr/bin/env bash
# Every notebook executed top to bottom on a GPU machine (errors and failed assertions only: nbval's
# output comparison stays with the pinned CPU environment), then the unit tests, as GUIDE §10 describes.
# The machine has Python, torch, matplotlib, tokenizers, sacrebleu, transformers, pytest and
# pytest-xdist but no Jupyter: wheels of nbclient, ipykernel, ipywidgets, nbval and their pure-Python
# dependencies travel in .whl/ (downloaded beforehand with `pip download --only-binary=:all:
# --python-version 3.12 --platform manylinux_2_28_x86_64 ...`). Logs go to $OUT (default /tmp/gpu-out).
# NOTEBOOKS (default: every notebook), WORKERS (default 6) and WHEELS=0 (use the installed Jupyter)
# narrow a dry run on a CPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}
WORKERS=${WORKERS:-6}
mkdir -p "$OUT"
if [ "${WHEELS:-1}" = 1 ] && compgen -G ".whl/*.whl" >/dev/null; then
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
		--target /tmp/site .whl/*.whl || exit 1
	export PYTHONPATH=/tmp/site:$PWD
else
	export PYTHONPATH=$PWD
fi
unset MPLBACKEND
export OMP_NUM_THREADS=2
python3 - >"$OUT/device.txt" 2>&1 <<'PY'
import platform, sys, torch
import transformer_lib as tl
device = tl.pick_device()
print("python", sys.version.split()[0], "torch", torch.__version__, platform.platform())
print("pick_device():", device, torch.cuda.get_device_name() if device.type == "cuda" else "")
PY
cat "$OUT/device.txt"
# 07 trains its own model when 06's checkpoint is missing, so the notebooks run side by side.
# shellcheck disable=SC2086
python3 -m pytest -p no:cacheprovider -q -rfE -n "$WORKERS" --dist loadfile --nbval-lax \
	--nbval-current-env --nbval-cell-timeout 500 ${NOTEBOOKS:-notebooks} >"$OUT/notebooks.log" 2>&1
echo "notebooks: exit $? ($(tail -1 "$OUT/notebooks.log"))"
if [ -z "${NOTEBOOKS:-}" ]; then
	python3 -m pytest -p no:cacheprovider -q -rfE -n "$WORKERS" tests >"$OUT/unit.log" 2>&1
	echo "unit tests: exit $? ($(tail -1 "$OUT/unit.log"))"
fi
