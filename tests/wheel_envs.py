"""Fresh virtual environments holding the built wheel and one extra's dependencies only.

``pip install 'graphmem[X]'`` from the index downloads hundreds of megabytes per extra (torch
alone is gigabytes for ``[minilm]``), so the wheel tests install differently and offline: the
wheel itself goes in with pip (``--no-deps --no-index``), and its dependencies are resolved
from the wheel's own metadata (``Requires-Dist`` with the extra's markers) against the
distributions installed in the running interpreter, then exposed to the new venv as symlinks
into its ``site-packages``. The venv therefore sees exactly the requirement closure of the
wheel and that extra: a module an extra forgets to declare is missing there, as it would be
after a real install. What this does not check is the index itself (names and versions
resolving there); the core install is also tested from the index in ``test_wheel.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

_NORMALISE = re.compile(r"[-_.]+")


def canonical(name: str) -> str:
    return _NORMALISE.sub("-", name).lower()


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The ``Requires-Dist`` lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta).decode("utf-8")
    return [
        Requirement(line.split(":", 1)[1].strip())
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def _installed() -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist)
    return found


def closure(requirements: Iterable[Requirement], extras: set[str]) -> set[str]:
    """The installed distributions (canonical names) that ``requirements`` with ``extras``
    pull in, transitively; graphmem's self-references (``graphmem[langchain]``) expand to
    that extra's requirements of the same list."""
    requirements = list(requirements)
    installed = _installed()
    env = dict(default_environment())
    wanted: set[str] = set()
    own_extras: set[str] = set()

    def active(req: Requirement, extra: str) -> bool:
        return req.marker is None or req.marker.evaluate({**env, "extra": extra})

    pending_extras = set(extras) | {""}
    while pending_extras:
        extra = pending_extras.pop()
        own_extras.add(extra)
        for req in requirements:
            if not active(req, extra):
                continue
            if canonical(req.name) == "graphmem":
                pending_extras |= set(req.extras) - own_extras
                continue
            _add(req, installed, env, wanted)
    return wanted


def _add(
    req: Requirement,
    installed: dict[str, metadata.Distribution],
    env: dict[str, str],
    wanted: set[str],
) -> None:
    name = canonical(req.name)
    dist = installed.get(name)
    if dist is None:
        raise LookupError(f"{req} is not installed in {sys.prefix}: run ./run setup")
    if name in wanted:
        return
    wanted.add(name)
    for line in dist.requires or []:
        sub = Requirement(line)
        for extra in {"", *req.extras}:
            if sub.marker is None or sub.marker.evaluate({**env, "extra": extra}):
                _add(sub, installed, env, wanted)
                break


def _top_levels(dist: metadata.Distribution) -> set[str]:
    return {
        Path(str(f)).parts[0]
        for f in dist.files or []
        if not str(f).startswith("..") and Path(str(f)).parts
    }


def link_distributions(names: set[str], site: Path) -> None:
    """Expose the installed distributions ``names`` in ``site`` through symlinks: a top-level
    entry owned by one distribution is linked whole, one shared with others (a namespace
    package such as ``langgraph/``) file by file, so nothing of an unwanted distribution
    shows through."""
    installed = _installed()
    owners: dict[str, set[str]] = {}
    for dist_name, dist in installed.items():
        for top in _top_levels(dist):
            owners.setdefault(top, set()).add(dist_name)
    for name in sorted(names):
        dist = installed[name]
        root = Path(str(dist.locate_file("")))
        for top in sorted(_top_levels(dist)):
            if top == "__pycache__" or (top.endswith(".pth") and "distutils" in top):
                continue
            if owners[top] == {name}:
                target = site / top
                if not target.exists() and (root / top).exists():
                    target.symlink_to(root / top)
                continue
            for f in dist.files or []:
                parts = Path(str(f)).parts
                if not parts or parts[0] != top or "__pycache__" in parts:
                    continue
                target = site.joinpath(*parts)
                if target.exists() or not (root / str(f)).exists():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(root / str(f))


def make_env(wheel: Path, extra: str | None, where: Path) -> Path:
    """A fresh venv at ``where`` with ``wheel`` installed and the dependencies of ``extra``
    (``None``: the core) linked in; returns its ``bin`` directory."""
    venv.EnvBuilder(with_pip=False).create(where)
    bin_dir = where / "bin"
    (site,) = (where / "lib").glob("python3*/site-packages")
    names = closure(wheel_requirements(wheel), {extra} if extra else set())
    link_distributions(names, site)
    # pip itself, to install the wheel (linked into the venv, removed afterwards).
    pip = Path(str(metadata.distribution("pip").locate_file("pip")))
    (site / "pip").symlink_to(pip)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--no-compile", str(wheel)],
        check=True, timeout=300, env=env,
    )  # fmt: skip
    (site / "pip").unlink()
    return bin_dir
