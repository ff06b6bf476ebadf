# `make demo` grades the reference notebook; `make test` runs the whole suite, then
# `grade validate` (solutions full marks, templates zero, every mutant fails what it declares).
# Both create .venv on first use with a Python 3.12+ interpreter found by scripts/find-python.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml scripts/find-python scripts/install-sandbox scripts/install-chromium
	@scripts/install-sandbox
	@scripts/install-chromium
	@interp="$$(scripts/find-python)" || exit 2; \
	  echo "using $$interp"; \
	  rm -rf $(VENV) && "$$interp" -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,cluster]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/grade solutions/ch2-jit.ipynb

test: $(STAMP)
	$(PY) -m pytest
	$(VENV)/bin/grade validate

bench: $(STAMP)
	$(PY) bench/bench_grade.py
	$(PY) bench/bench_batch.py

clean:
	rm -rf $(VENV)
