"""The process runtime: how uvicorn runs `gateway serve` (its event loop, HTTP protocol and main
loop), the interpreter's tuning, the app's middleware stack (the front, or starlette's own), the
SSE writer with its slow-reader bound, problem+json answers, the event loop's lag monitor and the
drain at shutdown. It imports nothing above `runs/`: the checks the front asks (development
mode's guard, the door, the key lookup) are handed to it by the app. With `store/engines/`, the
only place that uses a library's private names (tests/unit/test_private_apis.py lists them; why
each, in docs/decisions/); `GATEWAY_STOCK_RUNTIME` runs the libraries' stock path instead."""
