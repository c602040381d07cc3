"""Speech to text through litellm's transcription API (`POST /audio/transcribe`, voice input)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .litellm_model import UsageSink, classify, report_usage


@dataclass
class Transcriber:
    model: str
    api_base: str | None = None
    api_key: str | None = None

    async def transcribe(self, filename: str, audio: bytes, content_type: str,
                         usage: UsageSink | None = None) -> str:
        """The text spoken in `audio`; a provider failure raises `ModelError`. `usage` is told
        the tokens the provider says the call used (when it says)."""
        import litellm

        params: dict[str, Any] = {"model": self.model, "file": (filename, audio, content_type),
                                  "max_retries": 0}
        if self.api_base:
            params["api_base"] = self.api_base
        if self.api_key:
            params["api_key"] = self.api_key
        try:
            response = await litellm.atranscription(**params)
        except Exception as exc:
            raise classify(exc, self.api_key) from None
        report_usage(response, usage)
        return (getattr(response, "text", None) or "").strip()
