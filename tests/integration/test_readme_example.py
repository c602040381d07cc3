"""The README's curl example, run as written (only the address changed) against a real gateway:
the first thing a newcomer types must stream a run, not a refusal."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.support.gateway_server import GatewayServer
from tests.support.scripted_model import ScriptedModel

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_curl() -> list[str]:
    block = re.search(r"```sh\n(curl -N .*?)```", README.read_text(), re.S)
    assert block is not None, "the README has no curl example"
    return shlex.split(block.group(1).replace("\\\n", " "))


def test_the_readme_curl_example_streams_a_run(gateway_process: GatewayServer,
                                               scripted_model: ScriptedModel):
    scripted_model.enqueue([{"content": "Hello from the README."}])
    argv = [arg.replace("http://127.0.0.1:8000", gateway_process.url) for arg in readme_curl()]
    done = subprocess.run([*argv, "-sS", "--max-time", "60"], capture_output=True, text=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line[len("data: "):]) for line in done.stdout.splitlines()
              if line.startswith("data: ")]
    assert events and events[0]["type"] == "RUN_STARTED", done.stdout[:500]
    assert events[-1]["type"] == "RUN_FINISHED", done.stdout[-500:]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Hello from the README."
