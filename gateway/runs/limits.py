"""What a run may do: one policy object, made from the settings.

The limits a run starts with, and how many starts one process takes at once, were constructor
arguments passed through the manager to the executor one by one; gathered here, as `Timings`
gathers the waits, the server builds them from its settings (`from_settings`) and a test changes
one by name (`dataclasses.replace(RunLimits(), max_steps=2)`). The defaults are the settings'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..config import Settings


@dataclass(frozen=True)
class RunLimits:
    max_steps: int = 10
    """Model calls per run (`GATEWAY_MAX_STEPS`); more ends it with `MAX_STEPS_EXCEEDED`."""
    tool_timeout_seconds: float = 30.0
    """How long a server tool may run before the model sees a timeout error."""
    approval_ttl_seconds: float = 86400.0
    """How long a call waiting for approval may wait; then it counts as denied."""
    run_max_seconds: float | None = 600.0
    """Wall time a run may take (None: no limit); longer ends it with `RUN_TIME_LIMIT`."""
    max_output_tokens: int | None = None
    """Output tokens a run may use over all its model calls (None: no limit)."""
    idempotency_ttl_seconds: float = 86400.0
    """How long an `Idempotency-Key` names the run it started."""
    start_concurrency: int = 16
    """Run starts one process works on at once (`start_gate`)."""
    pending_tool_ttl_seconds: float | None = 86400.0
    """After how long a new user message ends a pause unasked (`pauses`; None: never)."""
    max_input_tokens: int | None = None
    """Input tokens of a call to a model litellm does not know (None: no limit)."""
    output_reserve_tokens: int = 1024
    """Tokens of the input budget kept for the answer of a call without `max_tokens`."""
    context_margin: float = 0.1
    """The fraction of a model's window left out of its input budget (`GATEWAY_CONTEXT_MARGIN`)."""
    default_max_tokens: int | None = 4096
    """A model call's output cap when neither the request nor the agent sets a lower one
    (`GATEWAY_MAX_TOKENS`; None: none)."""
    on_truncation: str = "stop"
    """What a call cut by its output cap leads to (`GATEWAY_ON_TRUNCATION`)."""
    max_active_runs: int = 0
    """Runs going or starting in one process past which a new one is refused (0: no limit)."""
    max_start_wait_seconds: float = 0.0
    """A new run is refused while a start under way has taken this long (0: never)."""
    max_loop_lag_seconds: float = 0.0
    """A new run is refused while the event loop runs this late at every tick (0: never)."""
    max_loop_cpu: float = 0.0
    """A new run is refused while the loop's thread used this share of a core (0: never)."""
    tool_status_max_per_run: int = 100
    """Statuses a run's tools may report (`engine/tools/status.py`); later ones are dropped."""
    quota_outage: Literal["local", "refuse", "admit"] = "local"
    """What a start gets while the shared quota counters are away (`GATEWAY_QUOTA_OUTAGE`)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> RunLimits:
        return cls(max_steps=settings.max_steps,
                   tool_timeout_seconds=settings.tool_timeout_seconds,
                   approval_ttl_seconds=settings.approval_ttl_seconds,
                   run_max_seconds=settings.run_max_seconds,
                   max_output_tokens=settings.run_max_output_tokens or None,
                   idempotency_ttl_seconds=settings.idempotency_ttl_seconds,
                   start_concurrency=settings.start_concurrency,
                   pending_tool_ttl_seconds=settings.pending_tool_ttl_seconds or None,
                   max_input_tokens=settings.max_input_tokens,
                   output_reserve_tokens=settings.output_reserve_tokens,
                   context_margin=settings.context_margin,
                   default_max_tokens=settings.max_tokens or None,
                   on_truncation=settings.on_truncation,
                   max_active_runs=settings.max_active_runs,
                   max_start_wait_seconds=settings.max_start_wait_seconds,
                   max_loop_lag_seconds=settings.max_loop_lag_seconds,
                   max_loop_cpu=settings.max_loop_cpu,
                   tool_status_max_per_run=settings.tool_status_max_per_run,
                   quota_outage=settings.quota_outage)

    def quota_slot_ms(self, lease_seconds: float) -> int:
        """How long a quota slot outlives a crashed process: at most a run's longest life."""
        return int(((self.run_max_seconds or 0) + lease_seconds) * 1000)
