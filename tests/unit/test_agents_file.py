"""The agents file as an operator writes it: what it may leave out, and one line for each
mistake, naming the file, the agent and the field (at start-up, exit 2; `gateway agents check`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import Agent, AgentError, Settings, create_app
from gateway.cli.main import main
from gateway.engine.agents.agent import AgentDefaults
from gateway.engine.agents.file import load_agents_file, registry_for
from gateway.engine.models.reasoning import Reasoning

TOOLS = Path(__file__).resolve().parents[1] / "support" / "server_tools.py"
DEFAULTS = AgentDefaults(model="openai/main", allowed_models=("openai/small",),
                         mcp_servers=None, max_steps=7, max_depth=3)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.toml"
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str, defaults: AgentDefaults = DEFAULTS) -> str:
    path = write(tmp_path, text)
    with pytest.raises(AgentError) as caught:
        load_agents_file(path, defaults)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(str(path))
    return line.removeprefix(f"{path}: ")


def test_a_file_of_instructions_only_inherits_the_environment(tmp_path: Path) -> None:
    registry = load_agents_file(write(tmp_path, """
[agents.support]
description = "Answers questions about orders"
instructions = "You are the support agent."
"""), DEFAULTS)
    agent = registry.default
    assert registry.default_name == "support"
    assert (agent.model, agent.max_steps, agent.tools, agent.mcp_servers) == (
        "openai/main", 7, None, None)
    assert agent.instructions == "You are the support agent."
    assert agent.allow_client_system_prompt is False
    assert registry.listing() == [{"name": "support",
                                   "description": "Answers questions about orders"}]


def test_every_field_is_read(tmp_path: Path) -> None:
    mcp = tmp_path / "mcp.json"
    mcp.write_text('{"mcpServers": {"files": {"command": "true"}}}')
    registry = load_agents_file(write(tmp_path, f"""
[agents.triage]
description = "Routes questions"
instructions = "Delegate."
model = "openai/small"
fallbacks = ["anthropic/claude", {{model = "openai/other", api_base = "http://127.0.0.1:9/v1"}}]
temperature = 0
max_tokens = 500
tools = ["{TOOLS}:add", "{TOOLS}:population"]
mcp_servers = "mcp.json"
max_steps = 4
max_input_tokens = 10000
subagents = ["billing"]
allow_client_system_prompt = true
reasoning_effort = "high"

[agents.billing]
tools = []
thinking_budget = 4000
"""), DEFAULTS)
    triage, billing = registry.get("triage"), registry.get("billing")
    assert triage is not None and billing is not None
    assert triage.model == "openai/small" and triage.temperature == 0.0
    assert [f.model for f in triage.fallbacks] == ["anthropic/claude", "openai/other"]
    assert triage.tools is not None and sorted(triage.tools) == ["add", "population"]
    assert triage.mcp_servers == str(mcp)
    assert (triage.max_tokens, triage.max_steps, triage.max_input_tokens) == (500, 4, 10000)
    assert triage.subagents == ("billing",) and triage.allow_client_system_prompt
    assert billing.tools == {} and billing.model == "openai/main"
    assert (triage.reasoning, billing.reasoning) == (Reasoning(effort="high"),
                                                     Reasoning(budget=4000))
    assert registry.default_name == "triage"  # the first, with none named `default`


def test_a_named_tool_loads_only_that_function(tmp_path: Path) -> None:
    registry = load_agents_file(write(tmp_path, f"""
