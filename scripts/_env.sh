# Shared set-up for scripts/serve and scripts/test: make sure uv exists, then install the locked
# Python dependencies into .venv. Safe to run again; a no-op when everything is installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if ! command -v uv >/dev/null 2>&1; then
  echo "installing uv (the Python package manager that reads uv.lock)..." >&2
  python3 -m pip install --quiet --disable-pip-version-check uv >&2
fi
uv sync --frozen --quiet >&2
# Let Python cache compiled modules (__pycache__, ignored by git). Some environments turn that
# off (PYTHONDONTWRITEBYTECODE); then every gateway process and command the tests start compiles
# litellm and the rest from source again, about 6 s of CPU each time.
unset PYTHONDONTWRITEBYTECODE
