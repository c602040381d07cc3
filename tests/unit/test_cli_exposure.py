"""Development mode (no API keys) accepts any key, so `serve` keeps it on loopback unless told."""

import pytest

from gateway.cli import EXIT_STARTUP, main


def test_dev_mode_refuses_a_public_host(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == EXIT_STARTUP
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 in development mode" in err
    assert "--allow-remote" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_pass_the_check(host: str):
    from gateway.cli import is_loopback

    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.org"])
def test_other_hosts_are_remote(host: str):
    from gateway.cli import is_loopback

    assert not is_loopback(host)


def test_keys_or_the_flag_allow_a_public_host(monkeypatch: pytest.MonkeyPatch):
    from gateway.cli import check_exposure
    from gateway.config import load_settings

    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    check_exposure(load_settings(), "0.0.0.0", allow_remote=True)
    monkeypatch.setenv("GATEWAY_API_KEYS", "k1:proj")
    check_exposure(load_settings(), "0.0.0.0", allow_remote=False)


def test_a_managed_key_allows_a_public_host(monkeypatch: pytest.MonkeyPatch, tmp_path):
    from gateway.cli import StartupError, check_exposure, main
    from gateway.config import load_settings

    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    monkeypatch.setenv("GATEWAY_DATABASE_URL", f"sqlite:///{tmp_path / 'gateway.db'}")
    with pytest.raises(StartupError):
        check_exposure(load_settings(), "0.0.0.0", allow_remote=False)
    assert main(["keys", "create", "--project", "shop"]) == 0
    check_exposure(load_settings(), "0.0.0.0", allow_remote=False)
