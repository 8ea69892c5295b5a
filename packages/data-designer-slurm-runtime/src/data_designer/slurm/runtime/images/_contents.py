"""What an image's file listing says, in pure functions: its Python, its server executable, its METADATA files.

The Python is the one ``python3`` resolves to on the image's PATH (``/usr/local/bin``, ``/usr/bin``, ``/bin``),
following symlinks inside the image to a ``python3.X``; without a ``python3``, a single ``python3.X`` executable or
a single ``lib/python3.X`` directory decides; several candidates and nothing to choose between them is
undetermined. The server executable is ``vllm`` in ``/usr/local/bin``, ``/usr/bin``, ``/bin`` or ``/opt/*/bin``.

Distributions are found by their ``<name>-<version>.dist-info/METADATA`` in any ``site-packages`` or
``dist-packages`` directory (Debian's pip installs into ``dist-packages``); names compare after PEP 503
normalisation. When the Python is known only its own site directories (``.../python3.X/...``, plus
version-less ones such as ``/usr/lib/python3/dist-packages``) count. The version recorded is the METADATA's
``Version`` header, never the directory name's.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import find_control_character
from data_designer.slurm.runtime.images._squashfs import SquashfsEntry

INSPECTED_DISTRIBUTIONS: tuple[str, ...] = (
    "vllm",
    "data-designer",
    "data-designer-slurm",
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
)
"""The distributions every inspection reports, found or undetermined."""
SERVER_EXECUTABLE = "vllm"
PATH_DIRS: tuple[str, ...] = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

_PYTHON_EXE = re.compile(r"^python(3\.\d+)$")
_PYTHON_LIB = re.compile(r"^/(?:usr|usr/local|opt/[^/]+)/lib/python(3\.\d+)$")
_METADATA = re.compile(r"^(?P<site>/.+/(?:site|dist)-packages)/(?P<stem>[^/]+)\.dist-info/METADATA$")
_SITE_PYTHON = re.compile(r"/python(3\.\d+)/")
_GLOB = re.compile(r"[*?\[\]\\]")
_MAX_LINKS = 16


def normalise_name(name: str) -> str:
    """A distribution name per PEP 503: lower case, runs of ``-``, ``_`` and ``.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class PythonFound:
    """The image's Python: its version (``3.11``) and executable, or why they are undetermined."""

    version: str | None
    executable: str | None
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class MetadataCandidate:
    """A ``METADATA`` file that may belong to ``distribution`` (its dist-info directory's name says so)."""

    distribution: str
    path: str


def shown(text: str) -> str:
    """``text`` as a record may hold it: as is, or ``ascii()``-escaped when it has a control character."""
    return text if find_control_character(text) is None else ascii(text)


def _resolve(path: str, by_path: Mapping[str, SquashfsEntry]) -> SquashfsEntry | None:
    """The entry ``path`` ends at after following symlinks inside the image (None: dangling or a loop)."""
    entry = by_path.get(path)
    for _ in range(_MAX_LINKS):
        if entry is None or entry.kind != "symlink" or entry.target is None:
            return entry
        target = entry.target
        path = posixpath.normpath(target if target.startswith("/") else posixpath.join(posixpath.dirname(path), target))
        entry = by_path.get(path)
    return None


def find_python(entries: Sequence[SquashfsEntry]) -> PythonFound:
    """The image's Python (see the module docstring for how it is chosen)."""
    by_path = {entry.path: entry for entry in entries}
    for directory in PATH_DIRS:
        resolved = _resolve(f"{directory}/python3", by_path)
        if resolved is not None and resolved.kind == "file":
            match = _PYTHON_EXE.match(posixpath.basename(resolved.path))
            if match is not None and find_control_character(resolved.path) is None:
                return PythonFound(version=match[1], executable=resolved.path)
            return PythonFound(
                version=None,
                executable=None,
                problem=f"python: {directory}/python3 resolves to {shown(resolved.path)}, not a python3.X",
            )
    executables = {
        entry.path: match[1]
        for entry in entries
        if posixpath.dirname(entry.path) in PATH_DIRS
        and (match := _PYTHON_EXE.match(posixpath.basename(entry.path))) is not None
        and (resolved := _resolve(entry.path, by_path)) is not None
        and resolved.kind == "file"
    }
    versions = sorted(set(executables.values()))
    if len(versions) == 1:
        return PythonFound(version=versions[0], executable=min(executables, key=_path_order))
    if versions:
        return PythonFound(None, None, f"python: several versions ({', '.join(versions)}) and no python3 on PATH")
    libs = sorted(
        {match[1] for e in entries if e.kind == "directory" and (match := _PYTHON_LIB.match(e.path)) is not None}
    )
    if len(libs) == 1:
        return PythonFound(libs[0], None, f"python executable: none on PATH (only lib/python{libs[0]} is present)")
    if libs:
        return PythonFound(None, None, f"python: several lib/python3.X directories ({', '.join(libs)}), no python3")
    return PythonFound(None, None, "python: no python3 on PATH and no lib/python3.X directory in the image")


def _path_order(path: str) -> int:
    directory = posixpath.dirname(path)
    return PATH_DIRS.index(directory) if directory in PATH_DIRS else len(PATH_DIRS)


def find_server(entries: Sequence[SquashfsEntry]) -> str | None:
    """The first ``vllm`` in ``/usr/local/bin``, ``/usr/bin``, ``/bin``, then ``/opt/*/bin`` (sorted)."""
    candidates = {e.path for e in entries if e.kind in ("file", "symlink") and posixpath.basename(e.path) == "vllm"}
    for directory in ("/usr/local/bin", "/usr/bin", "/bin"):
        if f"{directory}/{SERVER_EXECUTABLE}" in candidates:
            return f"{directory}/{SERVER_EXECUTABLE}"
    opt = sorted(p for p in candidates if re.fullmatch(r"/opt/[^/]+/bin/vllm", p))
    return opt[0] if opt else None


def _stem_names(stem: str) -> set[str]:
    """The names a dist-info stem may carry: before the first or the last ``-`` (``name-version``)."""
    return {normalise_name(stem.partition("-")[0]), normalise_name(stem.rpartition("-")[0])}


def metadata_candidates(
    entries: Iterable[SquashfsEntry], python: str | None, wanted: Sequence[str] = INSPECTED_DISTRIBUTIONS
) -> tuple[MetadataCandidate, ...]:
    """The METADATA files of the ``wanted`` distributions in the image's site directories (sorted by path)."""
    names = {normalise_name(name): name for name in wanted}
    found: list[MetadataCandidate] = []
    for entry in entries:
        match = _METADATA.match(entry.path)
        if match is None or entry.kind != "file" or _GLOB.search(entry.path) or find_control_character(entry.path):
            continue
        site_python = _SITE_PYTHON.search(match["site"] + "/")
        if python is not None and site_python is not None and site_python[1] != python:
            continue
        for name in _stem_names(match["stem"]) & names.keys():
            found.append(MetadataCandidate(distribution=names[name], path=entry.path))
    return tuple(sorted(found, key=lambda c: (c.distribution, c.path)))


def metadata_fields(text: str) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Version`` headers of a METADATA text (the header block ends at the first blank line)."""
    name: str | None = None
    version: str | None = None
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if not sep:
            continue
        if key.strip().lower() == "name" and name is None:
            name = value.strip() or None
        elif key.strip().lower() == "version" and version is None:
            version = value.strip() or None
    return name, version
