"""Speech to text through litellm's transcription API (`POST /audio/transcribe`, voice input)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import classify


@dataclass
class Transcriber:
    model: str
    api_base: str | None = None
    api_key: str | None = None

    async def transcribe(self, filename: str, audio: bytes, content_type: str) -> str:
        """The text spoken in `audio`; a provider failure raises `ModelError`."""
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
        return (getattr(response, "text", None) or "").strip()
