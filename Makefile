# onnxport: `make run` opens the app on the bundled example; `make test` runs the tests.
# Both create .venv and install everything on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PLAIN := .venv-plain
PLAIN_STAMP := $(PLAIN)/.installed
EXAMPLE := resources/examples
export QTWEBENGINE_CHROMIUM_FLAGS ?= --no-sandbox

.PHONY: install run test test-core-plain lint bench screenshots example clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first and pinned: it is the local CPU wheel; an unpinned torch pulls CUDA builds.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[torch,test]"
	touch $(STAMP)

install: $(STAMP)

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

test: $(STAMP)
	$(BIN)/ruff check core gui resources tests scripts bench
	$(BIN)/python -m pytest -q -p no:cacheprovider
	$(MAKE) test-core-plain

# The core export path must work without onnxruntime-training: a second environment with the
# current onnxruntime and onnx wheels runs the core tests that need no training package.
$(PLAIN_STAMP): pyproject.toml Makefile
	test -x $(PLAIN)/bin/python || $(PYTHON) -m venv $(PLAIN)
	$(PLAIN)/bin/python -m pip install -q --upgrade pip
	$(PLAIN)/bin/python -m pip install -q onnxruntime onnx numpy psutil pytest hypothesis
	$(PLAIN)/bin/python -m pip install -q --no-deps -e .
	touch $(PLAIN_STAMP)

test-core-plain: $(PLAIN_STAMP)
	$(PLAIN)/bin/python -c "import importlib.util as u; assert u.find_spec('onnxruntime.training') is None"
	$(PLAIN)/bin/python -m pytest -q -p no:cacheprovider tests/core -m "not training and not torch and not gui"

lint: $(STAMP)
	$(BIN)/ruff check core gui resources tests scripts bench

bench: $(STAMP)
	$(BIN)/python -m bench

screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

# Rebuild the bundled example with ONNX Runtime's own training API.
example: $(STAMP)
	$(BIN)/python scripts/make_example.py $(EXAMPLE)

clean:
	rm -rf build .pytest_cache
