"""Settings: one declarative definition, read once from the environment (and CLI flags).

Every setting is a typed field with its default, its accepted range and its help text in one
place, so a bad value is refused at start-up with a line that names the variable, and the
settings reference in the docs can be generated from this class instead of drifting from it.
Nothing below `app.create_app` reads the environment itself, so tests can run several gateways
with different settings in one process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEMO_MODEL = "gateway/demo"
ENV_PREFIX = "GATEWAY_"
# HS256 keys shorter than the hash (256 bits) are guessable offline from one token (RFC 7518 3.2).
MIN_SECRET_BYTES = 32

# What a key or project name may hold: enough for any generated token, nothing that looks like
# a list or JSON, so a pasted `["k1"]` is an error instead of a strange valid key.
_KEY = re.compile(r"^[A-Za-z0-9._~+/=-]+$")
_PROJECT = re.compile(r"^[A-Za-z0-9._-]+$")


def default_database_url(cwd: Path | None = None) -> str:
    """An SQLite file under ./data, so a first `gateway serve` needs no set-up at all."""
    data_dir = (cwd or Path.cwd()) / "data"
    return f"sqlite+aiosqlite:///{data_dir / 'gateway.db'}"


def parse_api_keys(raw: str) -> dict[str, str]:
    """`key1,key2` or `key1:projectA,key2:projectB`; a key without a project gets `default`.

    Strict on purpose: a key list with an empty item or a stray character is far more likely a
    mistake than an intent, and a mistake here silently opens or closes the gateway.
    """
    keys: dict[str, str] = {}
    if not raw.strip():
        return keys
    for number, item in enumerate(raw.split(","), start=1):
        key, sep, project = (part.strip() for part in item.strip().partition(":"))
        if not key or not _KEY.match(key):
            # The item itself is not shown: it may be a real key with a typo.
            raise ValueError(f"item {number} is not a key (letters, digits and ._~+/=- only; "
                             "items separated by commas, `key:project` to name a project)")
        if sep and not _PROJECT.match(project):
            raise ValueError(f"{project!r} is not a project name (letters, digits and ._-)")
        keys[key] = project or "default"
    return keys


DATABASE_URL_FORMS = ("postgresql://", "postgres://", "postgresql+asyncpg://", "sqlite:///path",
                      "sqlite+aiosqlite:///path")


def normalise_database_url(raw: str) -> str:
    """The async-driver URL for the forms people paste: `postgresql://` and `postgres://` go to
    asyncpg, `sqlite:///path` to aiosqlite; anything else is refused in one line."""
    scheme, sep, rest = raw.strip().partition("://")
    scheme = scheme.lower()
    if sep and rest:
        if scheme in ("postgresql", "postgres", "postgresql+asyncpg"):
            return f"postgresql+asyncpg://{rest}"
        if scheme in ("sqlite", "sqlite+aiosqlite") and rest.startswith("/"):
            return f"sqlite+aiosqlite://{rest}"
    raise ValueError("not a supported database URL; accepted forms: "
                     + ", ".join(DATABASE_URL_FORMS))


def existing_sqlite_directory(url: str) -> str:
    """An SQLite URL whose file is in a directory that exists (or the default `./data`, which
    a first `gateway serve` creates): a typo in a path must not quietly start an empty
    database somewhere else."""
    prefix = "sqlite+aiosqlite:///"
    if not url.startswith(prefix) or url == default_database_url():
        return url
    path = url.removeprefix(prefix).split("?", 1)[0]
    if path and path != ":memory:" and not Path(path).parent.is_dir():
        raise ValueError(f"the directory {str(Path(path).parent)!r} of the SQLite file does "
                         "not exist (create it first, or fix the path)")
    return url


_ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/?#@\s]+$", re.IGNORECASE)


def parse_origins(raw: object) -> object:
    """`*` or browser origins (`scheme://host[:port]`, what a browser sends in `Origin`): an
    entry that is not one would never match any request, so it is refused at start-up."""
    origins = _comma_list(raw)
    if not isinstance(origins, tuple):
        return origins
    checked = []
    for origin in origins:
        origin = origin.removesuffix("/")
        if origin != "*" and not _ORIGIN.match(origin):
            raise ValueError(f"{origin!r} is not an origin: `*` or scheme://host[:port] "
                             "(e.g. https://app.example.com), comma-separated")
        checked.append(origin)
    return tuple(checked)


class FallbackModel(BaseModel):
    """One entry of `GATEWAY_MODEL_FALLBACKS`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="litellm model string")
    api_base: str | None = None
    api_key: SecretStr | None = None


def parse_fallbacks(raw: object) -> object:
    """A JSON list of `{"model", "api_base"?, "api_key"?}` objects, or comma-separated model
    strings (each reached with its provider's defaults: its URL and its key variable)."""
    if not isinstance(raw, str):
        return raw
    if raw.strip().startswith("["):
        try:
            return json.loads(raw)
        except ValueError:
            raise ValueError("not a JSON list of {\"model\", \"api_base\", \"api_key\"} "
                             "objects") from None
    return [{"model": item} for item in _split(raw)]


