"""What fitting a long thread to the model's input budget costs per run.

    .venv/bin/python -m bench.context_fit [--turns 500] [--runs 200] [--model openai/gpt-4o-mini]

A thread of `--turns` turns (a user message of about 1,000 characters, an answer of about
1,500, and a server tool call with its result every fifth turn), on a budget that holds about
20 turns. Each run adds one turn and fits the history as a run does before its model call
(`ContextBudget.fitted`, gateway/engine/context_window.py): litellm's `token_counter`, one
message at a time, each count remembered. Prints milliseconds per run for the first run in a
process (nothing counted yet) and for the runs after it (median, p90, p99, max), and how many
turns were kept. Needs no server and no network (litellm's local model map).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from gateway.engine.context_window import (  # noqa: E402 (after litellm is told to stay offline)
    ContextBudget,
    TokenCounter,
)

WORDS = ("river lamp orange quiet seventeen paper window garden cloud engine silver morning "
         "harbour pencil violet thunder the of and to in is it you that").split()


def text(pick: random.Random, chars: int) -> str:
    words, length = [], 0
    while length < chars:
        words.append(pick.choice(WORDS))
        length += len(words[-1]) + 1
    return " ".join(words)


def turn(pick: random.Random, n: int) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": f"{n}: " + text(pick, 1000)}]
    if n % 5 == 0:
        call_id = f"call_{n}"
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
            {"role": "tool", "tool_call_id": call_id, "content": text(pick, 300)}]
    messages.append({"role": "assistant", "content": text(pick, 1500)})
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--model", default="openai/gpt-4o-mini")
    parser.add_argument("--budget", type=int, default=13_000, help="tokens (~20 turns)")
    args = parser.parse_args()
    pick = random.Random(1)
    history = [{"role": "system", "content": "You are the support agent."}]
    for n in range(args.turns):
        history += turn(pick, n)
    tools = [{"type": "function", "function": {"name": "lookup", "description": "Look up",
                                               "parameters": {"type": "object"}}}]
    TokenCounter(args.model).text("warm up")  # litellm imported and its tokenizer loaded, as
    times, kept = [], 0                         # a server has them before its first run
    for run in range(args.runs + 1):
        new = turn(pick, args.turns + run)
        history += new[:1]
        budget = ContextBudget(args.budget, TokenCounter(args.model))  # one per run, as a run
        started = time.perf_counter()
        fitted = budget.fitted(history, tools)
        times.append((time.perf_counter() - started) * 1000)
        kept = sum(1 for m in fitted.messages if m["role"] == "user")
        history += new[1:]
    first, rest = times[0], sorted(times[1:])
    print(f"model {args.model}, {args.turns} turns (+{args.runs} runs), budget "
          f"{args.budget} tokens: {kept} turns kept, {fitted.tokens} tokens sent")
    print(f"first run (cold counts): {first:.2f} ms")
    print(f"later runs: median {statistics.median(rest):.3f} ms, "
          f"p90 {rest[int(len(rest) * 0.9)]:.3f}, p99 {rest[int(len(rest) * 0.99)]:.3f}, "
          f"max {rest[-1]:.3f}")


if __name__ == "__main__":
    main()
