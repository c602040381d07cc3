"""Agents files for tests: two agents, one a sub-agent of the other, and a scripted run in
which the first delegates to the second; and the settings of an app that serves an agents
file in the test process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.config import Settings
from tests.support.scripted_model import ScriptedModel

SHOP_INSTRUCTIONS = "You are the shop's assistant."
RESEARCHER_INSTRUCTIONS = "You are the researcher. Answer in one sentence."
DELEGATING_AGENTS = f"""
[agents.shop]
description = "The shop's assistant"
instructions = "{SHOP_INSTRUCTIONS}"
subagents = ["researcher"]

[agents.researcher]
description = "Looks things up in the catalogue"
instructions = "{RESEARCHER_INSTRUCTIONS}"
"""
# The scripted model's turns of a delegating run: the shop calls the researcher with a task
# (its arguments in two fragments), the researcher reasons and answers, the shop answers.
DELEGATE = [{"content": "Let me ask. "},
            {"tool_call": {"index": 0, "id": "call_r1", "name": "researcher",
                           "arguments": '{"task": "Which mugs'}},
            {"tool_call": {"index": 0, "arguments": ' are in stock?"}'}}]
RESEARCH = [{"reasoning": "Checking."}, {"content": "Blue and "}, {"content": "red mugs."}]
ANSWER = [{"content": "We have blue and red mugs."}]


def agents_settings(scripted_model: ScriptedModel, workdir: Path, agents: str,
                    **extra: Any) -> Settings:
    """An app on its own SQLite file with `agents` as its agents file and the key `k1`."""
    path = workdir / "agents.toml"
    path.write_text(agents)
    return Settings(database_url=f"sqlite+aiosqlite:///{workdir / 'g.db'}",
                    api_keys={"k1": "shop"}, agents_file=str(path), model="openai/scripted",
                    model_api_base=scripted_model.base_url, model_api_key="sk-test", **extra)
