#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image from the zip unpacked
# in /autograder/source (its "Autograder Specifications"). It installs the grader where
# run_autograder looks for it, /opt/jax-course-grader/venv, from the files beside this script:
#   bundle.env        PYTHON_VERSION (the Python the bundle was built and tested with) and
#                     GRADER_WHEEL (the grader, built by `grade gradescope-bundle`)
#   constraints.txt   the versions of the grader's dependencies the bundle was built with (jax and
#                     jaxlib are pinned by the wheel itself), so a rebuild months later grades alike
#
# Why uv (Astral's standalone binary, version pinned below) and not deadsnakes' python3.12:
# Gradescope's base images are Ubuntu releases whose python3 is older than the grader's 3.12
# (22.04 has 3.10), and which release an assignment uses is the instructor's choice on the
# Configure Autograder page. deadsnakes only builds for the Ubuntu releases it currently supports
# and needs add-apt-repository; uv downloads the same CPython build (python-build-standalone) on
# every release, of exactly the version the bundle was tested with, and installs the wheels faster.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=/dev/null
source "$here/bundle.env"
home=/opt/jax-course-grader
UV_VERSION=0.13.9

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# curl for uv's installer; bubblewrap and util-linux (setpriv, prlimit) for the grader's sandbox,
# which gradescope_run uses only where the container lets every layer of it work
apt-get install -y -qq --no-install-recommends curl ca-certificates bubblewrap util-linux

curl -LsSf "https://astral.sh/uv/${UV_VERSION}/install.sh" | env UV_UNMANAGED_INSTALL="$home/bin" sh
uv="$home/bin/uv"
export UV_PYTHON_INSTALL_DIR="$home/python" UV_PYTHON_PREFERENCE=only-managed
"$uv" python install "$PYTHON_VERSION"
"$uv" venv --python "$PYTHON_VERSION" "$home/venv"
"$uv" pip install --python "$home/venv/bin/python" --constraint "$here/constraints.txt" "$here/$GRADER_WHEEL"

"$uv" cache clean  # the downloaded wheels: not needed in the image

# Fail the image build here rather than every grading later, and keep in the image what the
# assignment's prepare() caches (each submission's container starts from the image).
GRADESCOPE_ROOT="$(dirname "$here")" "$home/venv/bin/python" -m grader.gradescope.run --prepare
