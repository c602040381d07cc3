"""The settings as people read them: the generated reference (`docs/settings.md`) and the
effective values `gateway config` prints, with every secret masked.

Both are derived from the `Settings` fields, so a new setting appears in the docs and in
`gateway config` without anyone remembering to add it; a test fails while the checked-in
reference differs from what this module generates.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit, urlunsplit

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..config import Settings, env_name

MASK = "****"
REFERENCE_PATH = "docs/settings.md"
ENV_FILE_PATH = "deploy/gateway.env"
_SECRET_QUERY_NAMES = {"password", "pass", "pwd", "token", "access_token", "api_key", "key"}
_TYPE_NAMES = {str: "text", int: "integer", float: "number", SecretStr: "secret text",
               dict: "key list", tuple: "comma-separated list"}


def mask_url(url: str) -> str:
    """A URL with its password (and a bare token in the user part) replaced by `****`, and so
    is a `password=` in its query (`redis://host/0?password=...`).

    SQLAlchemy's own renderer is used for database URLs, so a URL it parses is masked exactly as
    it would connect; anything else falls back to a plain URL split.
    """
    url = _mask_query_password(url)
    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None
    if parsed is not None and parsed.password is not None:
        return parsed.render_as_string(hide_password=True).replace("***", MASK)
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user = userinfo.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def _mask_query_password(url: str) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = "&".join(
        f"{name}={MASK}" if name.lower() in _SECRET_QUERY_NAMES else item
        for item in parts.query.split("&")
        for name in [item.split("=", 1)[0]])
    return urlunsplit(parts._replace(query=query))


def shown_value(name: str, value: Any) -> str:
    """A setting's value as `gateway config` prints it: secrets masked, lists comma-joined."""
    if value is None:
        return ""
    if isinstance(value, SecretStr):
        return MASK
    if name == "api_keys":
        return ",".join(f"{MASK}:{project}" for project in value.values())
    if name == "model_fallbacks":  # model (api base, key masked), ...
        return ",".join(
            f.model + "".join(f" ({part})" for part in (
                f.api_base and f"api_base={mask_url(f.api_base)}",
                f.api_key and f"api_key={MASK}") if part)
            for f in value)
    if isinstance(value, tuple):
        return ",".join(mask_url(item) if "://" in item else item for item in value)
    if isinstance(value, str) and "://" in value:
        # Any URL may carry a password (the database's, Redis's `redis://:pw@host`, a proxy's
        # `user:token@` in an api base): every one is masked, not a list of known fields.
        return mask_url(value)
    return str(value)


def effective_lines(settings: Settings) -> list[str]:
    """`GATEWAY_NAME=value` per setting, in definition order, secrets masked."""
    return [f"{env_name(name)}={shown_value(name, getattr(settings, name))}"
            for name in Settings.model_fields]


def _type_name(field: FieldInfo) -> str:
    base: Any = field.annotation
    if get_origin(base) in (Union, UnionType):  # `X | None`: the X
        base = next(arg for arg in get_args(base) if arg is not type(None))
    if get_origin(base) is Literal:  # a choice: name the choices
        return "one of " + ", ".join(f"`{choice}`" for choice in get_args(base))
    base = get_origin(base) or base
    return _TYPE_NAMES.get(base, getattr(base, "__name__", str(base)))


def _range(field: FieldInfo) -> str:
    bounds = []
    for item in field.metadata:
        if isinstance(item, annotated_types.Gt):
            bounds.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Ge):
            bounds.append(f">= {item.ge}")
        elif isinstance(item, annotated_types.Lt):
            bounds.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.Le):
            bounds.append(f"<= {item.le}")
        elif isinstance(item, annotated_types.MinLen) and item.min_length:
            bounds.append("not empty")
    return ", ".join(bounds)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        produced = field.default_factory()  # type: ignore[call-arg]
        return "unset" if not produced else "see meaning"
    if field.default is None:
        return "unset"
    if isinstance(field.default, tuple):
        return f"`{','.join(field.default)}`"
    return f"`{field.default}`"


def reference_markdown() -> str:
    """`docs/settings.md`: one row per setting, generated from the `Settings` definition."""
    rows = ["# Settings reference", "",
            "Generated from `gateway/config.py` by `gateway openapi`; do not edit by hand. Every "
            "setting is an environment variable; `gateway config` prints the effective values "
            "with secrets masked. A value outside its type or range stops start-up with one line "
            "naming the variable (exit status 2).", "",
            "| variable | type | default | accepted | meaning |",
            "|---|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{env_name(name)}` | {_type_name(field)} | {_default(field)} | "
                    f"{_range(field)} | {meaning} |")
    return "\n".join(rows) + "\n"


def env_file_text() -> str:
    """`deploy/gateway.env`: every setting, commented out at its default, for compose's and
    Kubernetes' `env_file`/ConfigMap; uncomment what you set. Generated like the reference."""
    lines = ["# Every gateway setting, for `env_file:` in compose.yaml (and deploy/kubernetes/).",
             "# Generated from gateway/config.py by `gateway openapi`; the meaning of each is",
             "# docs/settings.md. Uncomment and set what you need; keep secrets out of version",
             "# control (this file is a template: copy it, or pass secrets from the environment).",
             ""]
    for name, field in Settings.model_fields.items():
        default = _default(field).strip("`")
        shown = "" if default in ("unset", "see meaning") else default
        lines.append(f"# {env_name(name)}={shown}")
    return "\n".join(lines) + "\n"
