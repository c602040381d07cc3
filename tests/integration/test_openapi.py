"""The running gateway serves the checked-in document, a readable offline docs page, and an
`Allow` header that agrees with the document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_served_document_is_the_checked_in_file(client: httpx.Client) -> None:
    served = client.get("/openapi.json", headers={"x-api-key": ""})
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/json")
    assert served.content == DOCUMENT.read_bytes()


def test_docs_page_lists_every_operation_and_code_without_outside_assets(
        client: httpx.Client) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    document = json.loads(DOCUMENT.read_text())
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            assert f'id="op-{operation["operationId"]}"' in html, (method, path)
    for code in document["x-error-codes"]:
        assert f'id="code-{code}"' in html
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in html
    # Works on an air-gapped machine: no scripts, nothing loaded from elsewhere.
    assert "<script" not in html and "src=" not in html
    links = re.findall(r'href="([^"]*)"', html)
    assert links and all(link.startswith(("#", "/")) for link in links)


def test_a_wrong_method_gets_405_naming_the_documented_methods(client: httpx.Client) -> None:
    document = json.loads(DOCUMENT.read_text())
    for path, methods in document["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x1", path)
        answer = client.request("PUT", concrete)
        assert answer.status_code == 405, (path, answer.status_code)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert answer.json()["code"] == "METHOD_NOT_ALLOWED"
        allowed = {m.strip() for m in answer.headers["allow"].split(",")} - {"HEAD"}
        assert allowed == {m.upper() for m in methods}, path
