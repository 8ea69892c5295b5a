"""Registered images at plan time: which names a run uses, and whether what an image holds fits its use (pure).

The checks apply the supervisor's environment rules (``runtime.supervisor._environment``) to what the registry's
inspection found in the image (:class:`ImageRecord` ``python`` and ``versions``), before anything is submitted:

* a **serving** image (``deployments.<alias>.image``) of a ``vllm`` deployment holds vLLM within
  :data:`SUPPORTED_VLLM`; under pyxis the launcher runs with the image's ``python3``, so its Python is at least
  :data:`LAUNCHER_PYTHON`. A ``command`` deployment runs whatever its argv names: nothing is required of its image.
* a **client** image (``client.image``, and the profile's ``compute_python.image``, where the supervisor runs)
  holds our lockstep packages at exactly this installation's version, ``data-designer`` within the top package's
  requirement, and a Python of at least :data:`CLIENT_PYTHON` where its Python was determined.

Each mismatch is a problem (exit 2) naming the image, the package and both versions. **Undetermined counts as
absent**: the inspection reads the standard ``site-packages`` of the image; a version it could not read is not
assumed to be right. An image the inspection cannot see into is still usable by its absolute path, which the
planner never checks (nor an :class:`ImageRecord` without ``versions``, one nobody inspected).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from data_designer.slurm.contracts import (
    BenchmarkSpec,
    ClusterProfile,
    ImageAxis,
    ImageRecord,
    KeyPath,
    PlanWarning,
    Problem,
    RunSpec,
    __version__,
    format_key_path,
)
from data_designer.slurm.planner._versions import same_version, satisfies
from data_designer.slurm.planner._vllm import SUPPORTED_VLLM, is_supported_vllm_version

LAUNCHER_PYTHON = (3, 8)
"""The oldest ``python3`` that runs the standalone launcher (``runtime/_launch.py``, standard library only)."""
CLIENT_PYTHON = (3, 11)
"""Our packages' ``requires-python``: the oldest Python the client worker and the supervisor run on."""
LOCKSTEP_DISTRIBUTIONS = ("data-designer-slurm-contracts", "data-designer-slurm-planner", "data-designer-slurm-runtime")
"""What the client worker imports from us; each must be this installation's version exactly."""
TOP_DISTRIBUTION = "data-designer-slurm"
"""Not needed in a client image; when it is there, it too must be this installation's version."""
HOST_DISTRIBUTION = "data-designer"


@dataclass(frozen=True)
class Installation:
    """The submitting installation a client image must match (services read it with ``importlib.metadata``)."""

    version: str = __version__
    """Our packages' lockstep version."""
    data_designer: str | None = field(default=None)
    """The top package's specifier on ``data-designer`` (``>=1.0.0rc1,<2``); None: only its presence is checked."""


def named_images(run: RunSpec, profile: ClusterProfile) -> frozenset[str]:
    """The registry names ``run`` uses on ``profile`` (its deployments', its client's and the compute image)."""
    references = [d.image for d in run.deployments.values()]
    references += [run.client.image, profile.compute_python.image]
    return frozenset(r for r in references if r is not None and not r.startswith("/"))


def benchmark_images(benchmark: BenchmarkSpec, base: RunSpec, profile: ClusterProfile) -> frozenset[str]:
    """The registry names a benchmark's children use: the base run's and every image axis value."""
    axes = (value for axis in benchmark.axes if isinstance(axis, ImageAxis) for value in axis.values)
    return named_images(base, profile) | frozenset(v for v in axes if not v.startswith("/"))


