"""`GET /openapi.json` and `GET /docs`: the API document, and a page a person can read offline.

The page is plain server-rendered HTML built from the same document (no scripts, no CDN), so it
works on an air-gapped machine and never disagrees with `/openapi.json`.
"""

from __future__ import annotations

import json
from functools import lru_cache
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from .openapi import build, openapi_text

STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#222}
h2{border-bottom:1px solid #ddd;margin-top:2.5rem}
.op{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;font-family:monospace}
code,pre{font-family:ui-monospace,monospace;font-size:13px}
pre{background:#f6f8fa;padding:.75rem;overflow:auto}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;
vertical-align:top}
"""


def _ref_link(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return f'<a href="#schema-{escape(name)}">{escape(name)}</a>'
    return f"<code>{escape(json.dumps(schema, sort_keys=True))}</code>"


def _operation_html(path: str, method: str, op: dict[str, Any]) -> str:
    parts = [f'<div class="op" id="op-{escape(op["operationId"])}">',
             (f'<p><span class="m">{method.upper()}</span> <code>{escape(path)}</code> '
             f'&mdash; {escape(op["summary"])}</p>')]
    if op.get("description"):
        parts.append(f"<p>{escape(op['description'])}</p>")
    if op.get("security") == []:
        parts.append("<p><em>No API key needed.</em></p>")
    if op["parameters"]:
        rows = "".join(
            f"<tr><td><code>{escape(p['name'])}</code></td><td>{p['in']}</td>"
            f"<td>{'yes' if p.get('required') else ''}</td><td>{_ref_link(p['schema'])}</td>"
            f"<td>{escape(p['description'])}</td></tr>" for p in op["parameters"])
        parts.append("<table><tr><th>parameter</th><th>in</th><th>required</th><th>schema</th>"
                     f"<th></th></tr>{rows}</table>")
    body = op.get("requestBody")
    if body:
        parts.append(f"<p>Body (<code>application/json</code>): "
                     f"{_ref_link(body['content']['application/json']['schema'])}</p>")
    rows = []
    for status, response in op["responses"].items():
        content = response.get("content", {})
        media = ", ".join(f"<code>{escape(m)}</code> {_ref_link(c.get('schema'))}"
                          for m, c in content.items()
                          if m != "application/problem+json")
        if "application/problem+json" in content:
            codes = content["application/problem+json"]["schema"]["allOf"][1]["properties"][
                "code"]["enum"]
            media = "problem+json: " + ", ".join(
                f'<a href="#code-{c}"><code>{c}</code></a>' for c in codes)
        rows.append(f"<tr><td>{status}</td><td>{media or 'no body'}</td></tr>")
    parts.append(f"<table><tr><th>status</th><th>response</th></tr>{''.join(rows)}</table>")
    parts.append("</div>")
    return "".join(parts)


def render_docs(document: dict[str, Any]) -> str:
    info = document["info"]
    out = [(f"<!doctype html><html lang=en><head><meta charset=utf-8>"
           f"<title>{escape(info['title'])}</title><style>{STYLE}</style></head><body>"),
           f"<h1>{escape(info['title'])} <small>{escape(info['version'])}</small></h1>",
           f"<p>{escape(info['description'])}</p>",
           ('<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1). '
           "Authenticate with the <code>x-api-key</code> header or "
           "<code>Authorization: Bearer</code>.</p>")]
    for tag in document["tags"]:
        out.append(f"<h2>{escape(tag['name'])}</h2>")
        for path, methods in document["paths"].items():
            for method, op in methods.items():
                if op["tags"] == [tag["name"]]:
                    out.append(_operation_html(path, method, op))
    out.append("<h2>Error codes</h2><table><tr><th>code</th><th>status</th><th></th></tr>")
    for code, item in document["x-error-codes"].items():
        out.append(f'<tr id="code-{code}"><td><code>{code}</code></td><td>{item["status"]}</td>'
                   f"<td>{escape(item['description'])}</td></tr>")
    out.append("</table><h2>Schemas</h2>")
    for name, schema in sorted(document["components"]["schemas"].items()):
        text = escape(json.dumps(schema, indent=2, sort_keys=True))
        out.append(f'<details id="schema-{escape(name)}"><summary><code>{escape(name)}</code>'
                   f"</summary><pre>{text}</pre></details>")
    out.append("</body></html>")
    return "\n".join(out)


@lru_cache(maxsize=1)
def docs_html() -> str:
    return render_docs(build())


async def openapi_json(_: Request) -> Response:
    return Response(openapi_text(), media_type="application/json")


async def docs(_: Request) -> Response:
    return HTMLResponse(docs_html())


routes = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]
