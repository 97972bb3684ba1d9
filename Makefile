# The two set-up commands of the README, and the steps behind them.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
REPO ?= https://github.com/vllm-project/vllm
SINCE ?= v0.4.0
RELEASES ?=
UNTIL ?=
REF ?= v0.33.0

.PHONY: test site release catalog serve wheel

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

test: $(VENV)/.installed
	$(BIN)/pytest -q

# Every release from SINCE on (or the last RELEASES), the newest one's site with their history.
# Without GitHub, the releases come from the package index pip uses (--source auto).
site: $(VENV)/.installed
	$(BIN)/vllm-errors update --repo $(REPO) $(if $(RELEASES),--releases $(RELEASES),--since $(SINCE)) $(if $(UNTIL),--until $(UNTIL))

# One release alone, without history.
release: $(VENV)/.installed
	$(BIN)/vllm-errors build --repo $(REPO) --ref $(REF)

serve: $(VENV)/.installed
	$(BIN)/vllm-errors serve

catalog: $(VENV)/.installed
	$(BIN)/vllm-errors scan --repo $(REPO) --ref $(REF) --output build/catalog.json

# The wheel pip installs, with the bundle of the last site built (make site first): dist/vllm_errors-*.whl.
wheel: $(VENV)/.installed
	$(BIN)/vllm-errors bundle
	$(BIN)/pip wheel . --no-deps --quiet -w dist
