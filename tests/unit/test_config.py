"""Settings as an operator types them: the accepted forms, and one clear line for a bad value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import SettingsError, load_settings
from gateway.runs.limits import RunLimits


def _load(monkeypatch: pytest.MonkeyPatch, **env: str):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return load_settings()


def test_defaults_are_the_embedded_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(monkeypatch)
    assert settings.model == "gateway/demo"
    assert settings.database_url.startswith("sqlite+aiosqlite:///")
    assert settings.development_mode == "auto" and settings.development_possible


def test_admission_is_by_what_the_process_carries_and_a_count_is_an_operators_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No count by default, on either database: the loop's lateness, its CPU and the start
    # wait say when the process is busy.
    postgres = "postgresql://gateway@localhost/gateway"
    for settings in (_load(monkeypatch), _load(monkeypatch, GATEWAY_DATABASE_URL=postgres)):
        limits = RunLimits.from_settings(settings)
        assert limits.max_active_runs == 0
        assert (limits.max_loop_cpu, limits.max_loop_lag_seconds,
                limits.max_start_wait_seconds) == (0.9, 0.25, 0.75)
    capped = RunLimits.from_settings(_load(monkeypatch, GATEWAY_MAX_ACTIVE_RUNS="120",
                                           GATEWAY_MAX_LOOP_CPU="0"))
    assert (capped.max_active_runs, capped.max_loop_cpu) == (120, 0.0)


def test_api_keys_with_and_without_projects(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(monkeypatch, GATEWAY_API_KEYS="k1:alpha, k2")
    assert settings.api_keys == {"k1": "alpha", "k2": "default"}
    assert not settings.development_possible


def test_development_mode_off_needs_keys_for_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not _load(monkeypatch, GATEWAY_DEVELOPMENT_MODE="off").development_possible


@pytest.mark.parametrize("secret", ["pw123", "x" * 31])
def test_a_short_token_secret_is_refused(monkeypatch: pytest.MonkeyPatch, secret: str) -> None:
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_TOKEN_SECRET=secret)
    assert str(error.value).startswith("invalid setting GATEWAY_TOKEN_SECRET: too short")
    assert secret not in str(error.value) and "\n" not in str(error.value)
    assert _load(monkeypatch, GATEWAY_TOKEN_SECRET="x" * 32).token_secret is not None


def test_the_shared_secret_needs_an_issuer_and_an_audience(
        monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s" * 32
    for env in ({}, {"GATEWAY_OIDC_AUDIENCE": "app"}, {"GATEWAY_OAUTH_HS256_ISSUER": "me"}):
        monkeypatch.delenv("GATEWAY_OIDC_AUDIENCE", raising=False)
        monkeypatch.delenv("GATEWAY_OAUTH_HS256_ISSUER", raising=False)
        with pytest.raises(SettingsError) as error:
            _load(monkeypatch, GATEWAY_OAUTH_HS256_SECRET=secret, **env)
        assert "GATEWAY_OAUTH_HS256_SECRET needs" in str(error.value)
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_OAUTH_HS256_SECRET="short")
    assert str(error.value).startswith("invalid setting GATEWAY_OAUTH_HS256_SECRET: too short")
    settings = _load(monkeypatch, GATEWAY_OAUTH_HS256_SECRET=secret, GATEWAY_OIDC_AUDIENCE="app",
                     GATEWAY_OAUTH_HS256_ISSUER="me")
    assert settings.oauth_hs256_issuer == "me"


def test_development_mode_on_cannot_go_with_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_API_KEYS="k1", GATEWAY_DEVELOPMENT_MODE="on")
    assert str(error.value).startswith("invalid setting GATEWAY_DEVELOPMENT_MODE='on'")


@pytest.mark.parametrize("name, value", [
    ("GATEWAY_MAX_STEPS", "abc"),
    ("GATEWAY_MAX_STEPS", "0"),
    ("GATEWAY_HEARTBEAT_SECONDS", "-1"),
    ("GATEWAY_API_KEYS", '["k1"]'),
    ("GATEWAY_API_KEYS", ",,"),
    ("GATEWAY_API_KEYS", "k1:bad project"),
    ("GATEWAY_MODEL_FALLBACKS", '[{"model": "openai/x", "api_bsae": "typo"}]'),
    ("GATEWAY_MODEL_FALLBACKS", '[{"model": "openai/x"'),
    ("GATEWAY_MODEL_RETRIES", "11"),
])
def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, name: str,
                                        value: str) -> None:
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, **{name: value})
    assert str(error.value).startswith(f"invalid setting {name}")
    assert "\n" not in str(error.value)


def test_model_fallbacks_as_model_strings_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.openapi.settings_report import shown_value

    plain = _load(monkeypatch, GATEWAY_MODEL_FALLBACKS="openai/a, anthropic/b")
    assert [f.model for f in plain.model_fallbacks] == ["openai/a", "anthropic/b"]
    assert all(f.api_base is None and f.api_key is None for f in plain.model_fallbacks)
    listed = _load(monkeypatch, GATEWAY_MODEL_FALLBACKS='[{"model": "openai/c", "api_base": '
                   '"http://10.0.0.5:8080/v1", "api_key": "sk-fallback-secret"}]')
    [fallback] = listed.model_fallbacks
    assert (fallback.model, fallback.api_base) == ("openai/c", "http://10.0.0.5:8080/v1")
    assert fallback.api_key is not None
    assert fallback.api_key.get_secret_value() == "sk-fallback-secret"
    shown = shown_value("model_fallbacks", listed.model_fallbacks)
    assert "openai/c" in shown and "sk-fallback-secret" not in shown


def test_a_bad_key_list_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_API_KEYS="good-key,sk live secret")
    assert "secret" not in str(error.value)


def test_serve_with_a_bad_value_exits_2_with_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", "1"], capture_output=True,
        text=True, env={"PATH": "/usr/bin:/bin", "GATEWAY_LEASE_SECONDS": "soon"}, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "gateway: invalid setting GATEWAY_LEASE_SECONDS='soon': Input should be a valid "
        "number, unable to parse string as a number"]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("pasted, used", [
    ("postgresql://u:p@db:5432/gw", "postgresql+asyncpg://u:p@db:5432/gw"),
    ("postgres://u:p@db/gw", "postgresql+asyncpg://u:p@db/gw"),
    ("postgresql+asyncpg://u@db/gw", "postgresql+asyncpg://u@db/gw"),
    ("sqlite:///var/lib/gw.db", "sqlite+aiosqlite:///var/lib/gw.db"),
    ("sqlite+aiosqlite:///./data/gw.db", "sqlite+aiosqlite:///./data/gw.db"),
])
def test_pasted_database_urls_map_to_the_async_drivers(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path, pasted: str,
                                                        used: str) -> None:
    monkeypatch.chdir(tmp_path)  # the relative SQLite paths' directories exist
    (tmp_path / "var" / "lib").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    assert _load(monkeypatch, GATEWAY_DATABASE_URL=pasted).database_url == used


@pytest.mark.parametrize("url", ["mysql://u:secretpw@db/gw", "gateway.db", "sqlite://",
                                 "postgresql+psycopg2://u:secretpw@db/gw"])
def test_serve_with_an_unsupported_database_url_exits_2_with_one_line(url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", "1"], capture_output=True,
        text=True, env={"PATH": "/usr/bin:/bin", "GATEWAY_DATABASE_URL": url}, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gateway: invalid setting GATEWAY_DATABASE_URL")
    assert "postgresql://" in lines[0] and "sqlite:///path" in lines[0]
    assert "secretpw" not in result.stderr and "Traceback" not in result.stderr


def test_an_sqlite_file_in_a_missing_directory_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """A typo in the path must not start an empty database in a new directory."""
    missing = tmp_path / "no-such-dir" / "gateway.db"
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_DATABASE_URL=f"sqlite:///{missing}")
    assert str(error.value) == (
        f"invalid setting GATEWAY_DATABASE_URL: the directory '{missing.parent}' of the SQLite "
        "file does not exist (create it first, or fix the path)")
    assert not missing.parent.exists()
    # The default (./data/gateway.db) is still made on a first start, with no set-up at all.
    monkeypatch.delenv("GATEWAY_DATABASE_URL")
    monkeypatch.chdir(tmp_path)
    assert _load(monkeypatch).with_overrides(model="openai/x").database_url == (
        f"sqlite+aiosqlite:///{tmp_path / 'data' / 'gateway.db'}")


@pytest.mark.parametrize("value", ["not a url", "https://app.example.com/path", "app.example.com",
                                   "https://a.example.com,null"])
def test_a_cors_origin_that_is_not_an_origin_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                        value: str) -> None:
    with pytest.raises(SettingsError) as error:
        _load(monkeypatch, GATEWAY_CORS_ORIGINS=value)
    assert str(error.value).startswith("invalid setting GATEWAY_CORS_ORIGINS=")
    assert "is not an origin: `*` or scheme://host[:port]" in str(error.value)
    assert "\n" not in str(error.value)


def test_cors_origins_as_browsers_send_them(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(monkeypatch, GATEWAY_CORS_ORIGINS="https://app.example.com/, "
                                                       "http://localhost:5173")
    assert settings.cors_origins == ("https://app.example.com", "http://localhost:5173")
    assert _load(monkeypatch, GATEWAY_CORS_ORIGINS="*").cors_origins == ("*",)
