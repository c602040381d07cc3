"""Timbal WebSockets with keys: at most `GATEWAY_KEY_WEBSOCKETS` open per key, and browsers
only from `GATEWAY_CORS_ORIGINS` (browsers apply no CORS to WebSockets: the server checks)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.gateway_server import GatewayServer
from tests.support.run_stream import wait_for

# WebSockets are counted per process, not through the backend.
pytestmark = pytest.mark.sqlite_only

KEY, OTHER_KEY = "socket-key", "other-socket-key"
APP = "http://app.example"


@pytest.fixture(scope="module")
def keyed_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("sockets"), {
        "GATEWAY_API_KEYS": f"{KEY},{OTHER_KEY}", "GATEWAY_KEY_WEBSOCKETS": "2",
        "GATEWAY_CORS_ORIGINS": APP})
    server.start()
    yield server
    server.stop()


def open_socket(gateway: GatewayServer, thread: str, key: str = KEY,
                origin: str | None = None) -> ClientConnection:
    url = f"ws{gateway.url.removeprefix('http')}/v1/timbal/threads/{thread}/stream?userKey=u"
    return connect(url, additional_headers={"x-api-key": key}, open_timeout=10,
                   origin=origin)  # type: ignore[arg-type]


def refused(gateway: GatewayServer, thread: str, **kwargs: str) -> bool:
    try:
        with open_socket(gateway, thread, **kwargs):
            return False
    except InvalidStatus as exc:
        assert exc.response.status_code == 403
        return True


def new_thread(gateway: GatewayServer, key: str = KEY) -> str:
    response = httpx.post(f"{gateway.url}/v1/threads", json={"userKey": "u"},
                          headers={"x-api-key": key})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_key_holds_at_most_its_sockets(keyed_gateway: GatewayServer) -> None:
    thread = new_thread(keyed_gateway)
    with open_socket(keyed_gateway, thread), open_socket(keyed_gateway, thread):
        assert refused(keyed_gateway, thread)
        # Another key has sockets of its own.
        assert not refused(keyed_gateway, new_thread(keyed_gateway, OTHER_KEY), key=OTHER_KEY)
    wait_for(lambda: not refused(keyed_gateway, thread), timeout=10,
             what="the closed sockets' places to come back")


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    server = GatewayServer(tmp_path_factory.mktemp("shared-sockets"), {
        "GATEWAY_API_KEYS": KEY, "GATEWAY_KEY_WEBSOCKETS": "4",
        "GATEWAY_USER_WEBSOCKETS": "2"})
    server.start()
    yield server
    server.stop()


def test_many_sockets_of_one_user_leave_room_for_another(
        shared_gateway: GatewayServer) -> None:
    """One user (a user scope) holds at most `GATEWAY_USER_WEBSOCKETS` of the key's sockets:
    however many it opens, another user of the same key still gets one."""
    url = f"ws{shared_gateway.url.removeprefix('http')}/v1/timbal/threads/{{}}/stream?userKey={{}}"
    threads = {user: httpx.post(f"{shared_gateway.url}/v1/threads", json={"userKey": user},
                                headers={"x-api-key": KEY}).json()["id"] for user in ("u1", "u2")}

    def open_as(user: str) -> ClientConnection | None:
        try:
            return connect(url.format(threads[user], user),
                           additional_headers={"x-api-key": KEY}, open_timeout=10)
        except InvalidStatus as exc:
            assert exc.response.status_code == 403
            return None

    first = [open_as("u1") for _ in range(4)]
    try:
        assert [ws is not None for ws in first] == [True, True, False, False]
        other = open_as("u2")
        assert other is not None
        other.close()
    finally:
        for ws in first:
            if ws is not None:
                ws.close()


def test_a_socket_from_a_foreign_origin_is_refused(keyed_gateway: GatewayServer) -> None:
    thread = new_thread(keyed_gateway)
    assert refused(keyed_gateway, thread, origin="https://evil.example")
    wait_for(lambda: not refused(keyed_gateway, thread, origin=APP), timeout=10,
             what="a socket from the app's origin")
