"""`GET /v1/agents`: the operator's agents by name and description (never their instructions,
tools or models: those are the operator's), and the models a run may pick (the allow-list that
`check_model` enforces), for a client that offers a choice."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..engine.agents.agent import AgentRegistry
from ..protocol.agents import AgentDescription, AgentList
from ..protocol.tambo import wire
from .context import caller, project_of, services


def gateway_version() -> str:
    try:
        return version("gateway")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "0"


async def list_agents(request: Request) -> Response:
    """A key bound to an agent (`gateway keys create --agent`) sees that agent only, as its
    default: the others are refused to it (`runs/admission/agents.py`), so offering them would
    only lead a picker into 403s."""
    project_of(request)  # an API key, as for every /v1 call
    registry: AgentRegistry = request.app.state.agents
    settings = services(request).settings
    bound = caller(request).agent
    body = AgentList(
        version=gateway_version(),
        agents={agent.name: AgentDescription(name=agent.name, description=agent.description,
                                             className="HttpAgent")
                for agent in registry if bound is None or agent.name == bound},
        defaultAgent=bound or registry.default_name,
        models=list(dict.fromkeys((settings.model, *settings.models))),
        audioFileTranscriptionEnabled=settings.transcription_model is not None)
    return JSONResponse(wire(body))


routes = [Route("/v1/agents", list_agents, methods=["GET"])]
