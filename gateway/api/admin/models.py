"""`GET /v1/admin/models`: the gateway's models and their prices, for the console's Settings.

Each model the gateway is configured with (`GATEWAY_MODEL`, `GATEWAY_MODELS`, the agents' and
the fallbacks'), and each one the project's runs used in the last year, with where its price
comes from: `GATEWAY_MODEL_PRICES` (the operator's, for a model without a public price, such
as a self-hosted one), litellm's price map, or nowhere (its cost is unknown: set a price). A
price is a setting, read at start-up, never written by this API: prices are the operator's
configuration, like the model itself.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...config import Settings
from ...engine.agents.agent import AgentRegistry
from ...engine.usage import price_of
from ...protocol.admin import AdminModelList, AdminModelPrice
from ...protocol.clock import now_ms
from ...protocol.tambo import wire
from ..context import services
from .access import admin_project
from .params import DAY_MS, MAX_WINDOW_DAYS

MAX_MODELS = 200


def configured_models(settings: Settings, agents: AgentRegistry) -> list[str]:
    found = [settings.model, *settings.models, *(f.model for f in settings.model_fallbacks)]
    for agent in agents:
        found += [agent.model, *(f.model for f in agent.fallbacks)]
    return list(dict.fromkeys(m for m in found if m))


async def list_models(request: Request) -> Response:
    project = admin_project(request)
    svc = services(request)
    configured = configured_models(svc.settings, request.app.state.agents)
    used = await svc.store.admin_models(project, now_ms() - MAX_WINDOW_DAYS * DAY_MS, MAX_MODELS)
    models = []
    for model in list(dict.fromkeys([*configured, *used]))[:MAX_MODELS]:
        source, input_price, output_price, cached_price = price_of(model, svc.runs.setup.prices)
        models.append(AdminModelPrice(model=model, source=source,
                                      inputPerMillion=input_price,
                                      outputPerMillion=output_price,
                                      cachedInputPerMillion=cached_price,
                                      configured=model in configured))
    return JSONResponse(wire(AdminModelList(models=models)))


routes = [Route("/v1/admin/models", list_models, methods=["GET"])]
