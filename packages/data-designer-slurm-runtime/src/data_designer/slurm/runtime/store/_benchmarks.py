"""Benchmark directories: ``<workspace>/benchmarks/<benchmark id>/`` and what reads them back.

A benchmark id is ``<name>-<first 12 hex of the benchmark digest>``; under its directory ``benchmark.json``
(``BenchmarkRecord``, write-once), ``inputs/`` (the benchmark file, its base run and config, copied once) and
``children/`` (``<child id>.json``: the binding of a child to its run id, write-once; ``<child id>.resume-<k>``:
takeovers of a binding whose run was never submitted), ``analyses/<evidence digest>.json`` (written once). Path
arithmetic, reading (:func:`read_benchmark`) and the verbs that write them, each write-once (False: already there);
the services decide what a binding means with the run reader (``read_run``) of the child run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from data_designer.slurm.contracts import NotFoundError, UnavailableError
from data_designer.slurm.contracts.records import (
    BENCHMARK_ID_DIGEST_HEX,
    BENCHMARK_SCHEMA,
    CHILD_BINDING_SCHEMA,
    CHILD_RESUME_SCHEMA,
    BenchmarkRecord,
    ChildBinding,
    ChildResumeClaim,
)
from data_designer.slurm.planner import FileModes, make_directories, modes_of_directory
from data_designer.slurm.runtime.store._layout import BENCHMARK_RECORD, INPUTS_DIR, check_component
from data_designer.slurm.runtime.store._record_io import Clock, RecordOk, publish_bytes_once, read_record
from data_designer.slurm.runtime.store._run_records import write_once

BENCHMARKS_DIR = "benchmarks"
CHILDREN_DIR = "children"
ANALYSES_DIR = "analyses"
_BENCHMARK_ID = re.compile(rf"^[a-z0-9](?:[a-z0-9._-]{{0,62}}[a-z0-9])?-[0-9a-f]{{{BENCHMARK_ID_DIGEST_HEX}}}$")
_RESUME = re.compile(r"^(?P<child>[0-9a-f]{12})\.resume-(?P<k>[1-9][0-9]*)$")
_OPERATION = "store.benchmarks"


def benchmark_id(name: str, digest: str) -> str:
    """The id of the benchmark named ``name`` whose plan digest is ``digest``."""
    return f"{name}-{digest[:BENCHMARK_ID_DIGEST_HEX]}"


def is_benchmark_id(text: str) -> bool:
    return _BENCHMARK_ID.fullmatch(text) is not None


@dataclass(frozen=True)
class BenchmarkLayout:
    """Where the files of one benchmark live under ``<root>/benchmarks/<benchmark id>/`` (pure path arithmetic)."""

    root: Path
    benchmark_id: str

    def __post_init__(self) -> None:
        check_component(self.benchmark_id, "benchmark id")

    @cached_property
    def directory(self) -> Path:
        return self.root / BENCHMARKS_DIR / self.benchmark_id

    @property
    def record(self) -> Path:
        return self.directory / BENCHMARK_RECORD

    @property
    def inputs_dir(self) -> Path:
        return self.directory / INPUTS_DIR

    def input_file(self, role: str, name: str) -> Path:
        return self.inputs_dir / check_component(role, "input role") / check_component(name, "input")

    @property
    def children_dir(self) -> Path:
        return self.directory / CHILDREN_DIR

    def binding(self, child_id: str) -> Path:
        return self.children_dir / f"{check_component(child_id, 'child id')}.json"

    def resume_claim(self, child_id: str, resume: int) -> Path:
        return self.children_dir / f"{check_component(child_id, 'child id')}.resume-{resume}"


@dataclass(frozen=True)
class ChildBindings:
    """What ``children/`` holds for one child: its binding (None: not bound yet) and the takeovers, in order."""

    binding: ChildBinding | None
    resumes: tuple[ChildResumeClaim, ...] = ()
    unreadable: tuple[str, ...] = ()
    highest_resume: int = 0


@dataclass(frozen=True)
class BenchmarkSnapshot:
    """A benchmark's record and every child's bindings, read once."""

    layout: BenchmarkLayout
    record: BenchmarkRecord
    children: dict[str, ChildBindings] = field(default_factory=dict)


def read_benchmark(layout: BenchmarkLayout) -> BenchmarkSnapshot:
    """The record and bindings of one benchmark. NotFoundError (exit 3) without a readable record; UnavailableError
    (exit 5) when ``children/`` cannot be listed. An unreadable binding is kept by name (its child is never bound
    again: the binding's writer may have created the run)."""
    found = read_record(layout.record, BENCHMARK_SCHEMA)
    if not isinstance(found, RecordOk):
        raise NotFoundError(
            f"benchmark {layout.benchmark_id!r} has no readable record at {str(layout.record)!r} ({found.status})",
            code="benchmark_not_found",
            operation=_OPERATION,
            file=str(layout.record),
            hint="'data-designer slurm benchmark ls' lists the benchmarks of the workspace",
        )
    record = found.payload
    names = _list(layout.children_dir)
    children: dict[str, ChildBindings] = {}
    known = {child.child_id for child in record.children}
    for child in record.children:
        path = layout.binding(child.child_id)
        binding: ChildBinding | None = None
        unreadable: list[str] = []
        if path.name in names:
            read = read_record(path, CHILD_BINDING_SCHEMA)
            if isinstance(read, RecordOk):
                binding = read.payload
            else:
                unreadable.append(f"{path.name}: {read.status}")
        children[child.child_id] = ChildBindings(binding, unreadable=tuple(unreadable))
    resumes: dict[str, list[tuple[int, ChildResumeClaim | None]]] = {}
    for name in names:
        match = _RESUME.fullmatch(name)
        if match is None or match.group("child") not in known:
            continue
        read_claim = read_record(layout.children_dir / name, CHILD_RESUME_SCHEMA)
        claim = read_claim.payload if isinstance(read_claim, RecordOk) else None
        resumes.setdefault(match.group("child"), []).append((int(match.group("k")), claim))
    for child_id, claims in resumes.items():
        claims.sort(key=lambda item: item[0])
        base = children[child_id]
        children[child_id] = ChildBindings(
            base.binding,
            tuple(claim for _, claim in claims if claim is not None),
            base.unreadable + tuple(f"{child_id}.resume-{k}" for k, claim in claims if claim is None),
            highest_resume=claims[-1][0],
        )
    return BenchmarkSnapshot(layout, record, children)


def write_benchmark_input(
    layout: BenchmarkLayout, role: str, name: str, data: bytes, *, mode: int, modes: FileModes, operation: str
) -> str:
    """Copy one input to ``inputs/<role>/<name>`` once (an equal benchmark's copy is kept); its path relative to the
    benchmark directory. Missing directories get ``modes``."""
    target = layout.input_file(role, name)
    make_directories(target.parent, modes)
    publish_bytes_once(target, data, operation=operation, mode=mode)
    return str(target.relative_to(layout.directory))


def write_benchmark(layout: BenchmarkLayout, record: BenchmarkRecord, *, clock: Clock, operation: str) -> bool:
    return write_once(layout.record, BENCHMARK_SCHEMA, record, clock, operation)


def bind_child(
    layout: BenchmarkLayout, binding: ChildBinding, *, modes: FileModes, clock: Clock, operation: str
) -> bool:
    """Take ``children/<child id>.json`` once, before the child's run directory exists; False: another process
    bound the child first."""
    make_directories(layout.children_dir, modes)
    return write_once(layout.binding(binding.child_id), CHILD_BINDING_SCHEMA, binding, clock, operation)


def claim_child_resume(layout: BenchmarkLayout, claim: ChildResumeClaim, *, clock: Clock, operation: str) -> bool:
    """Take ``children/<child id>.resume-<k>`` once; False: another process is resuming the child."""
    return write_once(layout.resume_claim(claim.child_id, claim.resume), CHILD_RESUME_SCHEMA, claim, clock, operation)


def write_analysis(layout: BenchmarkLayout, evidence_digest: str, data: bytes, *, operation: str) -> Path:
    """``analyses/<evidence digest (16 hex)>.json`` holding ``data``, written once: the same evidence finds its file."""
    directory = layout.directory / ANALYSES_DIR
    make_directories(directory, modes_of_directory(layout.directory))
    path = directory / f"{evidence_digest[:16]}.json"
    publish_bytes_once(path, data, operation=operation)
    return path


def list_benchmark_dirs(root: Path | str) -> tuple[BenchmarkLayout, ...]:
    """Every benchmark directory of the workspace whose name is a benchmark id, sorted by name."""
    names = _list(Path(root) / BENCHMARKS_DIR)
    return tuple(BenchmarkLayout(Path(root), name) for name in sorted(names) if is_benchmark_id(name))


def _list(directory: Path) -> set[str]:
    try:
        return {name for name in os.listdir(directory) if not name.startswith(".")}
    except (FileNotFoundError, NotADirectoryError):
        return set()
    except OSError as exc:
        raise UnavailableError(
            f"cannot list {str(directory)!r}: {exc.strerror}",
            code="filesystem_unavailable",
            operation=_OPERATION,
            file=str(directory),
        ) from exc
