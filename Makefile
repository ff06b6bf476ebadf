# `make demo` grades the reference notebook; `make test` runs the whole suite (two pytest workers,
# then the few tests that count machine-wide leftovers on their own), then validates
# every assignment as test items (`make course-ci`: solutions full marks, templates zero, every
# hand-written and derived mutant killed, every honest variant at full marks).
# Both create .venv on first use with a Python 3.12+ interpreter found by scripts/find-python.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test course-ci bench clean bytecode test-cgroup2

# The packages' bytecode is compiled on every core after the install (pip compiles one file at a
# time: 19.9 s -> 14.7 s for the whole install). The system's packages (apt-get's, on a fresh
# machine about 25 s: bubblewrap, chromium) install beside the venv's, which need none of them.
$(STAMP): pyproject.toml scripts/find-python scripts/install-sandbox scripts/install-chromium
	@{ scripts/install-sandbox; scripts/install-chromium; } & system=$$!; \
	  interp="$$(scripts/find-python)" && echo "using $$interp" \
	  && rm -rf $(VENV) && "$$interp" -m venv $(VENV) \
	  && $(PY) -m pip install --quiet --upgrade pip \
	  && $(PY) -m pip install --quiet --no-compile -e '.[test,cluster]'; \
	  status=$$?; wait $$system; [ $$status = 0 ] || exit 2
	@$(PY) -m compileall -q -j 0 $(VENV)/lib > /dev/null || true  # as pip would, ignoring what does not compile
	@touch $(STAMP)

# The grader's own bytecode, as a regular (not editable) install has it: every grading process
# imports the grader, and every probe cell loads the probe, from it (PYTHONDONTWRITEBYTECODE,
# or the sandbox's read-only bind, would otherwise compile them from source every time).
bytecode: $(STAMP)
	@$(PY) -m compileall -q grader assignments > /dev/null

demo: bytecode
	$(VENV)/bin/grade solutions/ch2-jit.ipynb

# One store of the references' compiled programs for the three runs (tests/conftest.py's, else each
# run built all three assignments' again, and course-ci before its first grading), removed at the end.
test: bytecode
	@store="$$(mktemp -d "$${TMPDIR:-/tmp}/grader-test-executables-XXXXXX")" \
	  && trap 'rm -rf "$$store"' EXIT && trap 'exit 130' INT TERM \
	  && export GRADER_EXECUTABLES="$$store" \
	  && echo '$(PY) -m pytest -n 2 -m "not serial"' && $(PY) -m pytest -n 2 -m "not serial" \
	  && echo '$(PY) -m pytest -m serial' && $(PY) -m pytest -m serial \
	  && echo '$(COURSE_CI)' && $(COURSE_CI)

# The sandbox in a cgroup v2 VM, as root and as a user (scripts/test-cgroup2; minutes under emulation).
test-cgroup2: bytecode
	scripts/test-cgroup2

# What docs/course-ci.yml runs in a course repository: every assignment validated as test items.
COURSE_CI = mkdir -p build && $(PY) -m pytest assignments --grade-jobs 2 --junitxml=build/validate.xml \
  --grade-json=build/validate.json --grade-html=build/validate.html

course-ci: bytecode
	$(COURSE_CI)

bench: bytecode
	$(PY) bench/bench_grade.py
	$(PY) bench/bench_batch.py

clean:
	rm -rf $(VENV)
