"""The fallback adapter: `GATEWAY_MODEL` and then each of `GATEWAY_MODEL_FALLBACKS`, through
litellm's Router.

Each model is a Router deployment in a model group of its own (`gateway-0` the configured
model, `gateway-1`... the fallbacks, in order), with `fallbacks` from the first to the others and
`num_retries` from `GATEWAY_MODEL_RETRIES`. The Router moves on when a call fails before the
stream yields content: an error answer (429, 5xx), a timeout or a connection that cannot be made,
and an error in the stream before its first content chunk. A failure after content has streamed
is the run's error, as without fallbacks: replaying a half-answer from another model would show
the user two answers. Only when every model failed does the run end, with one error.

A single deployment per group means the Router never cools a model down on its own failures:
each run tries the list from the top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .litellm_model import LiteLLMModel, ModelRequest, UsageSink, report_usage

PRIMARY = "gateway-0"


@dataclass(frozen=True)
class Deployment:
    model: str
    api_base: str | None = None
    api_key: str | None = None


class RoutedModel(LiteLLMModel):
    """`LiteLLMModel` whose calls to the configured model go through a Router with fallbacks.

    A run that picked another allowed model (`GATEWAY_MODELS`) calls it as `LiteLLMModel` does,
    without fallbacks: the list belongs to `GATEWAY_MODEL`.
    """

    def __init__(self, deployments: Sequence[Deployment], retries: int = 0) -> None:
        from litellm.router import Router

        primary = deployments[0]
        super().__init__(primary.model, primary.api_base, primary.api_key)
        self.deployments = list(deployments)
        groups = [f"gateway-{i}" for i in range(len(self.deployments))]
        self.router: Any = Router(  # typed loosely: its overloads want TypedDict messages
            model_list=[{"model_name": group, "model_info": {"id": group},
                         "litellm_params": _params(deployment)}
                        for group, deployment in zip(groups, self.deployments, strict=True)],
            fallbacks=[{PRIMARY: groups[1:]}] if len(groups) > 1 else [],
            num_retries=retries)

    async def _open(self, request: ModelRequest) -> Any:
        if request.model and request.model != self.model:
            return await super()._open(request)
        try:
            return await self.router.acompletion(
                model=PRIMARY, messages=request.messages, stream=True,
                stream_options={"include_usage": True}, **request.options())
        except Exception as exc:
            raise self.failed(exc) from None

    async def complete(self, messages: list[dict[str, Any]], max_tokens: int = 200,
                       task: str | None = None, usage: UsageSink | None = None) -> str:
        try:
            response = await self.router.acompletion(model=PRIMARY, messages=messages,
                                                     max_tokens=max_tokens)
        except Exception as exc:
            raise self.failed(exc) from None
        report_usage(response, usage)
        return response.choices[0].message.content or ""

    def _served_by(self, stream: Any) -> str | None:
        """The model string of the deployment that produced `stream` (litellm's
        `hidden_params["model_id"]`: the deployment's id, `gateway-<index>`), read after the
        first chunk: a fallback taken inside the stream (an error before any content)
        re-points the wrapper only once it yields."""
        model_id = str((getattr(stream, "hidden_params", None) or {}).get("model_id") or "")
        index = model_id.removeprefix("gateway-")
        if index.isdigit() and int(index) < len(self.deployments):
            return self.deployments[int(index)].model
        return None


def _params(deployment: Deployment) -> dict[str, Any]:
    # max_retries 0: the openai SDK's own retries would hide a failure from the Router (which
    # retries with `num_retries`) for seconds before it can fall back.
    params: dict[str, Any] = {"model": deployment.model, "max_retries": 0}
    if deployment.api_base:
        params["api_base"] = deployment.api_base
    if deployment.api_key:
        params["api_key"] = deployment.api_key
    return params
