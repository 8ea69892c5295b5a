"""The registry import of ``image add docker://...``: the strict reference grammar and the job's batch script.

A reference is ``docker://[USER@][REGISTRY#]IMAGE[:TAG]`` or ``docker://[USER@][REGISTRY#]IMAGE@sha256:HEX``, as
``enroot import`` reads it. :func:`parse_registry_reference` accepts only those characters each part may hold
(no shell metacharacter, space, quote or control character can pass), and the script quotes every word anyway.

:func:`render_import_script` is pure: the one-task CPU job (``runtime.jobs.CpuJob``; the partition, account and
time limit travel as sbatch arguments) removes a stale partial file, runs ``enroot import -o TARGET.partial REF``
and, only when that succeeded, execs the compute Python's ``python -m data_designer.slurm.runtime.images.finish``,
which renames the partial file into place, hashes and inspects it and writes the completion as the name's next
registry generation. A missing ``enroot`` on the node ends the job with exit 127 and a line naming the node.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from data_designer.slurm.contracts import InvalidInputError

IMPORT_FINISH_MODULE = "data_designer.slurm.runtime.images.finish"
REGISTRY_SCHEME = "docker://"
PARTIAL_SUFFIX = ".partial"
ENROOT_MISSING_EXIT_CODE = 127
MAX_REFERENCE_LENGTH = 512

_USER = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
_REGISTRY = rf"{_HOST}(?::[0-9]{{1,5}})?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = rf"{_COMPONENT}(?:/{_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[0-9a-f]{64}"
_REFERENCE = re.compile(
    rf"(?:(?P<user>{_USER})@(?!sha256:))?(?:(?P<registry>{_REGISTRY})#)?(?P<image>{_IMAGE})"
    rf"(?::(?P<tag>{_TAG})|@(?P<digest>{_DIGEST}))?"
)
"""``x@sha256:...`` is always a digest (never the user x and an image named sha256)."""
_OPERATION = "image.add"


@dataclass(frozen=True)
class RegistryReference:
    """A validated ``docker://`` reference, part by part."""

    image: str
    user: str | None = None
    registry: str | None = None
    tag: str | None = None
    digest: str | None = None

    @property
    def text(self) -> str:
        """The reference as ``enroot import`` takes it."""
        user = f"{self.user}@" if self.user else ""
        registry = f"{self.registry}#" if self.registry else ""
        suffix = f":{self.tag}" if self.tag else f"@{self.digest}" if self.digest else ""
        return f"{REGISTRY_SCHEME}{user}{registry}{self.image}{suffix}"


def is_registry_reference(source: str) -> bool:
    """Whether ``source`` names a registry (starts with ``docker://``), valid or not."""
    return source.startswith(REGISTRY_SCHEME)


def parse_registry_reference(source: str) -> RegistryReference:
    """The parts of ``source``; InvalidInputError ``invalid_image_reference`` (exit 2) unless it is exactly
    ``docker://[USER@][REGISTRY#]IMAGE[:TAG]`` or ``docker://[USER@][REGISTRY#]IMAGE@sha256:HEX``."""
    body = source[len(REGISTRY_SCHEME) :] if is_registry_reference(source) else None
    match = _REFERENCE.fullmatch(body) if body is not None and len(source) <= MAX_REFERENCE_LENGTH else None
    if match is None:
        raise InvalidInputError(
            f"image source {source!r} is not a registry reference of the form "
            "docker://[USER@][REGISTRY#]IMAGE[:TAG] or docker://[USER@][REGISTRY#]IMAGE@sha256:DIGEST",
            code="invalid_image_reference",
            operation=_OPERATION,
            key_path=("SOURCE",),
            hint="e.g. docker://nvcr.io#nvidia/pytorch:24.05-py3 (lower-case image path; no spaces, quotes or "
            f"shell characters; at most {MAX_REFERENCE_LENGTH} characters)",
        )
    return RegistryReference(
        image=match.group("image"),
        user=match.group("user"),
        registry=match.group("registry"),
        tag=match.group("tag"),
        digest=match.group("digest"),
    )


@dataclass(frozen=True)
class ImportScriptRequest:
    """What the import job needs: the reference, where the SquashFS goes, and how the completion is recorded."""

    reference: RegistryReference
    name: str
    generation: int
    """The generation of the registry entry that records the import (the completion is the next one)."""
    target: str
    """The SquashFS file's final absolute path; enroot writes ``<target>.partial`` first."""
    workspace_root: str
    launcher: tuple[str, ...]
    """The words that start the compute Python."""


def finish_argv(launcher: Sequence[str], workspace_root: str, name: str, generation: int) -> tuple[str, ...]:
    """The argv of the job's last step, which records the imported image."""
    return (
        *launcher,
        "-m",
        IMPORT_FINISH_MODULE,
        "--workspace-root",
        workspace_root,
        "--name",
        name,
        "--generation",
        str(generation),
    )


def render_import_script(request: ImportScriptRequest) -> str:
    """The import job's batch script (every variable word shell-quoted)."""
    q = shlex.quote
    partial = request.target + PARTIAL_SUFFIX
    finish = " ".join(
        q(word) for word in finish_argv(request.launcher, request.workspace_root, request.name, request.generation)
    )
    lines = [
        "#!/bin/bash",
        f"# Generated by data-designer-slurm: import {request.reference.text} as image {request.name!r}",
        f"# (generation {request.generation}); the completion is recorded as generation {request.generation + 1}.",
        "set -u",
        f"reference={q(request.reference.text)}",
        f"partial={q(partial)}",
        "if ! command -v enroot >/dev/null 2>&1; then",
        '    echo "enroot is not installed on node $(uname -n) (not on PATH): cannot import $reference" >&2',
        f"    exit {ENROOT_MISSING_EXIT_CODE}",
        "fi",
        'rm -f -- "$partial"',
        'enroot import -o "$partial" -- "$reference"',
        "status=$?",
        'if [ "$status" -ne 0 ]; then',
        '    echo "enroot import of $reference failed with exit $status" >&2',
        '    rm -f -- "$partial"',
        '    exit "$status"',
        "fi",
        f"exec {finish}",
    ]
    return "\n".join(lines) + "\n"
