"""The command line as a user meets it (issue 18's surface fixes): real CLIs in subprocesses.

``neo4j status`` reports the instance's own ports; the demo's closing hint follows ``--out``
and its Neo4j Browser URL the server's real HTTP port; ``viz`` refuses file names it would
write something else into; help texts show their defaults and finish their sentences; the
TextWorld agent keeps memory in the configured store (``--in-memory`` for RAM) and reports
progress.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphmem.stores.embedded import EmbeddedStore
from showcase.envs.jvm import has_java17

ROOT = Path(__file__).resolve().parent.parent
needs_java = pytest.mark.skipif(not has_java17(), reason="plays text games: needs Java 17")


def run(
    tmp_path: Path, *args: str, module: str = "graphmem", timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    env["GRAPHMEM_EMBEDDER"] = "hashing"
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


# ---- neo4j status ----


@pytest.fixture
def fake_instance(tmp_path: Path) -> Iterator[Path]:
    """An instance directory started on ports 27687/27474, its "server" a live process whose
    command line is the one ``neo4j start`` runs (no Java needed)."""
    from graphmem.launcher.server import ENTRY_POINT, PID_FILE

    data_dir = tmp_path / "inst"
    (data_dir / "conf").mkdir(parents=True)
    (data_dir / "conf" / "neo4j.conf").write_text(
        "server.default_listen_address=127.0.0.1\n"
        "server.bolt.listen_address=:27687\n"
        "server.http.listen_address=:27474\n",
        encoding="utf-8",
    )
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", ENTRY_POINT, f"--home-dir={data_dir}"]
    )
    try:
        pid_file = data_dir / PID_FILE
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{sleeper.pid}\n", encoding="utf-8")
        yield data_dir
    finally:
        sleeper.kill()
        sleeper.wait()


def test_neo4j_status_reports_the_instances_own_ports(tmp_path: Path, fake_instance: Path) -> None:
    result = run(tmp_path, "neo4j", "status", "--data-dir", str(fake_instance))
    assert result.returncode == 0, result.stderr
    assert "bolt://127.0.0.1:27687" in result.stdout
    assert "http://127.0.0.1:27474/browser/" in result.stdout
    assert "7687," not in result.stdout.replace("27687", "")
    # Ports given on the command line still win.
    pinned = run(
        tmp_path, "neo4j", "status", "--data-dir", str(fake_instance), "--bolt-port", "1234"
    )
    assert "bolt://127.0.0.1:1234" in pinned.stdout


# ---- help texts ----


def test_help_shows_defaults_and_whole_sentences(tmp_path: Path) -> None:
    from showcase.demo import GAME_BUDGETS
    from showcase.textworld_agent import DEFAULT_BUDGET

    assert {g: DEFAULT_BUDGET[g] for g in GAME_BUDGETS} == GAME_BUDGETS
    demo = " ".join(run(tmp_path, "--help", module="showcase.demo").stdout.split())
    assert "games in the stream, at least 5 (default 50)" in demo
    assert "steps per game (default: the game's own, twc 45, cookingworld 40, coin 40)" in demo
    assert "(default demo-out/)" in demo and "(default demo)" in demo
    viz = " ".join(run(tmp_path, "viz", "memory", "--help").stdout.split())
    assert "hops from the memory, 0-5 (default 1)" in viz
    speed = run(tmp_path, "--help", module="bench.speed")
    assert speed.returncode == 0, speed.stderr
    text = " ".join(speed.stdout.split())
    whole = "two stores, side by side with baselines in the same process, on the same data and "
    assert whole + "the same vectors." in text
    assert "(default: [1000, 10000, 100000])" in text and "λ of the two-phase score" in text
    for option in ("--sizes", "--warmup", "--k1", "--k2", "--no-langgraph", "--seed", "--out"):
        line = next(x for x in speed.stdout.splitlines() if x.strip().startswith(option + " "))
        assert len(line.split()) > 2, f"{option} has no help: {line!r}"
    agent = run(tmp_path, "--help", module="showcase.textworld_agent")
    assert agent.returncode == 0, agent.stderr
    # The docstring keeps its layout: each example command on its own line.
    assert (
        "\n    python -m showcase.textworld_agent --game cookingworld --seeds 0-29\n"
        in agent.stdout
    )
    assert "--in-memory" in agent.stdout and "(default cookingworld)" in agent.stdout


# ---- budgets ----


def test_a_zero_budget_is_an_error_everywhere(tmp_path: Path) -> None:
    assert "--budget" in one_error_line(run(tmp_path, "--budget", "0", module="showcase.demo"))
    agent_module = "showcase.textworld_agent"
    line = one_error_line(run(tmp_path, "--budget", "0", module=agent_module))
    assert "must be at least 1" in line
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from showcase.envs.textworld import InvalidEnvInput
    from showcase.textworld_agent import run_stream

    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
    with pytest.raises(InvalidEnvInput, match="at least 1"):
        run_stream(mem, "tw", game="twc", seeds=[0], step_budget=0)


# ---- viz ----


@pytest.mark.slow
def test_viz_refuses_a_file_name_of_another_format(tmp_path: Path) -> None:
    from graphmem.models import Note

    store = EmbeddedStore.open(tmp_path / "store")
    try:
        store.upsert([Note(id="n1", namespace="ns", content="a note", embedding=[1.0, 0.0])])
    finally:
        store.close()
    line = one_error_line(run(tmp_path, "viz", "memory", "n1", "--out", str(tmp_path / "x.svg")))
    assert "cannot write .svg files" in line and "--format" in line
    assert not (tmp_path / "x.svg").exists()
    clash = run(tmp_path, "viz", "memory", "n1", "--out", str(tmp_path / "x.png"), "-f", "html")
    assert "is a png file name but --format is html" in one_error_line(clash)
    ok = run(tmp_path, "viz", "memory", "n1", "--out", str(tmp_path / "x.mmd"))
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "x.mmd").read_text(encoding="utf-8").startswith("flowchart")
    forced = run(tmp_path, "viz", "memory", "n1", "--out", str(tmp_path / "x.txt"), "-f", "dot")
    assert forced.returncode == 0 and "digraph" in (tmp_path / "x.txt").read_text(encoding="utf-8")


# ---- the demo and the agent, with Java ----


@pytest.mark.slow
@pytest.mark.java
@needs_java
def test_demo_closing_hint_follows_out(tmp_path: Path) -> None:
    pics = tmp_path / "pictures"
    result = run(
        tmp_path, "--episodes", "5", "--out", str(pics), module="showcase.demo", timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (pics / "chain.html").is_file()
    assert f"open {pics / 'chain.html'} in a browser" in result.stdout
    assert "demo-out" not in result.stdout


@pytest.mark.slow
@pytest.mark.java
@needs_java
def test_textworld_agent_uses_the_configured_store_unless_in_memory(tmp_path: Path) -> None:
    kept = run(
        tmp_path, "--game", "twc", "--seeds", "0-1", "--budget", "8",
        module="showcase.textworld_agent", timeout=300,
    )  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert "twc: solved" in kept.stdout
    assert "2/2" in kept.stderr  # the progress bar
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        held = sum(1 for _ in store.iter_nodes("textworld-agent"))
    finally:
        store.close()
    assert held > 0
    ram = tmp_path / "ram"
    ram.mkdir()
    quiet = run(
        ram, "--game", "twc", "--seeds", "0", "--budget", "5", "--in-memory", "--no-progress",
        module="showcase.textworld_agent", timeout=300,
    )  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    assert not (ram / "store").exists() and "1/1" not in quiet.stderr


@pytest.mark.java
@needs_java
def test_run_stream_reports_progress_after_each_game() -> None:
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from showcase.textworld_agent import StreamResult, run_stream

    seen: list[tuple[int, int | None, int]] = []

    def progress(done: int, total: int | None, result: StreamResult) -> None:
        seen.append((done, total, len(result.successes)))

    mem = GraphMemory(EmbeddedStore.in_memory(), embedder=HashingEmbedder())
    started = time.monotonic()
    run_stream(mem, "tw", game="twc", seeds=range(2), step_budget=4, progress=progress)
    assert seen == [(1, 2, 1), (2, 2, 2)], seen
    seen.clear()
    run_stream(mem, "tw", game="twc", seeds=iter([0]), step_budget=4, progress=progress)
    assert seen == [(1, None, 1)]
    assert time.monotonic() - started < 120


# ---- the Neo4j demo's Browser URL ----


@pytest.mark.neo4j
@pytest.mark.skipif(not os.environ.get("GRAPHMEM_NEO4J_URI"), reason="needs GRAPHMEM_NEO4J_URI")
def test_browser_url_is_the_servers_real_http_port() -> None:
    from graphmem.embedding import HashingEmbedder
    from graphmem.memory import GraphMemory
    from graphmem.settings import Settings
    from showcase.demo import browser_url

    settings = Settings.from_env()
    assert settings.neo4j_uri
    with GraphMemory(settings.open_store(), embedder=HashingEmbedder()) as mem:
        url = browser_url(mem, settings.neo4j_uri)
    assert url is not None and url.endswith("/browser/")
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
