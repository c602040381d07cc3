# Shared set-up for scripts/serve, scripts/gateway and scripts/test: the repository's root as the
# working directory, and `python_deps`, which makes sure uv exists, then installs the locked
# Python dependencies into .venv. Safe to run again; a no-op when everything is installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# `python_deps` installs the gateway's own dependencies (what scripts/serve and scripts/gateway
# need); `python_deps --dev` adds the test tools of the `dev` dependency group (pytest, mypy,
# ruff, schemathesis, matplotlib: most of the download), for scripts/test. --inexact: a
# serve after a test run keeps the test tools. A stamp per group (.venv/.synced-*, newer than
# uv.lock and pyproject.toml) skips uv altogether when nothing changed.
# One at a time (a lock on this file): several test commands may start together (.ci/run), and
# two `uv sync` into an empty .venv can collide.
python_deps() {
  local group=runtime flags=(--no-dev --inexact)
  [ "${1:-}" = --dev ] && { group=dev; flags=(); }
  fresh() {
    local stamp
    for stamp in "$@"; do
      [ "$stamp" -nt uv.lock ] && [ "$stamp" -nt pyproject.toml ] && return 0
    done
    return 1
  }
  local stamps=(.venv/.synced-dev)
  [ "$group" = runtime ] && stamps+=(.venv/.synced-runtime)
  fresh "${stamps[@]}" && return 0
  (
    ! command -v flock >/dev/null || flock 9  # (macOS has none)
    fresh "${stamps[@]}" && exit 0  # another command installed it meanwhile
    if ! command -v uv >/dev/null 2>&1; then
      echo "installing uv (the Python package manager that reads uv.lock)..." >&2
      python3 -m pip install --quiet --disable-pip-version-check uv >&2
    fi
    if [ ! -x .venv/bin/gateway ]; then
      if [ "$group" = dev ]; then
        echo "installing the gateway and its test tools into .venv (first run: about 570 MB," \
             "a minute or two)..." >&2
      else
        echo "installing the gateway's Python dependencies into .venv (first run: about" \
             "320 MB, under a minute; the test tools are left out)..." >&2
      fi
    fi
    uv sync --frozen --quiet "${flags[@]}" >&2
    touch ".venv/.synced-$group"
  ) 9<"$ROOT/scripts/_env.sh"
}
# Let Python cache compiled modules (__pycache__, ignored by git). Some environments turn that
# off (PYTHONDONTWRITEBYTECODE); then every gateway process and command the tests start compiles
# litellm and the rest from source again, about 6 s of CPU each time.
unset PYTHONDONTWRITEBYTECODE
