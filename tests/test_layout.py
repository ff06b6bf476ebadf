"""The folders are the boundaries (issue 29): the import graph has no cycle, no wing imports one
above it, the judging core and the self-check load no process code, and each `inside/` is what its
sandbox binds and what the compiled-program store's key hashes."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from grader.course.imports import cycle, import_graph, runtime_imports
from grader.kernel import INSIDE as KERNEL_INSIDE
from grader.selfgrade import INSIDE as SELFGRADE_INSIDE
from grader.verifier import INSIDE as VERIFIER_INSIDE

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "grader"

# Each wing's rank: a module may import its own wing and those of a lower rank only.
RANKS = {
    "inside": 0,  # kernel/inside, verifier/inside: loaded by path, import no grader module at all
    "protocol": 1,  # kernel.protocol, verifier.protocol (the models both sides speak), the wings' INSIDE
    "base": 2,  # errors, spec, report, values, assignment, cases, ...: data and its rules
    "checks": 3,
    "judging": 4,
    "process": 5,  # sandbox, kernel (the client side), verifier (the client side)
    "pipeline": 6,  # grade_one, precompile, the self-check and the pack's grade, the views of a report
    "class": 7,  # batch, outputs, gradescope, course, term
    "service": 8,  # serve: the hand-in service over a batch's folder; lti: the service as an LTI tool
    "cli": 9,
}
BASE = {"errors", "faults", "spec", "report", "values", "assignment",
        "cases", "domains", "atomic", "runtime_paths",
        "options", "inert", "interrupts", "submission", "usage"}


def rank(module: str) -> str:
    parts = module.split(".")[1:]
    if "inside" in parts:
        return "inside"
    top = parts[0] if parts else ""
    if top in BASE:
        return "base"
    if parts[-1:] == ["protocol"] or parts in (["kernel"], ["verifier"]):
        return "protocol"
    if top in ("checks", "judging", "pipeline", "cli"):
        return top
    if top in ("precompile", "selfcheck", "selfgrade", "views"):
        return "pipeline"
    if top in ("sandbox", "kernel", "verifier"):
        return "process"
    if top in ("serve", "lti"):
        return "service"
    if top in ("batch", "outputs", "gradescope", "course", "term", "__main__"):
        return "class" if top != "__main__" else "cli"
    raise AssertionError(f"{module}: no wing given in tests/test_layout.py's RANKS")


def test_the_import_graph_has_nocycle() -> None:
    assert cycle(import_graph()) is None


def test_a_cycle_would_be_found() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_module_imports_a_wing_above_its_own() -> None:
    upward = [f"{name} ({rank(name)}) imports {other} ({rank(other)})"
              for name, edges in import_graph().items() for other in edges
              if RANKS[rank(other)] > RANKS[rank(name)]]
    assert upward == []


def test_inside_imports_nothing_of_the_grader() -> None:
    for folder in (KERNEL_INSIDE, VERIFIER_INSIDE, SELFGRADE_INSIDE):
        for path in folder.glob("*.py"):
            named = [n for n in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))) if n.startswith("grader")]
            assert named == [], path


PROCESS = ("grader.sandbox", "grader.kernel.client", "grader.kernel.session", "grader.kernel.launch",
           "grader.kernel.server", "grader.kernel.zmtp", "grader.kernel.messages", "grader.verifier.client",
           "grader.verifier.forkserver",
           "grader.batch", "grader.pipeline", "jupyter_client", "nbclient", "ipykernel", "zmq")


def _loaded_by(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def test_the_judging_core_and_the_self_check_load_no_process_code() -> None:
    loaded = _loaded_by("import grader.judging.plan, grader.judging.verdicts, grader.judging.local, grader.selfcheck")
    assert "grader.judging.verdicts" in loaded and "grader.selfcheck" in loaded
    assert [m for m in loaded if m.startswith(PROCESS)] == []


def test_the_process_check_would_see_process_code() -> None:
    assert "grader.sandbox.layers" in _loaded_by("import grader.verifier.client")


def test_each_inside_is_what_its_sandbox_binds_and_what_the_store_hashes(tmp_path: Path, monkeypatch) -> None:
    from grader.sandbox import executables, layers

    assert KERNEL_INSIDE == PACKAGE / "kernel" / "inside" and VERIFIER_INSIDE == PACKAGE / "verifier" / "inside"
    assert layers.KERNEL_INSIDE is KERNEL_INSIDE and layers.VERIFIER_INSIDE is VERIFIER_INSIDE
    for inside in (KERNEL_INSIDE, VERIFIER_INSIDE):
        sandbox = layers.Sandbox(tmp_path, layers.SandboxPolicy(), layers.available(), runtime_dir=inside)
        bound = [p for p in sandbox._readonly_paths() if p == PACKAGE or PACKAGE in p.parents]
        assert bound == [inside]

    from grader import assignment

    loaded = assignment.load("ch2-jit")
    solution = ROOT / "solutions" / "ch2-jit.py"
    key = executables.marker(tmp_path, loaded, solution)
    hashed: list[Path] = []
    real = Path.read_bytes

    def recording(path: Path) -> bytes:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", recording)
    assert executables.marker(tmp_path, loaded, solution) == key
    runtimes = {p for p in hashed if PACKAGE in p.parents}
    assert runtimes == {*KERNEL_INSIDE.glob("*.py"), *VERIFIER_INSIDE.glob("*.py")}
