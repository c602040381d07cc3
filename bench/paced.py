"""The load generator's parts that run in their own processes: a paced upstream and a bare SSE
stream, both plain asyncio on raw sockets (no ASGI server, no HTTP library), so that neither
costs the machine more than it must and neither is what a benchmark measures.

- `upstream`: a model's stream (keep-alive, chunked) of numbered tokens on an absolute schedule
  (token k leaves at start + (k-1) / rate, so scheduling delays do not accumulate), each
  stamped with the monotonic time it left (`t12@<ns> `; one clock for every process on the
  machine). The prompt says how many and how fast: `paced <tokens> <rate>`. In the format the
  path asks for, one event per token as each provider sends them: OpenAI's chat completions
  (`POST .../chat/completions`), Anthropic's Messages (`POST .../v1/messages`: `message_start`,
  one `text` block of `text_delta`s, `message_delta`, `message_stop`) and Gemini's
  (`POST .../models/<name>:streamGenerateContent?alt=sse`: a `GenerateContentResponse` per
  token with its `usageMetadata`, the last with `finishReason`).
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
from typing import Any

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


def openai_events(tokens: int) -> tuple[bytes, bytes, bytes, bytes]:
    """(first event, a token's event before and after its text, the last events)."""
    usage = (b'data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","created":0,'
             b'"model":"paced","choices":[],"usage":{"prompt_tokens":5,'
             b'"completion_tokens":%d,"total_tokens":%d}}\n\n' % (tokens, tokens + 5))
    return (HEAD + b'{"role":"assistant","content":""}' + TAIL, HEAD + b'{"content":"',
            b'"}' + TAIL, HEAD + b'{},"finish_reason":"stop"}]}\n\n' + usage
            + b"data: [DONE]\n\n")


def anthropic_events(tokens: int) -> tuple[bytes, bytes, bytes, bytes]:
    start = (b'event: message_start\ndata: {"type":"message_start","message":{"id":'
             b'"msg_01Paced","type":"message","role":"assistant","model":"paced","content":[],'
             b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,'
             b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}'
             b'\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,'
             b'"content_block":{"type":"text","text":""}}\n\n')
    end = (b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
           b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
           b'"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}\n\n'
           b'event: message_stop\ndata: {"type":"message_stop"}\n\n' % tokens)
    return (start, b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
                   b'"delta":{"type":"text_delta","text":"', b'"}}\n\n', end)


def gemini_events(tokens: int) -> tuple[bytes, bytes, bytes, bytes]:
    tail = (b'"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":5,'
            b'"totalTokenCount":5},"modelVersion":"paced","responseId":"Paced01"}\r\n\r\n')
    end = (b'data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},'
           b'"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":5,'
           b'"candidatesTokenCount":%d,"totalTokenCount":%d},"modelVersion":"paced",'
           b'"responseId":"Paced01"}\r\n\r\n' % (tokens, tokens + 5))
    return b"", b'data: {"candidates":[{"content":{"parts":[{"text":"', tail, end


def events_for(line: bytes) -> Any:
    """The wire format a request line asks for: its events' maker."""
    target = line.split(b" ")[1]
    if target.endswith(b"/messages"):
        return anthropic_events
    if b":streamGenerateContent" in target:
        return gemini_events
    return openai_events


async def upstream_stream(writer: asyncio.StreamWriter, line: bytes, body: bytes) -> None:
    match = PROMPT.search(body)
    tokens, rate = (int(match.group(1)), int(match.group(2))) if match else (3, 100)
    first, before, after, end = events_for(line)(tokens)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                 b"transfer-encoding: chunked\r\n\r\n" + (chunk(first) if first else b""))
    async for k, stamp in paced(tokens, rate):
        writer.write(chunk(before + b"t%d@%d " % (k, stamp) + after))
        await writer.drain()
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
                    await upstream_stream(writer, line, body)
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
