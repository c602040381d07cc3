"""`GET /v1/agents` as a UI reads it to offer a picker: CopilotKit's runtime `info` shape, the
operator's names and descriptions only (and the models a run may pick), behind the API key like
every /v1 call."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from gateway.app import create_app
from gateway.config import Settings

AGENTS = """
[agents.support]
description = "Answers questions about orders"
instructions = "Never show this to a client."
subagents = ["billing"]

[agents.billing]
description = "Explains invoices"
"""


def test_the_agents_are_listed_by_name_and_description(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'g.db'}",
                        api_keys={"k1": "shop"}, agents_file=str(agents),
                        default_agent="support", model="openai/small",
                        models=["openai/large", "openai/small"])
    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/agents").status_code == 401
        response = client.get("/v1/agents", headers={"x-api-key": "k1"})
    assert response.status_code == 200
    body = response.json()
    assert body["agents"] == {
        "support": {"name": "support", "description": "Answers questions about orders",
                    "className": "HttpAgent"},
        "billing": {"name": "billing", "description": "Explains invoices",
                    "className": "HttpAgent"}}
    assert list(body["agents"]) == ["support", "billing"]  # the file's order
    assert body["defaultAgent"] == "support"
    assert body["audioFileTranscriptionEnabled"] is False
    assert body["models"] == ["openai/small", "openai/large"]  # what `model` may pick
    assert isinstance(body["version"], str) and body["version"]
    assert "Never show" not in response.text
