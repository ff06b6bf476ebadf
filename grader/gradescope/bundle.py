"""`grade gradescope-bundle ASSIGNMENT -o autograder.zip`: the zip an instructor uploads to
Gradescope (a "Programming assignment", Configure Autograder, "Upload zip").

Gradescope's "Autograder Specifications" (gradescope-autograders.readthedocs.io/en/latest/specs/,
source gradescope/autograder_samples docs/specs.md) ask for `setup.sh` and an executable
`run_autograder` at the root of the zip (not inside a folder): the zip is unpacked into
/autograder/source, `setup.sh` runs once when the image is built, and `run_autograder` runs for
each submission and writes /autograder/results/results.json. Its base images are Ubuntu
(docs/base_images.md: 22.04 by default), whose python3 is older than the grader's 3.12.

The zip holds, at its root:

    setup.sh, run_autograder   the templates in grader/gradescope/files/ (their comments say why
                               they install and run as they do)
    bundle.env                 PYTHON_VERSION (this interpreter's, which the bundle was tested
                               with) and GRADER_WHEEL, for setup.sh
    constraints.txt            the installed versions of the grader's dependencies, so that an
                               image rebuilt later grades with what was tested (jax and jaxlib are
                               pinned by the wheel's own metadata, from pyproject.toml)
    jax_course_grader-*.whl    the grader, built now from this checkout by `pip wheel --no-deps`
    assignments/<id>/          the spec, references.py, checks.py and notebook.toml only: never
                               mutants/, solutions or anything else of the instructor's folder

The wheel is built from a copy of pyproject.toml, README.md and grader/ in a temporary folder, so
setuptools' build/ folder cannot leave stale modules in it nor touch the checkout. Entries have a
fixed date and Unix modes (run_autograder and setup.sh 0755), so Gradescope's unzip keeps
run_autograder executable.
"""

from __future__ import annotations

import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata, resources
from pathlib import Path

from grader import assignment as assignments
from grader.assignment import Assignment
from grader.atomic import atomic_file
from grader.errors import GraderError, UsageError

DISTRIBUTION = "jax-course-grader"
ASSIGNMENT_FILES = ("assignment.toml", "references.py", "checks.py", "notebook.toml")
SCRIPTS = ("setup.sh", "run_autograder")
EXECUTABLE = 0o755
READABLE = 0o644
ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # a fixed date: the same inputs make the same zip entries


def _source_tree() -> Path:
    """The checkout the grader runs from (the wheel is built from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise GraderError(f"building a Gradescope bundle needs the grader's source checkout, and {root} has no "
                          "pyproject.toml")
    return root


def build_wheel(into: Path) -> Path:
    """The grader's wheel, built with pip from a copy of the checkout's package files."""
    source = _source_tree()
    staged = into / "source"
    staged.mkdir()
    for file in ("pyproject.toml", "README.md"):
        shutil.copy2(source / file, staged / file)
    shutil.copytree(source / "grader", staged / "grader",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_assignments"))
    out = into / "wheel"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check",
                           "--no-input", "--wheel-dir", str(out), str(staged)],
                          check=False, capture_output=True, text=True)
    wheels = sorted(out.glob(f"{DISTRIBUTION.replace('-', '_')}-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1]
        raise GraderError(f"pip could not build the grader's wheel: {last}")
    return wheels[0]


def dependency_pins(root: str = DISTRIBUTION) -> list[str]:
    """`name==version` of every installed distribution the grader needs (its requirements, theirs,
    ..., with this interpreter's markers; extras left out), sorted."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    pending = [root]
    while pending:
        try:
            dist = metadata.distribution(pending.pop())
        except metadata.PackageNotFoundError:
            continue  # an optional one not installed here: left to the resolver
        key = canonicalize_name(dist.metadata["Name"])
        if key in pins:
            continue
        pins[key] = dist.version
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    pins.pop(canonicalize_name(root), None)
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


def _bundle_env(wheel: Path) -> str:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return ("# written by `grade gradescope-bundle`; setup.sh reads it\n"
            f"PYTHON_VERSION={shlex.quote(python)}\nGRADER_WHEEL={shlex.quote(wheel.name)}\n")


def _entry(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    info.create_system = 3  # Unix: unzip applies the mode below
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def bundle_files(loaded: Assignment, wheel: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry of the zip: its name -> (contents, Unix mode)."""
    templates = resources.files("grader.gradescope") / "files"
    files = {script: ((templates / script).read_bytes(), EXECUTABLE) for script in SCRIPTS}
    files["bundle.env"] = (_bundle_env(wheel).encode(), READABLE)
    files["constraints.txt"] = (("\n".join(dependency_pins()) + "\n").encode(), READABLE)
    files[wheel.name] = (wheel.read_bytes(), READABLE)
    for file in ASSIGNMENT_FILES:
        path = loaded.folder / file
        if path.is_file():
            files[f"assignments/{loaded.spec.id}/{file}"] = (path.read_bytes(), READABLE)
    return files


def build_bundle(assignment: str, out_zip: Path) -> Path:
    """Write the Gradescope autograder zip for `assignment` (an id or the instructor's folder)."""
    loaded = assignments.load(assignment)  # a broken assignment fails here, not in every grading
    with tempfile.TemporaryDirectory(prefix="gradescope-bundle-") as tmp:
        files = bundle_files(loaded, build_wheel(Path(tmp)))
    out_zip.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(out_zip) as file, zipfile.ZipFile(file, "w") as archive:
        for name, (data, mode) in files.items():
            archive.writestr(_entry(name, mode), data)
    return out_zip


def cli_bundle(argv: list[str]) -> int:
    """`grade gradescope-bundle ASSIGNMENT -o FILE.zip`."""
    from grader.inert import PATH_LIMIT, terminal
    from grader.usage import Parser

    p = Parser(prog="grade gradescope-bundle", description="Write the zip to upload to Gradescope as a "
                "programming assignment's autograder: setup.sh, run_autograder, the grader's wheel and the "
                "assignment's spec, references and checks (no mutants, no solutions).")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.zip", help="the zip to write")
    args = p.parse_args(argv)
    if args.output.suffix.lower() != ".zip":
        raise UsageError(f"-o names the zip to upload to Gradescope: {terminal(args.output, PATH_LIMIT)} does not "
                         "end in .zip")
    if args.output.is_dir():
        raise UsageError(f"-o names the zip to write, and {terminal(args.output, PATH_LIMIT)} is a folder")
    if args.assignment not in assignments.available():
        raise UsageError(f"no assignment {args.assignment!r} here (there are: {', '.join(assignments.available())})")
    print(terminal(build_bundle(args.assignment, args.output), PATH_LIMIT))
    return 0
