"""The Python half of scripts/audit: pip-audit over the locked runtime dependencies.

pip-audit asks PyPI for each locked version's known vulnerabilities
(`/pypi/<name>/<version>/json`). A registry mirror may not serve that per-version document
(pip-audit then reports the package "not found on PyPI"): for those, the project's document
(`/pypi/<name>/json`) is read instead, whose `vulnerabilities` are those of its latest release,
so it answers for a locked version that is the latest one, and for no other. What neither
answers for is listed as not audited (a failure with `--strict`), never passed as clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = "https://pypi.org/pypi"
# Vulnerabilities docs/security.md ("Dependency audit") argues do not apply: id -> why, briefly.
IGNORED: dict[str, str] = {}


def locked_runtime() -> str:
    """uv.lock's runtime dependencies as a requirements file (with hashes)."""
    return subprocess.run(["uv", "export", "--frozen", "--format", "requirements-txt",
                           "--no-dev", "--no-emit-project"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def pinned(requirements: str) -> dict[str, str]:
    """name -> version of each `name==version` line (pip-audit leaves out the version of a
    package it skips)."""
    versions = {}
    for line in requirements.splitlines():
        head = line.split(";")[0].strip().rstrip("\\").strip()
        if "==" in head and not head.startswith("#"):
            name, version = head.split("==", 1)
            versions[name.strip().lower()] = version.strip()
    return versions


def pip_audit(requirements: Path) -> dict[str, object]:
    command = [str(ROOT / ".venv" / "bin" / "pip-audit"), "-r", str(requirements),
               "--disable-pip", "--no-deps", "--progress-spinner", "off", "--format", "json",
               "--vulnerability-service", "pypi"]
    for vuln in IGNORED:
        command += ["--ignore-vuln", vuln]
    done = subprocess.run(command, capture_output=True, text=True)
    if not done.stdout.strip():
        raise SystemExit(f"pip-audit failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def latest_release_vulns(name: str, version: str) -> list[str] | None:
    """The ids of the known vulnerabilities of `name` `version` from the project's document,
    if `version` is its latest release; None when the document cannot say."""
    try:
        with urllib.request.urlopen(f"{INDEX}/{name}/json", timeout=20) as answer:
            project = json.load(answer)
    except (urllib.error.URLError, TimeoutError, ValueError):
        return None
    if project.get("info", {}).get("version") != version:
        return None
    return [v.get("id", "?") for v in project.get("vulnerabilities") or []
            if v.get("id") not in IGNORED]


def main() -> int:
    strict = "--strict" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as work:
        requirements = Path(work) / "requirements.txt"
        locked = locked_runtime()
        requirements.write_text(locked)
        report = pip_audit(requirements)
    versions = pinned(locked)
    found: list[str] = []
    unanswered: list[str] = []
    audited = 0
    for dep in report.get("dependencies", []):  # type: ignore[union-attr]
        name = dep["name"]
        version = dep.get("version") or versions.get(name.lower())
        if "skip_reason" not in dep:
            audited += 1
            found += [f"{name} {version}: {v['id']} (fixed in {', '.join(v['fix_versions'])})"
                      for v in dep.get("vulns", [])]
            continue
        vulns = latest_release_vulns(name, version) if version else None
        if vulns is None:
            unanswered.append(f"{name} {version}")
            continue
        audited += 1
        found += [f"{name} {version}: {vuln} (see https://pypi.org/project/{name}/)"
                  for vuln in vulns]
    print(f"pip-audit: {audited} locked runtime packages audited, {len(found)} known "
          f"vulnerabilities, {len(unanswered)} not audited")
    for line in found:
        print(f"  VULNERABLE {line}", file=sys.stderr)
    if unanswered:
        print("  not audited (the registry answered for neither the locked version nor it "
              f"as the latest release): {', '.join(unanswered)}")
    return 1 if found or (strict and unanswered) else 0


if __name__ == "__main__":
    sys.exit(main())
