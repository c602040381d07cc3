"""`GET /v1/agents`: the agents a client may offer, in the shape of CopilotKit's runtime `info`
(`RuntimeInfo` of `@copilotkit/shared`: `version`, `agents` by name, and whether audio can be
transcribed), so a UI can offer a picker without knowing which server it talks to."""

from __future__ import annotations

from pydantic import Field

from .tambo import StrictModel


class AgentDescription(StrictModel):
    name: str
    description: str
    className: str = Field(description="What CopilotKit names an agent's class; here always "
                                       "`HttpAgent`, the AG-UI client that runs it "
                                       "(`/v1/agui/agents/{name}/run`).")


class AgentList(StrictModel):
    version: str = Field(description="The gateway's version.")
    agents: dict[str, AgentDescription] = Field(description="By name, in declaration order.")
    defaultAgent: str = Field(description="The agent a run gets when it names none.")
    models: list[str] = Field(description=(
        "The models a run request may pick with its `model` field: `GATEWAY_MODEL` first, "
        "then `GATEWAY_MODELS` (the gateway's addition; the playground offers them when there "
        "is more than one). A run that picks none gets its agent's model."))
    audioFileTranscriptionEnabled: bool = Field(
        description="Whether `POST /audio/transcribe` is on (`GATEWAY_TRANSCRIPTION_MODEL`).")
