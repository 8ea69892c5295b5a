"""What ``profile validate --probe`` found out about a cluster, check by check.

A probe runs a fixed list of checks against the real cluster (see :data:`PROBE_CHECK_NAMES`,
in the order they run). Each ends ``ok``, ``failed`` (it ran and the cluster disagrees with the
profile) or ``not_run`` (a check it depends on failed, or it cannot run for this profile); the
``detail`` says what was seen or why it did not run, the ``hint`` how to fix it. A probe passes
only when every check is ``ok``: :class:`ProbeFailedError` (exit 6) carries the whole report
otherwise, with one :class:`Problem` per check that failed or did not run.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field, NonNegativeFloat, PositiveInt

from data_designer.slurm.contracts._errors import CheckFailedError, KeyPath, Problem
from data_designer.slurm.contracts._types import FROZEN

ProbeStatus = Literal["ok", "failed", "not_run"]

ProbeCheckName = Literal[
    "slurm_commands",
    "controller",
    "gpu_partition",
    "cpu_partition",
    "account",
    "gpus_per_node",
    "workspace",
    "probe_job",
    "shared_workspace",
    "compute_runtime",
]
"""Every check a probe reports, in the order it runs them."""

PROBE_CHECK_NAMES: tuple[ProbeCheckName, ...] = get_args(ProbeCheckName)


class ProbeCheck(BaseModel):
    """One check of a probe: its outcome, what was seen (or why it did not run) and how to fix it."""

    model_config = FROZEN

    name: ProbeCheckName
    status: ProbeStatus
    detail: str = Field(description="What the check saw; for 'not_run', why it did not run.")
    hint: str | None = Field(default=None, description="How to fix a failed check.")
    key_path: KeyPath | None = Field(
        default=None,
        strict=False,
        description="The profile key the check is about, e.g. ['clusters', 'local', 'account'].",
    )
    duration_s: NonNegativeFloat = 0.0


class ProbeReport(BaseModel):
    """Every check of one probe of one profile cluster, with the facts it resolved."""

    model_config = FROZEN

    cluster: str = Field(description="The profile's cluster name.")
    slurm_cluster: str | None = Field(default=None, description="ClusterName as the controller reports it.")
    slurm_version: str | None = None
    checks: tuple[ProbeCheck, ...] = Field(strict=False)
    gpus_per_node_resolved: PositiveInt | None = Field(
        default=None, description="GPUs per node of the GPU partition, read from its nodes' GRES."
    )
    job_id: str | None = Field(default=None, description="The probe job's Slurm id, when it was submitted.")
    probe_dir: str | None = Field(
        default=None, description="Where the probe job wrote its evidence (removed after a passing probe)."
    )
    expected_runtime_version: str
    started_at: str = Field(description="ISO-8601 UTC time the probe started (from the injected clock).")
    duration_s: NonNegativeFloat

    @property
    def passed(self) -> bool:
        return all(check.status == "ok" for check in self.checks)

    def not_ok(self) -> tuple[ProbeCheck, ...]:
        """The checks that failed or did not run, in report order."""
        return tuple(check for check in self.checks if check.status != "ok")

    def check(self, name: ProbeCheckName) -> ProbeCheck:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)


def _problem(check: ProbeCheck) -> Problem:
    outcome = "failed" if check.status == "failed" else "did not run"
    return Problem(
        code=f"probe_{check.name}_{check.status}",
        message=f"probe check {check.name!r} {outcome}: {check.detail}",
        key_path=check.key_path,
        hint=check.hint,
    )


class ProbeFailedError(CheckFailedError):
    """A probe ran and at least one check failed or could not run (exit 6); ``report`` holds every check."""

    default_code = "probe_failed"

    def __init__(self, report: ProbeReport, *, operation: str = "profile.probe", file: str | None = None) -> None:
        bad = report.not_ok()
        names = ", ".join(check.name for check in bad) or "none"
        super().__init__(
            f"the probe of cluster {report.cluster!r} did not pass: {len(bad)} of {len(report.checks)} "
            f"checks failed or did not run ({names})",
            operation=operation,
            file=file,
            hint="fix the first failed check; the checks after it often depend on it",
            problems=tuple(_problem(check) for check in bad),
        )
        self.report = report
