"""Development mode (no API keys) accepts any key, so `serve` only ever listens on loopback in
it: no flag opens it, and a key ever made (revoked or expired ones too) ends it for good."""

import pytest

from gateway.cli.main import EXIT_STARTUP, main


def test_dev_mode_refuses_a_public_host(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == EXIT_STARTUP
    err = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 in development mode" in err
    assert "gateway keys create" in err and "GATEWAY_API_KEYS" in err
    assert "Traceback" not in err


def test_allow_remote_no_longer_opens_development_mode(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "1", "--allow-remote"]) == EXIT_STARTUP
    assert "refusing to listen on 0.0.0.0 in development mode" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2", "[::1]",
                                  "LOCALHOST"])
def test_loopback_hosts_pass_the_check(host: str):
    from gateway.cli.main import is_loopback

    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.org",
                                  "localhost.example.org"])
def test_other_hosts_are_remote(host: str):
    from gateway.cli.main import is_loopback

    assert not is_loopback(host)


def test_keys_or_development_mode_off_allow_a_public_host(monkeypatch: pytest.MonkeyPatch):
    from gateway.cli.main import check_exposure
    from gateway.config import load_settings

    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    monkeypatch.setenv("GATEWAY_DEVELOPMENT_MODE", "off")
    check_exposure(load_settings(), "0.0.0.0")
    monkeypatch.delenv("GATEWAY_DEVELOPMENT_MODE")
    monkeypatch.setenv("GATEWAY_API_KEYS", "k1:proj")
    check_exposure(load_settings(), "0.0.0.0")


def test_a_managed_key_allows_a_public_host_even_once_revoked(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path, capsys):
    from gateway.cli.main import StartupError, check_exposure, main
    from gateway.config import load_settings

    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    monkeypatch.setenv("GATEWAY_DATABASE_URL", f"sqlite:///{tmp_path / 'gateway.db'}")
    with pytest.raises(StartupError):
        check_exposure(load_settings(), "0.0.0.0")
    assert main(["keys", "create", "--project", "shop"]) == 0
    check_exposure(load_settings(), "0.0.0.0")
    capsys.readouterr()
    assert main(["keys", "list"]) == 0
    key_id = capsys.readouterr().out.splitlines()[1].split("\t")[0]
    assert main(["keys", "revoke", "--project", "shop", key_id]) == 0
    # Authentication stays on: the gateway is not back in development mode.
    check_exposure(load_settings(), "0.0.0.0")
    # Asked for explicitly, development mode is loopback only, keys or not.
    monkeypatch.setenv("GATEWAY_DEVELOPMENT_MODE", "on")
    with pytest.raises(StartupError):
        check_exposure(load_settings(), "0.0.0.0")