class ModelPrice(BaseModel):
    """One model's price in `GATEWAY_MODEL_PRICES`: US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, le=1_000_000)
    output: float = Field(ge=0, le=1_000_000)
    cachedInput: float | None = Field(None, ge=0, le=1_000_000)


def parse_prices(raw: object) -> object:
    """A JSON object `{"model": {"input": 0.2, "output": 0.6, "cachedInput"?: 0.05}}`."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        raise ValueError('not a JSON object of {"model": {"input": USD, "output": USD}} '
                         "(per million tokens)") from None


def _comma_list(raw: object) -> object:
    return _split(raw) if isinstance(raw, str) else raw


def _split(raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


# The process runtime's own mechanisms that `GATEWAY_STOCK_RUNTIME` can swap for the libraries'
# stock path, each by name (`gateway/server/`; why each exists: docs/decisions/).
STOCK_RUNTIME_PARTS = ("loop", "http", "server", "front", "sse", "gc")


def parse_stock_runtime(raw: object) -> object:
    """`true`/`all` for every part, `false`/`none` for none, else a comma-separated list."""
    if isinstance(raw, bool):
        return STOCK_RUNTIME_PARTS if raw else ()
    if isinstance(raw, str) and raw.strip().lower() in ("true", "all", "1", "yes", "on"):
        return STOCK_RUNTIME_PARTS
    if isinstance(raw, str) and raw.strip().lower() in ("false", "none", "0", "no", "off"):
        return ()
    if not isinstance(raw, str | tuple | list):
        return raw  # not a list at all: the field's own validation says so
    parts = _split(raw) if isinstance(raw, str) else tuple(raw)
    unknown = [part for part in parts if part not in STOCK_RUNTIME_PARTS]
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(map(str, unknown))}: use true, or some of "
                         f"{', '.join(STOCK_RUNTIME_PARTS)}")
    return tuple(part for part in STOCK_RUNTIME_PARTS if part in parts)


