"""The load generator's parts that run in their own processes: a paced upstream and a bare SSE
stream, both plain asyncio on raw sockets (no ASGI server, no HTTP library), so that neither
costs the machine more than it must and neither is what a benchmark measures.

- `upstream`: an OpenAI-compatible `POST .../chat/completions` stream (keep-alive, chunked) of
  numbered tokens on an absolute schedule (token k leaves at start + (k-1) / rate, so scheduling
  delays do not accumulate), each stamped with the monotonic time it left (`t12@<ns> `; one
  clock for every process on the machine). The prompt says how many and how fast:
  `paced <tokens> <rate>`.
- `bare`: `GET /stream?tokens=N&rate=R`, the same paced stamps as gateway-shaped
  `TEXT_MESSAGE_CONTENT` SSE events and nothing else: the limit of any SSE server here.

    .venv/bin/python -m bench.paced upstream 8000
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import AsyncIterator

PROMPT = re.compile(rb"paced (\d+) (\d+)")
HEAD = (b'data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":0,'
        b'"model":"paced","choices":[{"index":0,"delta":')
TAIL = b',"finish_reason":null}]}\n\n'


async def paced(tokens: int, rate: int) -> AsyncIterator[tuple[int, int]]:
    """(k, stamp) for k = 1..tokens, token k at start + (k-1)/rate on the monotonic clock."""
    start = time.monotonic()
    for k in range(1, tokens + 1):
        delay = start + (k - 1) / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        yield k, time.monotonic_ns()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """(request line, body) of the next request on the connection; None when it closes."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return head.split(b"\r\n", 1)[0], body


async def upstream_stream(writer: asyncio.StreamWriter, body: bytes) -> None:
    match = PROMPT.search(body)
    tokens, rate = (int(match.group(1)), int(match.group(2))) if match else (3, 100)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"transfer-encoding: chunked\r\n\r\n"
                 + chunk(HEAD + b'{"role":"assistant","content":""}' + TAIL))
    async for k, stamp in paced(tokens, rate):
        writer.write(chunk(HEAD + b'{"content":"t%d@%d "}' % (k, stamp) + TAIL))
        await writer.drain()
    usage = (b'data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":0,'
             b'"model":"paced","choices":[],"usage":{"prompt_tokens":5,'
             b'"completion_tokens":%d,"total_tokens":%d}}\n\n' % (tokens, tokens + 5))
    end = HEAD + b'{},"finish_reason":"stop"}]}\n\n' + usage + b"data: [DONE]\n\n"
    writer.write(chunk(end) + b"0\r\n\r\n")
    await writer.drain()


async def bare_stream(writer: asyncio.StreamWriter, line: bytes) -> None:
    query = dict(p.split(b"=", 1) for p in line.split(b" ")[1].partition(b"?")[2].split(b"&")
                 if b"=" in p)
    tokens, rate = int(query.get(b"tokens", b"3")), int(query.get(b"rate", b"100"))
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
                 + chunk(b'id: 1\ndata: {"type":"RUN_STARTED","threadId":"thr","runId":"run"}'
                         b"\n\n"))
    async for k, stamp in paced(tokens, rate):
        event = json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "01JD0000000000000000",
                            "delta": f"t{k}@{stamp} ", "timestamp": stamp // 1_000_000},
                           separators=(",", ":"))
        writer.write(chunk(b"id: %d\ndata: %s\n\n" % (k + 1, event.encode())))
        await writer.drain()
    writer.write(chunk(b'id: %d\ndata: {"type":"RUN_FINISHED","threadId":"thr","runId":"run"}'
                       b"\n\n" % (tokens + 2)) + b"0\r\n\r\n")
    await writer.drain()


def handler(kind: str):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await read_request(reader)) is not None:
                line, body = request
                if line.startswith(b"GET / ") or line.startswith(b"GET /health"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                elif kind == "upstream":
                    await upstream_stream(writer, body)
                else:
                    await bare_stream(writer, line)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return handle


async def serve(kind: str, port: int) -> None:
    server = await asyncio.start_server(handler(kind), "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(kind, port))


if __name__ == "__main__":
    main()
