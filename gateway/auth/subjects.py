"""Whose quotas a start counts against: an API key, a user scope of a project, or a Chorus
connection string, each with its limits.

A subject is part of who the caller is (`caller.Caller.quota_subjects`); counting its runs and
tokens is `runs/admission/quotas.py`'s job, with the backend's counters.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

Kind = Literal["apiKey", "user", "chorus"]


@dataclass(frozen=True)
class Limits:
    """0 means no limit."""

    concurrent_runs: int = 0
    runs_per_minute: int = 0
    daily_tokens: int = 0

    @property
    def any(self) -> bool:
        return bool(self.concurrent_runs or self.runs_per_minute or self.daily_tokens)


@dataclass(frozen=True)
class Subject:
    """Who a limit is counted for: an API key, a user scope of a project, or a Chorus
    connection string."""

    kind: Kind
    name: str  # stable and free of secrets: a key id, or a hash of project and scope
    limits: Limits


def key_subject(key_id: str, limits: Limits) -> Subject:
    return Subject("apiKey", f"key:{key_id}", limits)


def user_subject(project: str, scope: str, limits: Limits) -> Subject:
    digest = hashlib.sha256(f"{project}\0{scope}".encode()).hexdigest()[:24]
    return Subject("user", f"user:{digest}", limits)


def chorus_subject(connection_id: str, limits: Limits) -> Subject:
    return Subject("chorus", f"chorus:{connection_id}", limits)
