"""CPU per streamed token on each provider's wire format, in-process: the adapter alone and the
whole gateway, direct and through litellm, side by side.

    .venv/bin/python -m bench.provider_cost                 # 6 configurations, about 4 minutes
    .venv/bin/python -m bench.provider_cost --tokens 200 --rounds 1   # a quick look

The paced upstream (`bench/paced.py`, its own process) speaks OpenAI's chat completions,
Anthropic's Messages and Gemini's streamGenerateContent; each configuration reads it in one
of them, through the gateway's direct adapter for it (`DirectModel`, `NativeModel`) or through
litellm (`LiteLLMModel`). Per configuration, per streamed token:

- **adapter calls / CPU**: the model adapter alone (`model.stream`, what the agent loop reads),
  a run of `--tokens` tokens less a run of one, over the tokens between: Python function calls
  on this thread (cProfile's count: the same on a quiet and on a busy machine), and the
  thread's CPU (`time.thread_time`, the median of `--rounds`, configurations alternating);
- **gateway calls / CPU**: the same through the whole app in this process (`create_app` on
  SQLite, a `POST /v1/threads/runs` handed to the ASGI app and read to its end: adapter, agent
  loop, run log, Tambo events and SSE framing), the loop thread's.

Two paces: `burst` (the upstream sends as fast as it can: several events per read) and `paced`
(`--paced` tokens a second: each event alone, one read and one wake-up each, as at 20 tok/s).
How many events a read brings, and so the calls per token, still moves a little with the
machine's load. So, first, **parse**: each direct format's reading of the stream alone (the SSE
split, the JSON, the deltas), on the paced upstream's events replayed from memory one per read:
a count that does not move at all. The CPU figures stretch with the machine's load, their
ratios less so. Writes `provider-cost.json` and `provider-cost.md` under `--out`.
Not part of the pass/fail suite.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.concurrency import WIRES, machine_line, model_env
from bench.start_cost import inprocess_app, one_start, with_upstream
from tests.support.gateway_server import ROOT

CONFIGS = [(wire, adapter) for wire in WIRES for adapter in ("direct", "litellm")]
BURST = 100_000  # tokens a second: as fast as the upstream sends them


def model_of(upstream_url: str, wire: str, adapter: str) -> Any:
    from gateway.engine.models.adapters import model_adapter

    env = model_env(upstream_url, wire)
    return model_adapter(env["GATEWAY_MODEL"], env["GATEWAY_MODEL_API_BASE"],
                         env["GATEWAY_MODEL_API_KEY"], adapter)


def adapter_run(model: Any) -> Callable[[str], Awaitable[None]]:
    from gateway.engine.models.litellm_model import ModelRequest

    async def run(prompt: str) -> None:
        async for _ in model.stream(ModelRequest(messages=[{"role": "user",
                                                            "content": prompt}])):
            pass
    return run


def app_run(app: Any) -> Callable[[str], Awaitable[None]]:
    async def run(prompt: str) -> None:
        await one_start(app, text=prompt)
    return run


async def calls(run: Callable[[str], Awaitable[None]], prompt: str) -> int:
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    await run(prompt)
    profiler.disable()
    return int(pstats.Stats(profiler).total_calls)  # type: ignore[attr-defined]


async def cpu(run: Callable[[str], Awaitable[None]], prompt: str) -> float:
    started = time.thread_time()
    await run(prompt)
    return time.thread_time() - started


async def per_token(run: Callable[[str], Awaitable[None]], tokens: int, rate: int,
                    measure: Callable[..., Awaitable[float]]) -> float:
    """`measure` of a run of `tokens` at `rate` less a one-token run's, per token between."""
    one = await measure(run, f"paced 1 {rate}")
    many = await measure(run, f"paced {tokens} {rate}")
    return (many - one) / (tokens - 1)


