"""Attachments (`resource` content blocks) -> the model's content parts, in litellm's format.

React sends an attached image as `{type: "resource", resource: {name, mimeType, blob}}` and MCP
resources as `{uri, text}` or `{uri, blob}`. litellm takes OpenAI-style parts and translates
them for each provider: images become `image_url` parts (a `data:` URL, or the https URL
itself), text resources are inlined with their URI so the model knows where the text is from,
and other files (PDFs, ...) become `file` parts. What a model cannot read is refused before the
run starts, when litellm knows the model; for a model it does not know (a custom
OpenAI-compatible server) the parts are sent and the provider's own refusal becomes the run's
error.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


class AttachmentError(ValueError):
    """An attachment the gateway will not send; `code` is the problem code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Capabilities:
    """What a model reads besides text; None: litellm does not know the model."""

    images: bool | None
    files: bool | None


def capabilities(model: str) -> Capabilities:
    import litellm
    from litellm.utils import supports_pdf_input, supports_vision

    try:
        litellm.get_model_info(model)
    except Exception:
        return Capabilities(None, None)
    return Capabilities(bool(supports_vision(model)), bool(supports_pdf_input(model)))


def decoded_size(blob: str) -> int:
    """Bytes the base64 `blob` decodes to (without decoding it)."""
    body = blob.strip()
    return len(body) * 3 // 4 - body[-2:].count("=")


def check(blocks: Iterable[dict[str, Any]], max_bytes: int, model: Capabilities) -> None:
    """Refuse an attachment that is too large, malformed, or one the model cannot read."""
    for block in blocks:
        if block.get("type") != "resource":
            continue
        resource = block.get("resource") or {}
        name = resource.get("name") or resource.get("uri") or "attachment"
        blob, text = resource.get("blob"), resource.get("text")
        size = decoded_size(blob) if blob else len((text or "").encode())
        if size > max_bytes:
            raise AttachmentError("ATTACHMENT_TOO_LARGE",
                                  f"{name} is {size} bytes; attachments may be at most "
                                  f"{max_bytes} bytes (GATEWAY_MAX_ATTACHMENT_BYTES)")
        if blob:
            try:
                base64.b64decode(blob, validate=True)
            except (binascii.Error, ValueError):
                raise AttachmentError("INVALID_ATTACHMENT",
                                      f"{name}: blob is not valid base64") from None
        kind = _kind(resource)
        if kind == "image" and model.images is False:
            raise AttachmentError("UNSUPPORTED_ATTACHMENT",
                                  f"{name}: the model does not accept images")
        if kind == "file" and model.files is False:
            raise AttachmentError("UNSUPPORTED_ATTACHMENT",
                                  f"{name}: the model does not accept "
                                  f"{resource.get('mimeType') or 'file'} attachments")


def is_image_url(resource: dict[str, Any]) -> bool:
    """An image the model would be handed as a URL to fetch (not inline data)."""
    return _kind(resource) == "image" and not resource.get("blob")


def _kind(resource: dict[str, Any]) -> str:
    """image | file | text | link: how a resource reaches the model."""
    mime = (resource.get("mimeType") or "").lower()
    uri = resource.get("uri") or ""
    if resource.get("text") is not None:
        return "text"
    if mime.startswith("image/") and (resource.get("blob") or uri.startswith("https://")):
        return "image"
    if resource.get("blob"):
        return "file"
    return "link"


def content_parts(blocks: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored text and resource blocks as litellm content parts."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
            continue
        resource = block.get("resource") or {}
        mime = resource.get("mimeType") or "application/octet-stream"
        label = resource.get("uri") or resource.get("name") or "attachment"
        kind = _kind(resource)
        if kind == "text":
            parts.append({"type": "text", "text": f"Resource {label}:\n{resource['text']}"})
        elif kind == "image":
            url = (f"data:{mime};base64,{resource['blob']}" if resource.get("blob")
                   else resource["uri"])
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif kind == "file":
            file: dict[str, Any] = {"file_data": f"data:{mime};base64,{resource['blob']}"}
            if resource.get("name"):
                file["filename"] = resource["name"]
            parts.append({"type": "file", "file": file})
        else:
            parts.append({"type": "text", "text": f"(Attached resource: {label})"})
    return parts


def has_attachment(blocks: Iterable[dict[str, Any]]) -> bool:
    return any(block.get("type") == "resource" for block in blocks)