class Settings(BaseSettings):
    """The gateway's settings; each field `name` is read from `GATEWAY_NAME`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="ignore",
        populate_by_name=True)

    database_url: str = Field(
        default_factory=default_database_url,
        description="SQLAlchemy async URL of the database: `sqlite+aiosqlite:///path` or "
                    "`postgresql+asyncpg://user:password@host/db`. Default: `./data/gateway.db` (its "
                    "directory made on first start); any other SQLite file's directory must "
                    "exist.",
        json_schema_extra={"secret_parts": "password"})
    database_pool_size: int = Field(
        10, ge=1, le=1000,
        description="PostgreSQL connections each process needs for steady work; it opens up "
                    "to twice this in bursts and keeps what it opened for the next one. Size "
                    "it so processes x 2 x this stays under the server's `max_connections`. "
                    "Not used with SQLite.")
    redis_url: str | None = Field(
        None, json_schema_extra={"secret_parts": "password"},
        description="`redis://[:password@]host:port/db` (`gateway config` masks the "
                    "password): live tails, cancels and state updates across "
                    "processes go through Redis (streams and pub/sub). Unset: processes "
                    "sharing a database follow each other's runs by polling it, and on "
                    "PostgreSQL send cancels and state updates by LISTEN/NOTIFY.")
    model: str = Field(
        DEMO_MODEL, min_length=1,
        description="The litellm model string (`openai/gpt-4o-mini`, `anthropic/...`); "
                    "`gateway/demo` is the offline built-in demo model.")
    model_api_base: str | None = Field(
        None, description="Passed to litellm as `api_base` (an OpenAI-compatible server's URL).")
    model_api_key: SecretStr | None = Field(
        None, description="Passed to litellm as `api_key`.")
    model_adapter: Literal["auto", "litellm", "direct"] = Field(
        "auto", description="How streamed model calls are made: `direct` reads an "
                            "OpenAI-compatible chat-completions stream itself (far less CPU per "
                            "token; a model it cannot serve stops `gateway serve` with the "
                            "reason), `litellm` goes through litellm, `auto` uses `direct` for "
                            "providers litellm knows as OpenAI-compatible and litellm otherwise.")
    model_fallbacks: Annotated[tuple[FallbackModel, ...], NoDecode] = Field(
        (), json_schema_extra={"secret_parts": "api_key"},
        description="Models tried in order when `GATEWAY_MODEL` fails before it streams "
                    "anything (429, 5xx, timeout, unreachable), through litellm's Router: "
                    "comma-separated litellm model strings (each reached with its provider's "
                    "own URL and key variable), or a JSON list of `{\"model\", \"api_base\", "
                    "\"api_key\"}`. The run's status shows the model that answered. Set, "
                    "streamed calls go through litellm (not the direct adapter).")
    model_prices: Annotated[dict[str, ModelPrice], NoDecode] = Field(
        default_factory=dict,
        description="Prices of models, in US dollars per million tokens, for usage and cost "
                    "(the run status, `gateway usage`, the console, Prometheus): a JSON object "
                    "`{\"openai/llama\": {\"input\": 0.2, \"output\": 0.6, "
                    "\"cachedInput\": 0.05}}` (`cachedInput` optional). For models without a "
                    "public price in litellm's map (self-hosted ones, whose cost is otherwise "
                    "unknown), or to use a negotiated price: a model listed here is priced "
                    "from here. Runs that ended before keep the cost they were given.")
    demo_tokens_per_second: float = Field(
        83.0, ge=0, le=100_000,
        description="How fast the built-in demo model (`gateway/demo`) streams its answer, in "
                    "tokens a second (0: as fast as the gateway takes them). Raise it to try "
                    "cancel and reconnect on a fast stream (real models send 50 to 650); ask "
                    "it to \"count to 2000\" for a long one.")
    model_retries: int = Field(
        0, ge=0, le=10,
        description="Retries of each model (`GATEWAY_MODEL` and each fallback) on a retryable "
                    "failure before streaming, through litellm's Router, before the next "
                    "fallback is tried. 0: none (the client decides, from `isRetryable`).")
    loop_lag_log_seconds: float = Field(
        0.0, ge=0, description="Benchmarks: every this many seconds, log the event loop's "
                               "largest and 99th-percentile lag (0: off).")
    stock_runtime: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Measurements: run uvicorn's, Starlette's and sse-starlette's stock path "
                        "instead of the gateway's own mechanisms, to measure what each is worth "
                        "(docs/decisions/ says why each exists). `true` (or `all`) for every "
                        "part, or a comma-separated list: `loop` (uvloop's own accept, one "
                        "connection per turn of the loop), `http` (uvicorn's HTTP protocol: a "
                        "request's task starts at the next turn), `server` (uvicorn's main loop, "
                        "ten wake-ups a second), `front` (Starlette's middleware, one layer per "
                        "check, instead of the one-layer front), `sse` (sse-starlette's own "
                        "response: its task group, anyio's lock and send timeout), `gc` (the "
                        "interpreter's collection thresholds and thread switch interval). What "
                        "clients see is the same; only the cost differs. Off by default.")
    api_keys: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, repr=False,
        description="`key1,key2` or `key1:projectA,key2:projectB`; each key sees only its "
                    "project's threads. Unset, and no managed key ever made: development "
                    "mode (`GATEWAY_DEVELOPMENT_MODE`).")
    development_mode: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Development mode accepts any API key (or none), puts every caller in one "
                    "project, applies no quotas, and answers loopback only (clients, `Host` "
                    "names and browser origins). `auto`: on while there is no key at all (no "
                    "`GATEWAY_API_KEYS`, and no managed key ever made: a revoked or expired "
                    "key still counts, so revoking the last key never reopens the gateway). "
                    "`off`: never (every request needs a key). `on` weakens security and is "
                    "off by default: development mode although managed keys exist (never "
                    "with `GATEWAY_API_KEYS`), still loopback only.")
    tools_module: str | None = Field(
        None, validation_alias=f"{ENV_PREFIX}TOOLS",
        description="A Python module or file of server-side tools.")
    mcp_servers: str | None = Field(
        None, description="A JSON file of MCP servers whose tools the model may call.")
    agents_file: str | None = Field(
        None, description="A TOML file of the operator's agents (`[agents.NAME]` tables: "
                          "instructions, model, tools, limits, sub-agents; docs/agents.md). "
                          "Unset: one agent, `default`, made of the settings here. An invalid "
                          "file stops start-up; `gateway agents check FILE` checks one.")
    default_agent: str | None = Field(
        None, description="The agent a run gets when nothing else chooses one. Unset: the "
                          "file's agent named `default`, else its first agent.")
    subagent_max_depth: int = Field(
        3, ge=1, le=10, description="Levels of sub-agents an agent may delegate through (an "
                                    "agent whose sub-agents have sub-agents is two levels); "
                                    "an agents file that nests deeper is refused.")
    tool_timeout_seconds: float = Field(
        30.0, gt=0, description="How long a server tool may run before the model sees a "
                                "timeout error.")
    tool_status_max_per_run: int = Field(
        100, ge=0, le=10_000,
        description="Progress statuses a run's server tools may report (`ctx.status(...)`, an "
                    "MCP server's progress notifications; docs/tools.md): each is a Timbal "
                    "`status` frame and a Chorus `status` event; later ones are dropped (0: "
                    "none are shown). At most 5 a second are kept after a burst of 10.")
    approval_ttl_seconds: float = Field(
        86400.0, gt=0, le=30 * 86400,
        description="How long a server tool call that asks for approval may wait for its "
                    "answer; after that it counts as denied (`expiresAt` of the pending call "
                    "and of the AG-UI interrupt).")
    max_steps: int = Field(
        10, ge=1, le=1000, description="Model calls per run (server tools make the loop take "
                                       "several); a run that needs more ends with `RUN_ERROR` "
                                       "`MAX_STEPS_EXCEEDED`.")
    run_max_seconds: float = Field(
        600.0, gt=0, le=86400, description="Wall time a run may take; a longer one ends with "
                                           "one `RUN_ERROR` `RUN_TIME_LIMIT` and its thread is "
                                           "released.")
    run_max_output_tokens: int = Field(
        0, ge=0, description="Output tokens a run may use over all its model calls (0: no "
                             "limit), counted from the usage the model reports: a run that "
                             "reaches it ends with `RUN_ERROR` `OUTPUT_TOKEN_LIMIT` before its "
                             "next model call, and a request's `maxTokens` is capped to what "
                             "is left.")
    max_input_tokens: int | None = Field(
        None, ge=1, description="Input tokens a model call may carry when neither the agent "
                                "(`max_input_tokens`) nor litellm's model information says: "
                                "older turns of a longer thread are left out of what the model "
                                "sees (docs/context.md). Unset: no limit for unknown models.")
    output_reserve_tokens: int = Field(
        1024, ge=0, description="Tokens of the input budget kept for the model's answer when "
                                "a call names no `max_tokens` (at most half the budget).")
    context_margin: float = Field(
        0.1, ge=0, le=0.5, description="The fraction of a model's context window left out of "
                                       "the input budget: the gateway counts tokens with "
                                       "litellm's tokenizer, which can be 10 % below the "
                                       "server's own (docs/context.md).")
    max_tokens: int = Field(
        4096, ge=0, description="The output cap (`max_tokens`) of every model call whose agent "
                                "sets none (an agent's `max_tokens` replaces it); a request's "
                                "`maxTokens` may ask for less, never more. 0: no cap, and a "
                                "model that does not stop fills its whole window.")
    on_truncation: Literal["stop", "continue"] = Field(
        "stop", description="A model call cut by its output cap (`finish_reason: length`): "
                            "`stop` ends the run with the answer so far, marked truncated (its "
                            "message `status`, `RUN_FINISHED.metadata.truncated`); `continue` "
                            "asks the model to go on, within the run's steps and output "
                            "tokens (docs/models.md).")
    retention_days: float | None = Field(
        None, gt=0, description="Delete threads not updated for this many days (with their "
                                "runs, logs and component state), checked hourly by every "
                                "server; a thread with a live or paused run is kept. Unset: "
                                "nothing is ever deleted (`gateway prune` does it by hand).")
    max_message_chars: int = Field(
        200_000, ge=1, description="Characters of text a run's input message may carry (text "
                                   "blocks and tool results, attachments not counted); more "
                                   "is refused with 413 `MESSAGE_TOO_LARGE`.")
    max_tools: int = Field(
        128, ge=0, description="Client tools a run request may declare; more is refused "
                               "with 400 `TOO_MANY_TOOLS`.")
    max_components: int = Field(
        128, ge=0, description="Components a run request may declare; more is refused with "
                               "400 `TOO_MANY_COMPONENTS`.")
    max_schema_bytes: int = Field(
        64 * 1024, ge=1, description="Size (as JSON) of one tool's or component's schemas; "
                                     "larger is refused with 413 `SCHEMA_TOO_LARGE`.")
    max_json_depth: int = Field(
        64, ge=2, le=10_000, description="Nesting depth of a JSON request body; deeper is "
                                         "refused with 400 `JSON_TOO_DEEP` before it is "
                                         "parsed.")
    # Caps on what is stored (docs/security.md, "Bounds and caps").
    max_metadata_bytes: int = Field(
        16 * 1024, ge=1, description="Size (as JSON) of a thread's, a run's or a message's "
                                     "metadata; larger is refused with 413 "
                                     "`METADATA_TOO_LARGE`.")
    max_initial_messages: int = Field(
        100, ge=0, description="Messages a new thread may be seeded with (`initialMessages`, "
                               "an AG-UI history); more is refused with 400 "
                               "`TOO_MANY_INITIAL_MESSAGES`. Their text together is held to "
                               "`GATEWAY_MAX_MESSAGE_CHARS` (413 `MESSAGE_TOO_LARGE`).")
    max_component_state_bytes: int = Field(
        256 * 1024, ge=1, description="Size (as JSON) of one component's state; a larger "
                                      "update is refused with 413 `STATE_TOO_LARGE`.")
    max_threads_per_user: int = Field(
        10_000, ge=0, description="Threads one user scope may hold (0: no limit); one more "
                                  "is refused with 403 `THREAD_LIMIT_REACHED`.")
    max_threads_per_project: int = Field(
        1_000_000, ge=0, description="Threads one project may hold (0: no limit); one more "
                                     "is refused with 403 `THREAD_LIMIT_REACHED`.")
    start_concurrency: int = Field(
        16, ge=1, le=10_000,
        description="Run starts one process works on at once; more wait for their turn, in "
                    "order, so that a burst of new runs does not stall the streams already "
                    "running (`gateway_starts_waiting` counts the waiting).")
    max_active_runs: int = Field(
        0, ge=0, le=1_000_000,
        description="An operator's cap on the runs one process may have going or starting at "
                    "once (0: none, the default: the process admits runs until it is busy, "
                    "which the other admission limits measure); one more is refused at once "
                    "with 503 `OVERLOADED` and `Retry-After`, and `/ready` answers 503 "
                    "meanwhile, so a load balancer sends the work elsewhere (docs/scaling.md).")
    max_start_wait_seconds: float = Field(
        0.75, ge=0, le=3600,
        description="A new run is refused with 503 `OVERLOADED` while a run start under way "
                    "(waiting for its turn at `GATEWAY_START_CONCURRENCY`, or being started) "
                    "has taken this long, or while a newcomer would take this long to start "
                    "at the pace of the starts queued now: the starts under way and its own, "
                    "each costing the event loop the CPU that the queue's starts did (0: "
                    "never; a burst arriving in one instant is let in whole). "
                    "The process starts runs more slowly than they come, and a newcomer "
                    "would only wait longer for its first token. The default leaves a "
                    "quarter of a 1 s first-token bound for the model's answer.")
    max_loop_lag_seconds: float = Field(
        0.25, ge=0, le=60,
        description="A new run is refused with 503 `OVERLOADED` while the event loop has run "
                    "this late at each of its last three ticks (every 50 ms; 0: never): the "
                    "process's core is full (its streams, or other jobs on the machine), every "
                    "token already waits, and so would a refusal; `/ready` answers 503 "
                    "meanwhile. One pause of the loop (a collection, a blocking call) is not "
                    "a reason. 0.1 behind a balancer that should get its refusals within "
                    "100 ms.")
    max_loop_cpu: float = Field(
        0.9, ge=0, le=1,
        description="A new run is refused with 503 `OVERLOADED` while the event loop's thread "
                    "has used this share of one core over the last second (0: never): the "
                    "process is busy with its own streams and starts, and another run's tokens "
                    "would soon make every stream wait; `/ready` answers 503 meanwhile. Other "
                    "jobs on the machine do not count (they show as the loop's lateness).")
    key_concurrent_runs: int = Field(
        100, ge=0, description="Runs an API key may have going at once (0: no limit); one "
                               "more gets 429 `TOO_MANY_CONCURRENT_RUNS`. A managed key may "
                               "set its own.")
    key_runs_per_minute: int = Field(
        600, ge=0, description="Runs an API key may start per minute (0: no limit); one more "
                               "gets 429 `RATE_LIMITED`. A managed key may set its own.")
    key_daily_tokens: int = Field(
        1_000_000, ge=0, description="Model tokens (input and output) an API key's runs may "
                                     "use per UTC day; once spent, new runs get 429 "
                                     "`TOKEN_BUDGET_EXCEEDED`. A managed key may set its own. "
                                     "0: no budget, which lets one leaked client key spend "
                                     "without end (off by default).")
    quota_outage: Literal["local", "refuse", "admit"] = Field(
        "local", description="What a start gets while Redis, which holds the quota counters "
                             "every process shares, does not answer: `local` checks it against "
                             "this process's own counters, with each limit divided among the "
                             "processes Redis last saw (a limit holds, roughly, through the "
                             "outage); `refuse` answers 503 `QUOTAS_UNAVAILABLE`; `admit` lets "
                             "it through unchecked, which lifts every quota and spend cap "
                             "while Redis is away (off by default). Tokens Redis could not "
                             "count are added once it answers again.")
    user_concurrent_runs: int = Field(
        10, ge=0, description="Runs one user scope (userKey or signed-in user) may have going "
                              "at once (0: no limit); 429 `TOO_MANY_CONCURRENT_RUNS`.")
    user_runs_per_minute: int = Field(
        120, ge=0, description="Runs one user scope may start per minute (0: no limit); 429 "
                               "`RATE_LIMITED`.")
    failed_key_lookups_per_minute: int = Field(
        60, ge=0, description="Lookups of unknown managed keys (`gwk_...`) one client address "
                              "may cause per minute, per process (0: no limit); past it, keys "
                              "not already known get 429 `TOO_MANY_KEY_LOOKUPS` without a "
                              "database query.")
    key_websockets: int = Field(
        100, ge=0, description="Timbal WebSockets one API key (or, in development mode, the "
                               "one project) may hold open at once on one process (0: no "
                               "limit); one more is refused in the handshake (403).")
    user_websockets: int = Field(
        10, ge=0, description="Timbal WebSockets one user (the user scope a socket names, or "
                              "its client address when it names none) may hold open at once "
                              "under one API key on one process (0: no per-user limit), so one "
                              "client cannot take all of `GATEWAY_KEY_WEBSOCKETS`; one more is "
                              "refused in the handshake (403).")
    max_websocket_frame_bytes: int = Field(
        64 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="Largest message a client may send on a Timbal WebSocket (clients send "
                    "small control frames); a larger one closes the socket with 1009 before "
                    "it is read whole or parsed.")
    key_cache_seconds: float = Field(
        2.0, ge=0, le=60, description="How long a process trusts its lookup of a managed API "
                                      "key: a revoked key stops working everywhere within "
                                      "this time.")
    heartbeat_seconds: float = Field(
        15.0, gt=0, description="SSE comment heartbeat while a stream is idle (keeps proxies "
                                "from closing it).")
    slow_reader_seconds: float = Field(
        30.0, gt=0, le=3600,
        description="A stream reader (SSE, NDJSON or WebSocket) that takes nothing for this long "
                    "while the gateway has something to send is disconnected (its run goes "
                    "on; it can come back with its cursor).")
    disconnect_grace_seconds: float = Field(
        30.0, ge=0, description="How long a run whose subscribers all left keeps going before "
                                "it is cancelled.")
    lease_seconds: float = Field(
        30.0, gt=0, description="A run whose process died is failed and its thread unlocked "
                                "after this long.")
    timbal_thread_wait_seconds: float = Field(
        30.0, ge=0, le=3600,
        description="A Timbal WebSocket may open before its thread is created "
                    "(`/v1/timbal/threads/{id}/stream`): how long the gateway waits for the "
                    "thread before it closes the socket with 4004. The Timbal HTTP spec asks "
                    "for at least 30 s; lower it only for tests.")
    cors_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        ("*",), description="Origins allowed to call the API from a browser, comma-separated "
                            "`scheme://host[:port]` (as browsers send them; anything else is "
                            "refused at start-up); `*` allows any; an origin not listed gets "
                            "no CORS headers.")
    chorus_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Hosts a Chorus message's `callback` and `mcp` URLs may name, "
                        "comma-separated: `example.com`, `*.example.com` (its subdomains), an "
                        "IP address or a network (`10.0.0.0/8`). Every address the name "
                        "resolves to must be public, or inside a listed address or network "
                        "(loopback, link-local and private ones are refused otherwise). Empty: "
                        "every callback is refused (Chorus cannot answer).")
    chorus_concurrent_runs: int = Field(
        10, ge=0, description="Messages one Chorus connection string may have in flight at "
                              "once, waiting for their channel's thread or running (0: no "
                              "limit); one more gets 429 `TOO_MANY_CONCURRENT_RUNS`. A "
                              "connection may set its own (`gateway chorus connect`).")
    chorus_runs_per_minute: int = Field(
        60, ge=0, description="Messages one Chorus connection string may send per minute (0: "
                              "no limit); one more gets 429 `RATE_LIMITED`. A connection may "
                              "set its own.")
    chorus_daily_tokens: int = Field(
        1_000_000, ge=0, description="Model tokens (input and output) one Chorus connection "
                                     "string's runs may use per UTC day; once spent, its "
                                     "messages get 429 `TOKEN_BUDGET_EXCEEDED`. A connection "
                                     "may set its own. 0: no budget (off by default: a leaked "
                                     "connection string could spend without end).")
    cron_min_interval_seconds: int = Field(
        60, ge=1, le=86400,
        description="The shortest interval a schedule's `{\"every\": N}` may ask for, in "
                    "seconds. Lower it only for tests.")
    cron_catchup_seconds: int = Field(
        600, ge=0, le=7 * 86400,
        description="A due time of a schedule that no process fired (every gateway was down) "
                    "is still fired this late, in seconds; older ones are skipped, so a restart "
                    "after a long outage starts a bounded number of runs.")
    cron_poll_seconds: float = Field(
        1.0, gt=0, le=60,
        description="How often each process looks for schedules that are due (a due time "
                    "fires at most this late while a process is up), and for ended runs' "
                    "webhooks to send.")
    max_crons_per_project: int = Field(
        100, ge=0, description="Schedules one project may have (0: none may be created); one "
                               "more gets 409 `CRON_LIMIT_REACHED`.")
    webhook_secret: SecretStr | None = Field(
        None, description="The key (at least 32 bytes, e.g. `openssl rand -hex 32`) a "
                          "completion webhook is signed with (HMAC-SHA256 over "
                          "`<timestamp>.<body>`, docs/webhooks.md). Unset: a request or "
                          "schedule naming a `webhook` is refused with 400 "
                          "`WEBHOOK_NOT_ALLOWED`.")
    webhook_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Hosts a `webhook` URL may name, with the rules of "
                        "`GATEWAY_CHORUS_ALLOWED_HOSTS`: a name, `*.example.com`, an address or "
                        "a network; every address the name resolves to must be public or "
                        "listed (loopback, link-local and private ones are refused otherwise). "
                        "Empty: every webhook is refused.")
    webhook_retry_seconds: int = Field(
        3600, ge=0, le=7 * 86400,
        description="How long a webhook that failed (no answer, or not a 2xx) is retried, "
                    "with backoff, after its first attempt; then it is marked failed.")
    webhook_max_attempts: int = Field(
        10, ge=1, le=100, description="Attempts at most per webhook, the first included.")
    webhook_backoff_seconds: float = Field(
        5.0, gt=0, le=3600,
        description="The wait before a webhook's second attempt; each next wait doubles (at "
                    "most 15 minutes). Lower it only for tests.")
    log_format: Literal["auto", "json", "text"] = Field(
        "auto", description="`json`: one JSON object per log line (with `request_id` and "
                            "`run_id`); `text`: plain lines; `auto`: text when stderr is a "
                            "terminal, JSON otherwise.")
    drain_seconds: float = Field(
        20.0, ge=0, description="On SIGTERM, how long running runs may go on finishing; the "
                                "rest then end with a retryable `RUN_ERROR` (`SERVER_SHUTDOWN`) "
                                "and their threads are released.")
    max_body_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Largest request body; a larger one is refused "
                                            "with 413 `PAYLOAD_TOO_LARGE` as it arrives, "
                                            "before it is read whole.")

    models: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Models a run request may pick with its `model` field, comma-separated "
                        "litellm model strings (reached with the same api base and key); any "
                        "other requested model is refused. Unset: only `GATEWAY_MODEL`.")
    run_wait_seconds: float = Field(
        60.0, gt=0, le=3600, description="How long `POST /v1/threads[/{id}]/runs/wait` holds "
        "the request for its run to end; a run still going then is answered 202 with its ids "
        "(join it with the run's stream or status). Keep it under the proxies' idle timeout.")
    idempotency_ttl_seconds: float = Field(
        86400.0, gt=0, description="How long an `Idempotency-Key` of a run request is "
                                   "remembered; after that the key may be used again.")
    pending_tool_ttl_seconds: float = Field(
        86400.0, ge=0, description="How long a run paused for client tool results "
                                   "(`awaiting_input`) blocks its thread: after that, a new "
                                   "user message answers the pending calls as cancelled and "
                                   "runs, instead of 400 `MISSING_RESULTS`. 0: never.")
    oidc_issuers: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Identity providers whose ID/access tokens `POST /oauth/token` accepts: "
                        "OIDC issuer URLs, comma-separated; their signing keys are read from "
                        "the issuer's discovery document (`jwks_uri`) and cached.")
    oidc_audience: str | None = Field(
        None, validate_default=True, description="The audience (`aud`) an identity provider's token must be issued "
                          "for; required with `GATEWAY_OIDC_ISSUERS`.")
    oauth_hs256_secret: SecretStr | None = Field(
        None, description="A shared secret of at least 32 bytes: `POST /oauth/token` also "
                          "accepts tokens signed with it (HS256; `sub`, `exp`, `aud` "
                          "(`GATEWAY_OIDC_AUDIENCE`) and `iss` (`GATEWAY_OAUTH_HS256_ISSUER`) "
                          "required).")
    oauth_hs256_issuer: str | None = Field(
        None, validate_default=True, min_length=1,
        description="The issuer (`iss`) a token signed with `GATEWAY_OAUTH_HS256_SECRET` must "
                    "name; required with it, as `GATEWAY_OIDC_AUDIENCE` is.")
    token_secret: SecretStr | None = Field(
        None, description="The key (at least 32 bytes, e.g. `openssl rand -hex 32`) that signs "
                          "the gateway's own access tokens. Unset: a random key per process "
                          "(tokens die with a restart and are not valid on other processes); "
                          "set it when running several processes.")
    token_ttl_seconds: int = Field(
        900, ge=30, le=86400, description="Lifetime of a gateway access token (never longer "
                                          "than the exchanged token's own remaining lifetime).")
    max_attachment_bytes: int = Field(
        5 * 1024 * 1024, ge=1, description="Largest attachment (decoded `resource` blob or "
                                           "text) a message may carry to the model.")
    max_embedded_resources: int = Field(
        8, ge=0, le=100, description="Most MCP resources one message may reference for the "
                                     "gateway to read and embed (`embedResources`; "
                                     "docs/resources.md); each at most "
                                     "`GATEWAY_MAX_ATTACHMENT_BYTES`.")
    image_urls: Literal["refuse", "pass"] = Field(
        "refuse", description="An image attached by `https` URL (not inline data): `refuse` "
                              "answers 400 `IMAGE_URL_NOT_ALLOWED`; `pass` hands the URL to the "
                              "model provider, which fetches it. `pass` weakens security with "
                              "a self-hosted upstream (it fetches the client's URL from inside "
                              "your network); use it only with a hosted provider. Off by "
                              "default.")
    transcription_model: str | None = Field(
        None, description="litellm transcription model for `POST /audio/transcribe` (e.g. "
                          "`openai/whisper-1`, reached with the model api base and key). "
                          "Unset: voice input is off.")

    _parse_api_keys = field_validator("api_keys", mode="before")(
        lambda raw: parse_api_keys(raw) if isinstance(raw, str) else raw)
    _parse_origins = field_validator("cors_origins", mode="before")(parse_origins)
    _parse_models = field_validator("models", mode="before")(_comma_list)
    _parse_stock_runtime = field_validator("stock_runtime", mode="before")(parse_stock_runtime)
    _parse_chorus_hosts = field_validator("chorus_allowed_hosts", mode="before")(_comma_list)
    _parse_webhook_hosts = field_validator("webhook_allowed_hosts", mode="before")(_comma_list)
    _parse_fallbacks = field_validator("model_fallbacks", mode="before")(parse_fallbacks)
    _parse_prices = field_validator("model_prices", mode="before")(parse_prices)
    _parse_issuers = field_validator("oidc_issuers", mode="before")(_comma_list)

    @field_validator("oidc_audience")
    @classmethod
    def _issuers_need_audience(cls, audience: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("oidc_issuers") and not audience:
            raise ValueError("GATEWAY_OIDC_ISSUERS needs an audience: a token issued for "
                             "another application must not sign its users in here")
        return audience
    _normalise_database_url = field_validator("database_url")(
        lambda raw: existing_sqlite_directory(normalise_database_url(raw)))

    @field_validator("development_mode")
    @classmethod
    def _on_needs_no_keys(cls, mode: str, info: ValidationInfo) -> str:
        if mode == "on" and info.data.get("api_keys"):
            raise ValueError("`on` cannot go with GATEWAY_API_KEYS: keys configured here "
                             "are meant to be required")
        return mode

    @field_validator("token_secret", "oauth_hs256_secret", "webhook_secret")
    @classmethod
    def _strong_secret(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value().encode()) < MIN_SECRET_BYTES:
            raise ValueError(f"too short: an HS256 key needs at least {MIN_SECRET_BYTES} bytes "
                             "(make one with `openssl rand -hex 32`)")
        return secret

    @field_validator("oauth_hs256_issuer")
    @classmethod
    def _shared_secret_needs_claims(cls, issuer: str | None,
                                    info: ValidationInfo) -> str | None:
        if info.data.get("oauth_hs256_secret") is not None and not (
                issuer and info.data.get("oidc_audience")):
            raise ValueError("GATEWAY_OAUTH_HS256_SECRET needs GATEWAY_OAUTH_HS256_ISSUER and "
                             "GATEWAY_OIDC_AUDIENCE: tokens must name who issued them (`iss`) "
                             "and for whom (`aud`)")
        return issuer

    @field_validator("token_secret")
    @classmethod
    def _token_secret_of_its_own(cls, secret: SecretStr | None,
                                 info: ValidationInfo) -> SecretStr | None:
        """The gateway's own tokens and an identity provider's must not share a key: whoever
        could make one (the app's backend, which holds the identity secret) could make the
        other, and a gateway token would pass as the provider's."""
        shared = info.data.get("oauth_hs256_secret")
        if (secret is not None and isinstance(shared, SecretStr)
                and secret.get_secret_value() == shared.get_secret_value()):
            raise ValueError("must differ from GATEWAY_OAUTH_HS256_SECRET: the gateway's access "
                             "tokens and your identity provider's tokens need keys of their "
                             "own (make one with `openssl rand -hex 32`)")
        return secret

    @property
    def development_possible(self) -> bool:
        """Whether development mode may be on: not with `GATEWAY_API_KEYS` or `off`. Whether
        it is (`auto`) depends on the managed keys too: `KeyRing.development`."""
        return self.development_mode != "off" and not self.api_keys

    def with_overrides(self, **changes: object) -> "Settings":
        """A copy with the given fields replaced, validated like the environment (CLI flags)."""
        given = {name: value for name, value in changes.items() if value is not None}
        if not given:
            return self
        return type(self).model_validate({**self.model_dump(by_alias=False), **given})


class SettingsError(Exception):
    """A setting with a value that is not accepted; the message is one line per problem."""


def env_name(field_name: str) -> str:
    """The environment variable a field is read from."""
    alias = Settings.model_fields[field_name].validation_alias
    return alias if isinstance(alias, str) else ENV_PREFIX + field_name.upper()


def load_settings(**overrides: object) -> Settings:
    """The settings from the environment (plus CLI overrides), or a `SettingsError` whose
    message names each bad variable, its value and what it accepts - never a traceback."""
    try:
        return Settings().with_overrides(**overrides)
    except ValidationError as error:
        lines = []
        for problem in error.errors(include_url=False):
            field_name = str(problem["loc"][0]) if problem["loc"] else "?"
            if field_name.startswith(ENV_PREFIX):
                name = field_name
            elif field_name in Settings.model_fields:
                name = env_name(field_name)
            else:
                name = field_name
            reason = str(problem["msg"]).removeprefix("Value error, ")
            secret = _is_secret(field_name) or not problem["loc"]  # a model's input: all of it
            shown = "" if secret else f"={problem.get('input')!r}"
            lines.append(f"invalid setting {name}{shown}: {reason}")
        raise SettingsError("\n".join(lines)) from None


def _is_secret(field_name: str) -> bool:
    return field_name in {"model_api_key", "api_keys", "database_url", "oauth_hs256_secret",
                          "token_secret", "redis_url", "model_fallbacks", "webhook_secret"}