class _Replay:
    """An aiohttp response's body, one piece per read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.content = self
        self._pieces = pieces

    async def iter_any(self) -> Any:
        for piece in self._pieces:
            yield piece


def parse_run(wire: str) -> Callable[[str], Awaitable[None]]:
    """A direct format's reading of the paced upstream's events for a prompt, from memory."""
    from bench import paced
    from gateway.engine.models import anthropic_wire, direct, gemini_wire, native, socket_model

    makers = {"openai": paced.openai_events, "anthropic": paced.anthropic_events,
              "gemini": paced.gemini_events}
    model = direct.DirectModel(model="paced", api_base="http://127.0.0.1:9/v1", api_key=None,
                               provider="openai", litellm_model="openai/paced",
                               fallback=None)  # type: ignore[arg-type]  # never calls it

    async def run(prompt: str) -> None:
        tokens = int(prompt.split()[1])
        first, before, after, end = makers[wire](tokens)
        events = [before + b"t%d@0 " % k + after for k in range(1, tokens + 1)]
        payloads = socket_model.sse_data(_Replay([first, *events, end] if first else [*events, end]))
        if wire == "openai":
            deltas = model._deltas_of(payloads)
        else:
            reader = (anthropic_wire.AnthropicStream() if wire == "anthropic"
                      else gemini_wire.GeminiStream())
            deltas = native.deltas_of(payloads, reader)
        async for _ in deltas:
            pass
    return run


async def parse_figures(tokens: int) -> list[dict[str, Any]]:
    rows = []
    for wire in WIRES:
        run = parse_run(wire)
        await run("paced 10 1")  # lazy imports
        row = {"wire": wire, "adapter": "direct", "part": "parse", "pace": "replayed",
               "calls_per_token": round(await per_token(run, tokens, 1, calls), 1),
               "cpu_us": [round(await per_token(run, tokens, 1, cpu) * 1e6, 2)
                          for _ in range(5)]}
        row["cpu_us_per_token"] = statistics.median(row["cpu_us"])
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


async def measure_all(args: argparse.Namespace, upstream_url: str) -> list[dict[str, Any]]:
    runs: dict[tuple[str, str, str], Callable[[str], Awaitable[None]]] = {}
    apps, models = [], []
    for wire, adapter in CONFIGS:
        models.append(model_of(upstream_url, wire, adapter))
        runs[(wire, adapter, "adapter")] = adapter_run(models[-1])
        database = Path(tempfile.mkdtemp(prefix="bench-provider-")) / "gateway.db"
        app = inprocess_app(f"sqlite+aiosqlite:///{database}", upstream_url, [
            f"{k}={v}" for k, v in model_env(upstream_url, wire).items()]
            + [f"GATEWAY_MODEL_ADAPTER={adapter}"])
        apps.append(app)
        runs[(wire, adapter, "gateway")] = app_run(app)
    contexts = [app.router.lifespan_context(app) for app in apps]
    for context in contexts:
        await context.__aenter__()
    try:
        for run in runs.values():  # warm-up: lazy imports, first calls, connections
            for _ in range(3):
                await run("paced 20 100000")
        return await parse_figures(args.tokens) + await figures(args, runs)
    finally:
        for context in reversed(contexts):
            await context.__aexit__(None, None, None)
        for model in models:
            if hasattr(model, "aclose"):
                await model.aclose()


async def figures(args: argparse.Namespace,
                  runs: dict[tuple[str, str, str], Callable[[str], Awaitable[None]]]
                  ) -> list[dict[str, Any]]:
    """Calls per token once per configuration, CPU per token over alternating rounds."""
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    paces = {"burst": (args.tokens, BURST), "paced": (args.paced_tokens, args.paced)}
    for (wire, adapter, part), run in runs.items():
        for pace, (tokens, rate) in paces.items():
            rows[(wire, adapter, part, pace)] = {
                "wire": wire, "adapter": adapter, "part": part, "pace": pace,
                "calls_per_token": round(await per_token(run, tokens, rate, calls), 1),
                "cpu_us": []}
    for _ in range(args.rounds):
        for (wire, adapter, part), run in runs.items():
            for pace, (tokens, rate) in paces.items():
                used = await per_token(run, tokens, rate, cpu)
                rows[(wire, adapter, part, pace)]["cpu_us"].append(round(used * 1e6, 1))
    for row in rows.values():
        row["cpu_us_per_token"] = statistics.median(row["cpu_us"])
        print(json.dumps(row), flush=True)
    return list(rows.values())


def markdown(rows: list[dict[str, Any]], machine: str) -> str:
    """One table a part and pace: each configuration's figures, and its ratio to OpenAI's
    direct path."""
    out = [f"Machine: {machine}\n"]
    for part, pace in [("parse", "replayed"), ("adapter", "paced"), ("adapter", "burst"),
                       ("gateway", "paced"), ("gateway", "burst")]:
        chosen = [r for r in rows if r["part"] == part and r["pace"] == pace]
        base = next(r for r in chosen if (r["wire"], r["adapter"]) == ("openai", "direct"))
        out += [f"\n### {part}, {pace}\n",
                "| wire | adapter | calls / token | x OpenAI direct | CPU µs / token "
                "| x OpenAI direct |", "|---|---|---:|---:|---:|---:|"]
        for r in chosen:
            out.append(f"| {r['wire']} | {r['adapter']} | {r['calls_per_token']} | "
                       f"{r['calls_per_token'] / base['calls_per_token']:.2f} | "
                       f"{r['cpu_us_per_token']} | "
                       f"{r['cpu_us_per_token'] / base['cpu_us_per_token']:.2f} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1000, help="tokens of a burst run")
    parser.add_argument("--paced", type=int, default=200, help="tokens a second, paced runs")
    parser.add_argument("--paced-tokens", type=int, default=200, help="tokens of a paced run")
    parser.add_argument("--rounds", type=int, default=3, help="CPU rounds, alternating")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    before = machine_line()
    rows = with_upstream(lambda url: measure_all(args, url))
    machine = f"{machine_line()} (at the start: {before.rsplit(', ', 1)[1]})"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "provider-cost.json").write_text(json.dumps(
        {"machine": machine, "tokens": args.tokens, "paced": args.paced,
         "paced_tokens": args.paced_tokens, "rows": rows}, indent=1))
    table = markdown(rows, machine)
    (args.out / "provider-cost.md").write_text(table)
    print("\n" + table)


if __name__ == "__main__":
    main()