[agents.maths]
tools = ["{TOOLS}:add"]
"""), DEFAULTS)
    assert list(registry.default.tools or {}) == ["add"]


@pytest.mark.parametrize("text, line", [
    ("[agents.a]\ninstruction = 'typo'\n", "[agents.a] instruction: unknown field"),
    ("[agents.a]\nmax_steps = 'ten'\n", "[agents.a] max_steps: must be a whole number"),
    ("[agents.a]\nmax_steps = true\n", "[agents.a] max_steps: must be a whole number"),
    ("[agents.a]\nmax_steps = 0\n", "[agents.a] max_steps: must be a whole number"),
    ("[agents.a]\ntemperature = 3\n", "[agents.a] temperature: must be a number"),
    ("[agents.a]\ntools = 'x:y'\n", "[agents.a] tools: must be a list of import paths"),
    ("[agents.a]\nallow_client_system_prompt = 'yes'\n",
     "[agents.a] allow_client_system_prompt: must be true or false"),
    ("[agents.a]\nfallbacks = [{model = 'x', api_bsae = 'typo'}]\n",
     "[agents.a] fallbacks: each entry must be"),
    ("[agents.a]\nmodel = 'openai/expensive'\n",
     "[agents.a] model: 'openai/expensive' is not allowed on this gateway"),
    ("[agents.a]\nsubagents = ['ghost']\n", "[agents.a] subagents: 'ghost' is not a declared"),
    ("[agents.a]\nsubagents = ['b']\n[agents.b]\nsubagents = ['a']\n",
     "[agents.a] subagents: delegation cycle a -> b -> a"),
    ("[agents.a]\nsubagents = ['a']\n", "[agents.a] subagents: delegation cycle a -> a"),
    ("[agents.a]\ntools = ['no_such_module_here:tool']\n",
     "[agents.a] tools: cannot load 'no_such_module_here:tool': ModuleNotFoundError"),
    ("[agents.a]\ntools = ['json:nothing_here']\n",
     "[agents.a] tools: cannot load 'json:nothing_here': AttributeError"),
    (f"[agents.a]\ntools = ['{TOOLS}:add', '{TOOLS}']\n",
     "[agents.a] tools: two tools are named 'add'"),
    ("[agents.a]\nmcp_servers = 'missing.json'\n", "[agents.a] mcp_servers: cannot read"),
    ("[agents.a]\nreasoning_effort = 'max'\n",
     "[agents.a] reasoning_effort: must be \"minimal\", \"low\", \"medium\" or \"high\""),
    ("[agents.a]\nthinking_budget = 0\n", "[agents.a] thinking_budget: must be a whole number"),
    ("[agents.a]\nthinking_budget = 1.5\n", "[agents.a] thinking_budget: must be a whole number"),
    ("[agents.a]\n[other]\n", "unknown top-level key 'other'"),
    ("agents = 1\n", "declares no agents"),
    ("[agents]\n", "declares no agents"),
    ("[agents.a\n", "is not valid TOML"),
    ("[agents.'bad name']\n", "'bad name' is not an agent name"),
])
def test_each_mistake_is_one_line_naming_the_agent_and_field(tmp_path: Path, text: str,
                                                             line: str) -> None:
    assert refused(tmp_path, text).startswith(line)


def test_sub_agents_nested_deeper_than_the_limit_are_refused(tmp_path: Path) -> None:
    chain = "".join(f"[agents.a{i}]\nsubagents = ['a{i + 1}']\n" for i in range(4)) + "[agents.a4]\n"
    assert refused(tmp_path, chain).startswith(
        "[agents.a0] subagents: sub-agents nest 4 levels deep; the limit is 3")
    # the same file within a higher limit is accepted
    deeper = AgentDefaults(model="openai/main", max_depth=4)
    assert len(load_agents_file(write(tmp_path, chain), deeper)) == 5


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match=r"nope\.toml: cannot be read"):
        load_agents_file(tmp_path / "nope.toml", DEFAULTS)


def test_without_a_file_there_is_one_default_agent_from_the_environment() -> None:
    settings = Settings(model="openai/x", tools_module=str(TOOLS), max_steps=3)
    registry = registry_for(settings)
    assert registry.default_name == "default" and len(registry) == 1
    agent = registry.default
    assert (agent.model, agent.tools, agent.max_steps, agent.instructions) == (
        "openai/x", None, 3, None)


def test_the_default_agent_setting_must_name_an_agent(tmp_path: Path) -> None:
    path = write(tmp_path, "[agents.a]\n[agents.b]\n")
    assert registry_for(Settings(agents_file=str(path), default_agent="b")).default_name == "b"
    with pytest.raises(AgentError, match="GATEWAY_DEFAULT_AGENT names 'c'"):
        registry_for(Settings(agents_file=str(path), default_agent="c"))


def test_agents_declared_in_python_are_checked_and_kept_on_the_app() -> None:
    def lookup(order: str) -> str:
        """Find an order."""
        return order

    app = create_app(Settings(model="openai/x"), agents=[
        Agent(name="support", instructions="Be kind.", tools=[lookup], subagents=["billing"]),
        Agent(name="billing", description="Invoices")])
    registry = app.state.agents
    assert registry.default_name == "support"
    assert list(registry.get("support").tools) == ["lookup"]
    with pytest.raises(AgentError, match=r"\[agents.support\] subagents: 'ghost'"):
        create_app(Settings(), agents=[Agent(name="support", subagents=["ghost"])])
    thinking = create_app(Settings(model="openai/x"), agents=[
        Agent(name="deep", reasoning_effort="low", thinking_budget=2048)])
    assert thinking.state.agents.default.reasoning == Reasoning("low", 2048)
    with pytest.raises(AgentError, match=r"\[agents.deep\] reasoning_effort: must be one of"):
        create_app(Settings(), agents=[Agent(name="deep", reasoning_effort="extreme")])


def test_agents_check_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GATEWAY_MODELS", raising=False)
    monkeypatch.setenv("GATEWAY_MODEL", "openai/main")
    good = write(tmp_path, "[agents.support]\ninstructions = 'x'\nsubagents = ['billing']\n"
                           "[agents.billing]\n")
    assert main(["agents", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert "2 agents, default support" in out and "sub-agents billing" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[agents.support]\nmax_step = 3\n")
    assert main(["agents", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gateway: invalid agents file {bad}: [agents.support] max_step: "
                          "unknown field")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_serve_with_a_bad_agents_file_exits_2_before_listening(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, "[agents.support]\nsubagents = ['support']\n")
    monkeypatch.setenv("GATEWAY_AGENTS_FILE", str(bad))
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"gateway: invalid agents file {bad}: [agents.support] subagents: "
                   "delegation cycle support -> support")


def test_the_example_agents_file_is_valid(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """examples/agents/agents.toml, which docs/agents.md points to, passes the check."""
    monkeypatch.delenv("GATEWAY_MODELS", raising=False)
    example = Path(__file__).resolve().parents[2] / "examples" / "agents" / "agents.toml"
    assert main(["agents", "check", str(example)]) == 0
    out = capsys.readouterr().out
    assert "2 agents, default assistant" in out and "sub-agents researcher" in out
