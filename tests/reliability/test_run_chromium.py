"""``./run test`` on a machine without Chromium says how to get it (issue 55): the browser tests
are skipped there, and the run's summary names the package and GRAPHMEM_CHROMIUM, once before
pytest and again after its summary. The two shell functions are run as ``./run`` runs them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
RUN = (ROOT / "run").read_text(encoding="utf-8")


def shell_function(name: str) -> str:
    found = re.search(rf"^{name}\(\) {{\n.*?^}}\n", RUN, flags=re.M | re.S)
    assert found, f"./run defines no {name}()"
    return found.group(0)


def hint_on(path: Path, env: dict[str, str] | None = None) -> str:
    script = shell_function("have_chromium") + shell_function("no_chromium_hint")
    script += "have_chromium && echo found || no_chromium_hint\n"
    out = subprocess.run(
        ["/bin/bash", "-c", script],
        capture_output=True,
        text=True,
        env={"PATH": str(path), **(env or {})},
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


def test_without_chromium_the_run_says_how_to_get_it(tmp_path: Path) -> None:
    said = hint_on(tmp_path)  # a PATH with no chromium on it
    assert "browser tests were skipped" in said
    assert "apt-get install chromium" in said and "GRAPHMEM_CHROMIUM" in said
    # ...after pytest's summary, where a reader looks for why tests were skipped
    after = RUN.index('"$PY" -m pytest "${select[@]}" "$@"')
    assert 'have_chromium || log "$(no_chromium_hint)"' in RUN[after:]


def test_with_chromium_on_the_path_or_named_it_says_nothing(tmp_path: Path) -> None:
    binary = tmp_path / "chromium"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert hint_on(tmp_path) == "found"
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert hint_on(other, {"GRAPHMEM_CHROMIUM": str(binary)}) == "found"
