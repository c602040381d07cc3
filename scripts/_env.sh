# Shared set-up for scripts/serve and scripts/test: the repository's root as the working
# directory, and `python_deps`, which makes sure uv exists, then installs the locked Python
# dependencies into .venv. Safe to run again; a no-op when everything is installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# One at a time (a lock on this file): several test commands may start together (.ci/run), and
# two `uv sync` into an empty .venv can collide.
python_deps() {
  (
    ! command -v flock >/dev/null || flock 9  # (macOS has none)
    if ! command -v uv >/dev/null 2>&1; then
      echo "installing uv (the Python package manager that reads uv.lock)..." >&2
      python3 -m pip install --quiet --disable-pip-version-check uv >&2
    fi
    uv sync --frozen --quiet >&2
  ) 9<"$ROOT/scripts/_env.sh"
}
# Let Python cache compiled modules (__pycache__, ignored by git). Some environments turn that
# off (PYTHONDONTWRITEBYTECODE); then every gateway process and command the tests start compiles
# litellm and the rest from source again, about 6 s of CPU each time.
unset PYTHONDONTWRITEBYTECODE
