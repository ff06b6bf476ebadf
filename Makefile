# `make demo` grades the reference notebook; `make test` runs the whole suite (two pytest workers,
# then the few tests that count machine-wide leftovers on their own), then validates
# every assignment as test items (`make course-ci`: solutions full marks, templates zero, every
# hand-written and derived mutant killed, every honest variant at full marks).
# Both create .venv on first use with a Python 3.12+ interpreter found by scripts/find-python.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test course-ci bench clean

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
	$(PY) -m pytest -n 2 -m "not serial"
	$(PY) -m pytest -m serial
	$(MAKE) course-ci

# What docs/course-ci.yml runs in a course repository: every assignment validated as test items.
course-ci: $(STAMP)
	mkdir -p build
	$(PY) -m pytest assignments --grade-jobs 2 --junitxml=build/validate.xml \
	  --grade-json=build/validate.json --grade-html=build/validate.html

bench: $(STAMP)
	$(PY) bench/bench_grade.py
	$(PY) bench/bench_batch.py

clean:
	rm -rf $(VENV)
