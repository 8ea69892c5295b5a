"""A cached virtual environment holding only the host ``data-designer`` package (no extension).

Built once with ``uv`` under the runner's cache directory (outside the repository) and reused;
a ``.ready`` stamp written last marks a complete build, so an interrupted one is rebuilt.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks._harness import uv_executable

_READY = ".ready"


def _run(command: list[str], *, cwd: Path, env: dict[str, str]) -> None:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}"
        )


def host_only_python(cache: Path, *, host_version: str) -> Path:
    """The interpreter of a venv with exactly ``data-designer==host_version`` and its dependencies."""
    series = f"{sys.version_info.major}.{sys.version_info.minor}"
    root = cache / f"host-only-data-designer-{host_version}-py{series}"
    python = root / "bin" / "python"
    stamp = root / _READY
    expected = f"data-designer=={host_version}\n"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{root.name}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runners sharing a cache build it once
        if python.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8") == expected:
            return python
        uv = uv_executable()
        if uv is None:
            raise RuntimeError("uv is needed to build the host-only virtual environment")
        print(f"\n    building the host-only venv {root} (once) ...", end="", flush=True, file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
        env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
        env["UV_PYTHON_DOWNLOADS"] = "never"
        _run([uv, "venv", "--quiet", "--python", f"python{series}", str(root)], cwd=cache, env=env)
        # Bytecode is compiled at install time so the first measured run does not pay for it.
        install = [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python), expected.strip()]
        _run(install, cwd=cache, env=env)
        check = "import importlib.util as u; raise SystemExit(u.find_spec('data_designer.slurm') is not None)"
        _run([str(python), "-I", "-c", check], cwd=cache, env=env)
        stamp.write_text(expected, encoding="utf-8")
    return python
