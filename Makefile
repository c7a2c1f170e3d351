# Two commands do all set-up on a fresh machine: `make lab` and `make test`.
# Set-up (a .venv with requirements.txt and the package installed in editable mode) runs only when
# requirements.txt or pyproject.toml changed since the last one.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# An inherited non-interactive backend (MPLBACKEND=Agg) makes inline figures vanish from notebooks.
NOMPL  := env -u MPLBACKEND
# Two pytest workers on two cores: one thread each. With torch's default (a thread per core) in both, the
# threads fight for the cores and training cells run up to 9x slower (measured: 259 s instead of 29 s).
TESTENV := $(NOMPL) OMP_NUM_THREADS=1
# PyTorch from PyPI: the CUDA build on Linux x86-64, the CPU (and Apple MPS) build on macOS and Windows.
# `make lab TORCH_INDEX=cpu` (or `make setup TORCH_INDEX=cpu`) on a fresh clone installs the same pinned version
# from PyTorch's CPU-only index instead: the small build for Linux laptops without an NVIDIA GPU. Any other
# value is used as the index URL (e.g. https://download.pytorch.org/whl/cu128).
TORCH_INDEX ?=
TORCH_INDEX_URL := $(if $(filter cpu,$(TORCH_INDEX)),https://download.pytorch.org/whl/cpu,$(TORCH_INDEX))
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout 300
# Another CPU, simulated: PyTorch's plain (non-vectorised) kernels change results in their last bits, as an Intel
# laptop's kernels do against the AMD EPYC that made the committed outputs. An nbval-compared output that moves
# under them is fragile: print a bound, round further, break ties by a stable key, format explicitly.
OTHER_CPU := ATEN_CPU_CAPABILITY=default

.PHONY: setup lab test test-unit test-notebooks test-notebooks-other-cpu test-oldest test-browser site notebooks \
	solutions images lint bench clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX_URL),$(PY) -m pip install --quiet --disable-pip-version-check \
		"$$(grep '^torch==' requirements.txt)" --index-url $(TORCH_INDEX_URL))
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

# `make lab` serves the repository root, so the notebooks' `../images/` diagrams load, and opens notebook 01.
FIRST_NOTEBOOK := $(firstword $(sort $(wildcard notebooks/*.ipynb)))
LAB_ROOT_FLAG  := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

lab: setup  ## open JupyterLab on the repository (token auth, this machine only); Ctrl-C twice stops it
	@echo "JupyterLab serves $(CURDIR) and opens $(FIRST_NOTEBOOK)."
	@echo "Stop it with Ctrl-C in this terminal (press it twice, or once and answer y)."
	$(NOMPL) $(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=. --LabApp.default_url=/lab/tree/$(FIRST_NOTEBOOK) \
		$(LAB_ROOT_FLAG)

test: setup  ## unit tests and nbval over every notebook, then nbval again on another CPU's kernels
	$(TESTENV) $(PY) -m pytest -n 2 --dist loadfile $(NBVAL) tests notebooks
	$(MAKE) --no-print-directory test-notebooks-other-cpu

test-unit: setup
	$(TESTENV) $(PY) -m pytest -n 2 tests

test-notebooks: setup
	$(TESTENV) $(PY) -m pytest -n 2 --dist loadfile $(NBVAL) notebooks

# The plain kernels are slower (no vectorisation): this pass checks what the outputs say, not how fast, so a cell
# may take up to 900 s (the training cells of 06 and 11 need more than the first pass's 300 s on a loaded machine).
test-notebooks-other-cpu: setup  ## nbval over every notebook on kernels that round differently (see OTHER_CPU)
	$(TESTENV) $(OTHER_CPU) $(PY) -m pytest -n 2 --dist loadfile $(NBVAL) --nbval-cell-timeout 900 notebooks

# The low end of the supported range (README, "Where it runs"): Python 3.10 with requirements-oldest.txt's torch,
# transformers and tokenizers (the rest as requirements.txt pins it), in a second environment of its own,
# .venv-oldest, which `make setup` never touches. The unit tests, then every notebook top to bottom under nbval's
# --nbval-lax: an error or a failed assertion fails it, outputs are not compared (that stays with the pinned .venv,
# whose outputs the notebooks carry). PyPI's torch for Linux x86-64 is the CUDA build, so pip fetches it with its
# NVIDIA libraries (about 3 GB of wheels; they load and run on a machine without a GPU): PyTorch's CPU-only index is not
# reachable from the course's CI machine.
OLDEST_REQUIREMENTS := requirements-oldest.txt
OLDEST_NAMES   = $(shell sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' $(OLDEST_REQUIREMENTS) | paste -sd'|' -)
OLDEST_PYTHON ?= $(or $(shell python3.10 -c "" >/dev/null 2>&1 && echo python3.10),\
	$(firstword $(wildcard $(HOME)/.pyenv/versions/3.10*/bin/python3.10 /usr/bin/python3.10 /usr/local/bin/python3.10)))
VENV_OLDEST  := .venv-oldest
PY_OLDEST    := $(VENV_OLDEST)/bin/python
STAMP_OLDEST := $(VENV_OLDEST)/.installed

$(STAMP_OLDEST): $(OLDEST_REQUIREMENTS) requirements.txt pyproject.toml
	@test -n "$(OLDEST_PYTHON)" || { echo "test-oldest needs Python 3.10 and found none: give its path with" \
		"make test-oldest OLDEST_PYTHON=/path/to/python3.10"; exit 1; }
	test -x $(PY_OLDEST) || $(OLDEST_PYTHON) -m venv $(VENV_OLDEST)
	grep -v -E '^($(OLDEST_NAMES))==' requirements.txt > $(VENV_OLDEST)/requirements.txt
	$(PY_OLDEST) -m pip install --quiet --disable-pip-version-check -r $(OLDEST_REQUIREMENTS) \
		-r $(VENV_OLDEST)/requirements.txt
	$(PY_OLDEST) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP_OLDEST)

