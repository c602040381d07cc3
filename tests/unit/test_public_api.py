"""The public door: what a tools module or an embedding app imports, and nothing HTTP-shaped."""

from __future__ import annotations

import subprocess
import sys

import gateway
from gateway import ComponentStateError, Settings, create_app, run_components, server_tool


def test_the_public_names_are_importable_from_the_package() -> None:
    assert sorted(gateway.__all__) == ["Agent", "AgentError", "ComponentStateError",
                                       "Settings", "ToolContext", "ToolError", "create_app",
                                       "run_components", "server_tool", "tool_context"]
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None
    assert callable(create_app) and callable(server_tool) and callable(run_components)
    assert Settings(model="openai/x").model == "openai/x"


def test_the_component_state_error_is_a_domain_error() -> None:
    error = ComponentStateError("REVISION_MISMATCH", "stale", revision=3)
    assert (error.code, error.message, error.details) == ("REVISION_MISMATCH", "stale",
                                                          {"revision": 3})
    assert not hasattr(error, "status")  # the REST layer maps the code to a status


def test_importing_the_package_does_not_load_the_server() -> None:
    """`gateway config` and a refused start-up stay quick: the app is imported on first use."""
    code = "import sys, gateway; print('gateway.app' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() == "False"


def test_the_package_is_typed_and_described() -> None:
    """Code that imports `gateway` (or `gateway.client`) gets its annotations checked (PEP 561
    `py.typed`, shipped in the wheel with the package), and the metadata says what it is."""
    import tomllib
    from pathlib import Path

    root = Path(gateway.__file__).parent
    assert (root / "py.typed").is_file()
    project = tomllib.loads((root.parent / "pyproject.toml").read_text())
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["gateway"]
    metadata = project["project"]
    assert "Typing :: Typed" in metadata["classifiers"]
    assert metadata["description"] and metadata["requires-python"] and metadata["license"]
