"""A tiny MCP server for tests, built on the official SDK's `MCPServer`.

Run it the way an operator's config would: `python -m tests.support.mcp_server` speaks MCP over
stdio; `python -m tests.support.mcp_server --http PORT` serves streamable HTTP on
`http://127.0.0.1:PORT/mcp`. `--prefix NAME` renames `lookup_city` to `NAME_lookup_city` and
`--name` sets the server name, so two instances can offer distinct or colliding tools.
`--token T` makes the HTTP server answer 401 unless `Authorization: Bearer T` is sent.
`--host-name NAME` also accepts requests whose `Host` is `NAME` (the SDK refuses any but
loopback names otherwise), as a server reached by name at a pinned address is asked.
It also offers two text resources, `test://notes/welcome` and `test://notes/big` (200,000 bytes).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from typing import Annotated, Any

import anyio
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

from tests.support.gateway_server import ROOT, free_port

CITIES = {"paris": ("France", 2_102_650), "lima": ("Peru", 9_751_000)}


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


class City(BaseModel):
    name: str
    country: str
    population: int


def build(name: str = "test-tools", prefix: str = "") -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool(description="Add two integers and return the sum as text.",
                 structured_output=False)
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(name=f"{prefix}lookup_city",
                 description="Look up a city's country and population by name.")
    def lookup_city(name: str) -> City:
        if name.lower() not in CITIES:
            raise ToolError(f"unknown city: {name}")
        country, population = CITIES[name.lower()]
        return City(name=name.title(), country=country, population=population)

    @server.tool(description="Always fails: the tool raises an exception.")
    def explode(reason: str = "boom") -> str:
        raise ToolError(f"exploded: {reason}")

    @server.tool(description="Report the value of an environment variable of this process.",
                 structured_output=False)
    def read_env(variable: str) -> str:
        return os.environ.get(variable, "<unset>")

    @server.tool(description="Wait the given number of seconds, then answer.",
                 structured_output=False)
    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"waited {seconds} s"

    @server.tool(description="Greet someone, asking the user for their name first.",
                 structured_output=False)
    async def greet(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
        if isinstance(answer, AcceptedElicitation):
            return f"Hello, {answer.data.name}!"
        return f"No name given ({answer.action})"

    @server.resource("test://notes/welcome", name="welcome", mime_type="text/plain",
                     description="A short note (for `embedResources`).")
    def welcome_note() -> str:
        return "Welcome to the test server."

    @server.resource("test://notes/big", name="big", mime_type="text/plain",
                     description="A note of 200,000 bytes (for the size limit).")
    def big_note() -> str:
        return "x" * 200_000

    @server.tool(description="Report the gateway's `_meta` entries of this request.")
    def call_meta(ctx: Context) -> dict[str, Any]:
        meta = ctx.request_context.meta
        given = meta.model_dump() if hasattr(meta, "model_dump") else dict(meta or {})
        return {k: v for k, v in given.items() if k.startswith("gateway/")}

    @server.tool(description="Count to `steps`, reporting progress at each step.",
                 structured_output=False)
    async def count(steps: int, ctx: Context) -> str:
        for n in range(1, steps + 1):
            await ctx.report_progress(n, steps, f"counted {n}" if n < steps else None)
        return f"counted to {steps}"

    @server.tool(description="Terminate the server process abruptly (simulates a crash).")
    def crash() -> str:
        os._exit(3)

    return server


class HttpMcpServer:
    """This module serving streamable HTTP in a subprocess on a loopback port."""

    def __init__(self, *args: str) -> None:
        self.port = free_port()
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 30.0) -> HttpMcpServer:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", "--http", str(self.port),
             *self.args], cwd=ROOT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"MCP test server exited with {self.process.returncode}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        raise RuntimeError(f"MCP test server did not listen within {timeout} s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def require_token(app: Any, token: str) -> Any:
    """ASGI wrapper: 401 for a request without the expected bearer token."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    parser.add_argument("--name", default="test-tools")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--token")
    parser.add_argument("--host-name")
    args = parser.parse_args()
    server = build(args.name, args.prefix)
    if not args.http:
        server.run()
        return
    import uvicorn

    security = None
    if args.host_name:
        from mcp.server.transport_security import TransportSecuritySettings

        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", f"{args.host_name}:*"])
    app: Any = server.streamable_http_app(transport_security=security)
    if args.token:
        app = require_token(app, args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