test-oldest: $(STAMP_OLDEST)  ## unit tests and every notebook run (outputs not compared) on Python 3.10 and the oldest torch
	$(PY_OLDEST) -c "import sys, torch, transformers; print('test-oldest: Python', sys.version.split()[0], \
		'torch', torch.__version__, 'transformers', transformers.__version__)"
	$(TESTENV) $(PY_OLDEST) -m pytest -n 2 tests
	$(TESTENV) $(PY_OLDEST) -m pytest -n 2 --dist loadfile --nbval-lax --nbval-current-env --nbval-cell-timeout 600 \
		notebooks

CHROMIUM := /usr/bin/chromium

# Every notebook run in JupyterLab in headless Debian chromium, every widget control moved, and the static site
# checked page by page; two workers (06 then 07 in one test, as 07 loads the model 06 saves). Skips without chromium.
test-browser: setup site
	test -x $(CHROMIUM) || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
		|| (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium) \
		|| echo "could not install chromium: the browser test will skip"
	$(PY) -m pip install --quiet --disable-pip-version-check -r tests/browser/requirements.txt \
		|| echo "could not install Playwright: the browser test will skip"
	$(TESTENV) $(PY) -m pytest -v -rs -n 2 --dist load --run-browser tests/browser

# Every widget moves on the site: each one draws its frames from the snapshot its notebook output carries
# (transformer_lib/teaching/widgets.py), SITE_JOBS processes side by side. latex2mathml turns display math into MathML.
SITE_JOBS ?= 2

site: setup  ## the executed notebooks as a static website in build/site/ (index.html, no kernel needed); prints its size
	$(PY) -m pip install --quiet --disable-pip-version-check -r tools/site/requirements.txt \
		|| echo "could not install latex2mathml: display math stays TeX on the site"
	$(NOMPL) OMP_NUM_THREADS=1 $(PY) tools/make_site.py build/site --jobs $(SITE_JOBS)

notebooks: setup  ## execute every notebook in place on the CPU, then drop widget state and timestamps
	CUDA_VISIBLE_DEVICES= $(NOMPL) $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=600 notebooks/*.ipynb
	$(VENV)/bin/nbstripout --keep-output --keep-count notebooks/*.ipynb

solutions: setup  ## the teacher's edition: build/solutions/NN_name.ipynb, stubs replaced by solutions/, executed
	CUDA_VISIBLE_DEVICES= $(TESTENV) $(PY) -m solutions.build_notebooks $(NOTEBOOKS)

images: setup  ## redraw the diagrams in images/ from images/make_diagrams.py
	$(PY) images/make_diagrams.py images

# ruff at line length 100 (pyproject.toml): the rules over all of it, the formatter over the Python files (the
# notebooks keep their hand layout). Then actionlint over .github/workflows/ (tools/lint/requirements.txt says why
# that package).
LINTED := transformer_lib tests images tools solutions results conftest.py

lint: setup  ## ruff: lint rules over the library, tests, notebooks and scripts; formatting of the Python files; shape comments on their tensor lines (tools/shape_comments.py); actionlint
	$(VENV)/bin/ruff check $(LINTED) notebooks
	$(VENV)/bin/ruff format --check --quiet $(LINTED)
	$(PY) tools/shape_comments.py
	$(PY) -m pip install --quiet --disable-pip-version-check -r tools/lint/requirements.txt
	$(VENV)/bin/actionlint

bench: setup
	$(PY) -m transformer_lib.bench

.PHONY: experiments
experiments: setup  ## notebook 10's Table 3 grid; resumable: runs already in results/table3.csv are skipped
	$(PY) -m transformer_lib.applications.experiments
	cp results/table3.csv transformer_lib/data_files/table3/table3.csv  # the copy that ships (test_package_data)

# Notebook 12's shipped model: the CPU recipe for 15 training minutes (resumable: a second run continues from
# checkpoints/translation), copied in float16 to the package, then scored once on the test split (metrics.json).
# One thread: measured on the course's 2-core machine while shared, two threads made a step about 10x slower.
TRANSLATION_MODEL := transformer_lib/data_files/translation_model
.PHONY: translation-model
translation-model: setup  ## notebook 12's trained English-French model and its test BLEU (about 20 min on 2 cores)
	OMP_NUM_THREADS=1 $(PY) -m transformer_lib.applications.translation train --folder checkpoints/translation --clock cpu \
		--ship $(TRANSLATION_MODEL)
	OMP_NUM_THREADS=1 $(PY) -m transformer_lib.applications.translation evaluate --folder $(TRANSLATION_MODEL) \
		--run-folder checkpoints/translation

# `make grade SUBMISSIONS="class/"`: students' notebooks graded with the course's checks, each in a fresh kernel with
# limits, GRADE_JOBS at a time; the gradebook, points.csv and feedback/ go to GRADE_OUT (README: Grading a class).
GRADE_OUT  ?= build/grades
GRADE_JOBS ?= 2
.PHONY: grade
grade: setup  ## grade students' notebooks: make grade SUBMISSIONS="files or folders" (GRADE_OUT, GRADE_JOBS)
	@test -n "$(SUBMISSIONS)" || { echo 'usage: make grade SUBMISSIONS="class/ or notebooks"'; exit 2; }
	$(TESTENV) $(PY) -m transformer_lib.grade $(SUBMISSIONS) --out $(GRADE_OUT) --jobs $(GRADE_JOBS)

clean:
	rm -rf $(VENV) $(VENV_OLDEST) build .pytest_cache
