"""The demo runs end to end: both runs play, memory is written, the pictures appear."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphmem.models import Note, Procedure
from graphmem.settings import Settings
from graphmem.stores.embedded import EmbeddedStore
from showcase.envs.jvm import has_java17

pytestmark = [
    pytest.mark.java,
    pytest.mark.skipif(not has_java17(), reason="the demo plays text games: needs Java 17"),
]


def test_demo_learns_and_writes_its_pictures(tmp_path: Path) -> None:
    from showcase.demo import run_demo

    settings = Settings(store_path=tmp_path / "store", embedder="hashing")
    base, learned = run_demo(settings, episodes=8, out=tmp_path / "out", namespace="demo-test")
    assert base.episodes == learned.episodes == 8
    assert (tmp_path / "out" / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (tmp_path / "out" / "chain.html").read_text(encoding="utf-8")
    assert "FIRST_STEP" in html or "NEXT" in html
    assert (tmp_path / "out" / "chain.mmd").read_text(encoding="utf-8").startswith("flowchart")
    store = EmbeddedStore.open(tmp_path / "store")
    try:
        kinds = {type(m) for m in store.iter_nodes("demo-test")}
    finally:
        store.close()
    assert Note in kinds and Procedure in kinds


def test_demo_clears_its_namespace_unless_kept(tmp_path: Path) -> None:
    from showcase.demo import run_demo

    settings = Settings(store_path=tmp_path / "store", embedder="hashing")
    run_demo(settings, episodes=5, out=tmp_path / "out", namespace="demo-test")
    store = EmbeddedStore.open(tmp_path / "store")
    first = sum(1 for _ in store.iter_nodes("demo-test"))
    store.close()
    run_demo(settings, episodes=5, out=tmp_path / "out", namespace="demo-test", keep=True)
    store = EmbeddedStore.open(tmp_path / "store")
    kept = sum(1 for _ in store.iter_nodes("demo-test"))
    store.close()
    run_demo(settings, episodes=5, out=tmp_path / "out", namespace="demo-test")
    store = EmbeddedStore.open(tmp_path / "store")
    fresh = sum(1 for _ in store.iter_nodes("demo-test"))
    store.close()
    assert kept > first
    assert fresh < kept


def test_an_out_path_that_cannot_be_a_folder_is_a_one_line_error(tmp_path: Path) -> None:
    """``demo --out`` naming a file (``/etc/passwd``) or an impossible folder: a clear
    InvalidInput before anything is played or cleared, never a traceback."""
    from graphmem.errors import InvalidInput
    from showcase.demo import run_demo

    a_file = tmp_path / "taken"
    a_file.write_text("not a folder")
    settings = Settings(store_path=tmp_path / "store")
    with pytest.raises(InvalidInput, match="is a file"):
        run_demo(settings, out=a_file, episodes=5)
    with pytest.raises(InvalidInput, match="cannot create"):
        run_demo(settings, out=a_file / "sub", episodes=5)
    assert a_file.read_text() == "not a folder" and not (tmp_path / "store").exists()


def test_demo_out_etc_passwd_from_the_command_line_is_one_line(tmp_path: Path) -> None:
    """Issue 30: ``demo --out /etc/passwd`` printed a traceback. Now one line on
    stderr, exit 2, and no store is made."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
    env["GRAPHMEM_STORE"] = str(tmp_path / "store")
    result = subprocess.run(
        [sys.executable, "-m", "showcase.demo", "--out", "/etc/passwd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert (
        result.stderr
        == "demo: error: --out /etc/passwd is a file; give a folder for the pictures\n"
    )
    assert "Traceback" not in result.stdout and not (tmp_path / "store").exists()