def serving_problems(record: ImageRecord, *, alias: str, vllm: bool, runtime: str, key_path: KeyPath) -> list[Problem]:
    """What ``record`` lacks as the serving image of deployment ``alias`` (``vllm``: a vllm deployment)."""
    if record.versions is None:
        return []
    problems: list[Problem] = []
    what = f"serving image {record.name!r} ({record.path})"
    if vllm:
        found = _found(record, "vllm")
        if found is None:
            problems.append(
                _problem(
                    "image_engine_missing",
                    key_path,
                    f"{what}: vllm is absent or undetermined in it, deployment {alias!r} needs vllm {SUPPORTED_VLLM}",
                    f"register an image with vllm {SUPPORTED_VLLM} in its site-packages, or name the image by its "
                    "absolute path to skip the registry's checks",
                )
            )
        elif not is_supported_vllm_version(found):
            problems.append(
                _problem(
                    "image_engine_version",
                    key_path,
                    f"{what}: holds vllm {found}, deployment {alias!r} needs vllm {SUPPORTED_VLLM}",
                    f"register an image with vllm {SUPPORTED_VLLM}",
                )
            )
    if runtime == "pyxis":
        needed_by = "the launcher (pyxis runs it with the image's python3)"
        problems.extend(_python_problem(record, what, key_path, LAUNCHER_PYTHON, needed_by))
    return problems


def client_problems(record: ImageRecord, *, installation: Installation, key_path: KeyPath) -> list[Problem]:
    """What ``record`` lacks as the image the client worker (or the supervisor) runs in."""
    if record.versions is None:
        return []
    what = f"client image {record.name!r} ({record.path})"
    problems: list[Problem] = []
    for distribution in (*LOCKSTEP_DISTRIBUTIONS, TOP_DISTRIBUTION):
        found = _found(record, distribution)
        if found is None and distribution == TOP_DISTRIBUTION:
            continue
        if found is None or not same_version(found, installation.version):
            held = f"holds {distribution} {found}" if found is not None else f"{distribution} is absent or undetermined"
            problems.append(
                _problem(
                    "image_package_version",
                    key_path,
                    f"{what}: {held}, this installation is {distribution} {installation.version}",
                    f"install {distribution}=={installation.version} in the image and register it again "
                    "('data-designer slurm image add ... --replace')",
                )
            )
    host = _found(record, HOST_DISTRIBUTION)
    wanted = installation.data_designer
    if host is None or (wanted is not None and not satisfies(host, wanted)):
        held = (
            f"holds {HOST_DISTRIBUTION} {host}"
            if host is not None
            else f"{HOST_DISTRIBUTION} is absent or undetermined"
        )
        problems.append(
            _problem(
                "image_package_version",
                key_path,
                f"{what}: {held}, this installation needs {HOST_DISTRIBUTION} {wanted or '(any version)'}",
                f"install {HOST_DISTRIBUTION}{wanted or ''} in the image and register it again",
            )
        )
    problems.extend(_python_problem(record, what, key_path, CLIENT_PYTHON, "the client worker", required=False))
    return problems


def role_warning(record: ImageRecord, used_as: str, key_path: KeyPath) -> PlanWarning | None:
    """A warning when an image registered for one role is used in the other (the checks above still decide)."""
    if record.role is None or record.role == used_as:
        return None
    return PlanWarning(
        code="image_role",
        key_path=format_key_path(key_path),
        message=f"image {record.name!r} is registered as a {record.role} image and used as the {used_as} image",
    )


def _found(record: ImageRecord, distribution: str) -> str | None:
    assert record.versions is not None
    return record.versions.get(distribution)


def _python_problem(
    record: ImageRecord, what: str, key_path: KeyPath, oldest: tuple[int, int], needed_by: str, *, required: bool = True
) -> Iterable[Problem]:
    wanted = ".".join(map(str, oldest))
    found = _python_version(record.python)
    if found is None and not required:
        return []
    if found is not None and found >= oldest:
        return []
    held = f"holds Python {record.python}" if found is not None else "its Python is undetermined"
    return [
        _problem(
            "image_python_version",
            key_path,
            f"{what}: {held}, {needed_by} needs Python {wanted} or later",
            f"register an image whose python3 is {wanted} or later",
        )
    ]


def _python_version(text: str | None) -> tuple[int, int] | None:
    parts = (text or "").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def _problem(code: str, key_path: KeyPath, message: str, hint: str) -> Problem:
    return Problem(code=code, key_path=key_path, message=message, hint=hint)
