"""The running gateway serves the checked-in document, an offline docs page, and an `Allow`
header that agrees with the document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

# The served document and the docs page do not depend on the backend.
pytestmark = pytest.mark.sqlite_only

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def test_served_document_is_the_checked_in_file(client: httpx.Client) -> None:
    served = client.get("/openapi.json", headers={"x-api-key": ""})
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("application/json")
    assert served.content == DOCUMENT.read_bytes()


def test_docs_page_loads_swagger_ui_from_the_gateway_only(client: httpx.Client) -> None:
    """Works on an air-gapped machine: every asset is served by the gateway itself, and the
    Content-Security-Policy forbids anything else (tests/e2e renders the page in Chromium)."""
    page = client.get("/docs", headers={"x-api-key": ""})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy
    assets = re.findall(r'(?:src|href)="([^"]*)"', page.text)
    assert "/docs/swagger-ui/swagger-ui-bundle.js" in assets and "/" in assets
    for asset in assets:
        if asset.startswith("data:"):
            continue
        assert asset.startswith("/"), asset
        assert client.get(asset).status_code == 200, asset


def test_the_docs_page_does_not_keep_the_key_typed_into_authorize(
        client: httpx.Client) -> None:
    """Swagger UI's `persistAuthorization` writes the key to localStorage, where it outlives
    the page: the gateway's configuration turns it off."""
    script = client.get("/web/docs.js", headers={"x-api-key": ""})
    assert script.status_code == 200
    assert re.search(r"persistAuthorization:\s*false", script.text), script.text


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


def test_only_assets_are_served_from_the_static_directories(client: httpx.Client) -> None:
    """The pages come from their routes, with their policy; the stock Swagger UI page (which
    loads an outside URL) and the playground's file are not reachable as static files."""
    for page in ("/web/index.html", "/web/docs.html", "/docs/swagger-ui/index.html",
                 "/docs/swagger-ui/oauth2-redirect.html", "/docs/swagger-ui/index.j2"):
        assert client.get(page, headers={"x-api-key": ""}).status_code == 404, page
    for page in ("/", "/docs"):
        response = client.get(page, headers={"x-api-key": ""})
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
    asset = client.get("/web/playground.js", headers={"x-api-key": ""})
    assert asset.status_code == 200 and asset.headers["x-content-type-options"] == "nosniff"
