"""Attachments: Tambo `resource` blocks become litellm content parts, or are refused first."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.engine.attachments import (
    AttachmentError,
    Capabilities,
    check,
    content_parts,
    decoded_size,
    has_attachment,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()
PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
ANY_MODEL = Capabilities(images=None, files=None)


def resource(**fields: Any) -> dict[str, Any]:
    return {"type": "resource", "resource": fields}


def test_each_kind_of_resource_becomes_the_part_litellm_expects() -> None:
    blocks = [
        {"type": "text", "text": "Look at these"},
        resource(name="cat.png", mimeType="image/png", blob=PNG),
        resource(uri="https://example.com/dog.jpg", mimeType="image/jpeg"),
        resource(name="report.pdf", mimeType="application/pdf", blob=PDF),
        resource(uri="file:///notes.md", mimeType="text/markdown", text="# Notes"),
        resource(uri="https://example.com/page"),
    ]
    assert content_parts(blocks) == [
        {"type": "text", "text": "Look at these"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/dog.jpg"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}",
                                  "filename": "report.pdf"}},
        {"type": "text", "text": "Resource file:///notes.md:\n# Notes"},
        {"type": "text", "text": "(Attached resource: https://example.com/page)"},
    ]
    assert has_attachment(blocks)
    assert not has_attachment([{"type": "text", "text": "no files"}])


def test_the_size_is_read_from_base64_without_decoding() -> None:
    for raw in (b"", b"a", b"ab", b"abc", b"abcd" * 100):
        assert decoded_size(base64.b64encode(raw).decode()) == len(raw)


def test_attachments_within_the_limit_that_the_model_reads_pass() -> None:
    blocks = [resource(name="cat.png", mimeType="image/png", blob=PNG),
              resource(name="report.pdf", mimeType="application/pdf", blob=PDF)]
    check(blocks, max_bytes=1000, model=Capabilities(images=True, files=True))
    check(blocks, max_bytes=1000, model=ANY_MODEL)  # unknown model: the provider decides


@pytest.mark.parametrize(("block", "model", "code"), [
    (resource(name="big.png", mimeType="image/png", blob=PNG), ANY_MODEL,
     "ATTACHMENT_TOO_LARGE"),
    (resource(uri="file:///big.txt", text="x" * 21), ANY_MODEL, "ATTACHMENT_TOO_LARGE"),
    (resource(name="bad.png", mimeType="image/png", blob="not base64!"), ANY_MODEL,
     "INVALID_ATTACHMENT"),
    (resource(name="cat.png", mimeType="image/png", blob="AAAA"),
     Capabilities(images=False, files=True), "UNSUPPORTED_ATTACHMENT"),
    (resource(name="r.pdf", mimeType="application/pdf", blob="AAAA"),
     Capabilities(images=True, files=False), "UNSUPPORTED_ATTACHMENT"),
])
def test_an_attachment_the_gateway_will_not_send_is_refused_with_its_code(
        block: dict[str, Any], model: Capabilities, code: str) -> None:
    with pytest.raises(AttachmentError) as refused:
        check([block], max_bytes=20, model=model)
    assert refused.value.code == code
    name = block["resource"].get("name") or block["resource"]["uri"]
    assert name in str(refused.value)


def test_text_and_links_are_never_refused_for_what_the_model_reads() -> None:
    no_media = Capabilities(images=False, files=False)
    check([{"type": "text", "text": "hi"}, resource(uri="file:///a.txt", text="short"),
           resource(uri="https://example.com/page")], max_bytes=100, model=no_media)
