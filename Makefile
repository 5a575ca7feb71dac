# capsa: two commands on a fresh machine.
#   make demo   run the main job end to end, offline, on the bundled corpus
#   make test   lint, type-check and run the whole suite, offline
# Each bootstraps .venv itself (and the tesseract binary through apt-get).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.capsa-installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test lint typecheck bench docs corpus system-deps venv clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,dev]'
	@touch $(STAMP)

venv: $(STAMP)

# System packages: tesseract for OCR, pandoc comes from pypandoc-binary.
system-deps:
	@command -v tesseract >/dev/null 2>&1 || { \
	  echo "installing tesseract-ocr (apt-get)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; }

demo: $(STAMP) system-deps
	$(VENV)/bin/capsa demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/mypy --strict src

test: $(STAMP) system-deps lint
	$(VENV)/bin/pytest

bench: $(STAMP) system-deps
	$(PY) benchmarks/extraction.py

corpus: $(STAMP) system-deps
	$(PY) scripts/make_corpus.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
