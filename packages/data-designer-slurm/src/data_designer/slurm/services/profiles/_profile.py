"""Profile services: ``profile init`` and ``profile validate`` as Python operations."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from data_designer.slurm.contracts import (
    PROFILE_ENV_VAR,
    ClusterProfile,
    ClusterSummary,
    InvalidInputError,
    NotFoundError,
    ProbeFailedError,
    ProbeReport,
    Problem,
    Profile,
    ProfileInitResult,
    ProfileValidation,
)
from data_designer.slurm.planner import (
    ProfileTemplate,
    load_profile,
    parse_document,
    render_profile,
    select_cluster,
    validate_document,
)
from data_designer.slurm.runtime.facts import read_facts, save_facts
from data_designer.slurm.runtime.jobs import cpu_job_runner
from data_designer.slurm.runtime.probe import DEFAULT_PROBE_TIMEOUT_S, probe_cluster
from data_designer.slurm.runtime.scheduler import CommandRunner, SlurmScheduler
from data_designer.slurm.runtime.store import modes_for, read_text, system_clock, write_text_atomic

_INIT_OPTIONS = {
    "workspace_root": "--workspace-root",
    "account": "--account",
    "gpu": "--gpu-partition",
    "cpu": "--cpu-partition",
    "gpus_per_node": "--gpus-per-node",
    "gpu_request": "--gpu-request",
    "container_runtime": "--container-runtime",
    "interpreter": "--python",
    "default_time_limit": "--time-limit",
    "default_cluster": "--cluster",
    "clusters": "--cluster",
}


def default_profile_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/data-designer-slurm/profile.yaml`` (``~/.config/...`` when unset)."""
    env = os.environ if environ is None else environ
    config_home = env.get("XDG_CONFIG_HOME") or ""
    if not os.path.isabs(config_home):  # the XDG spec: relative values are invalid and ignored
        config_home = str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config_home) / "data-designer-slurm" / "profile.yaml"


def resolve_profile_path(profile: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """``--profile FILE``, else ``$DATA_DESIGNER_SLURM_PROFILE``, else :func:`default_profile_path`."""
    env = os.environ if environ is None else environ
    if profile is not None and str(profile):
        return Path(profile).expanduser().absolute()
    named = env.get(PROFILE_ENV_VAR)
    if named:
        return Path(named).expanduser().absolute()
    return default_profile_path(env)


def load_profile_file(
    profile: str | Path | None = None, *, environ: Mapping[str, str] | None = None
) -> tuple[Path, Profile]:
    """Read and strictly validate the selected profile file."""
    path = resolve_profile_path(profile, environ)
    try:
        text = read_text(path, operation="profile.load")
    except NotFoundError as exc:
        raise NotFoundError(
            f"profile {str(path)!r} does not exist",
            code="profile_not_found",
            operation="profile.load",
            file=str(path),
            hint=f"create it with 'data-designer slurm profile init --profile {path}', or select another with --profile or ${PROFILE_ENV_VAR}",
        ) from exc
    return path, load_profile(text, file=str(path))


def validate_profile(
    profile: str | Path | None = None,
    cluster: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    probe: bool = False,
    runner: CommandRunner | None = None,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] | None = None,
    probe_id: str | None = None,
    probe_timeout_s: float | None = None,
) -> ProfileValidation:
    """Load the profile strictly and summarise its clusters (raises with every problem found).

    With ``probe``, also check the selected cluster against the real Slurm cluster that ``runner``
    reaches (default: the Slurm commands on PATH, in the environment ``environ``); ``clock``,
    ``sleep`` and ``probe_id`` make the probe deterministic in tests; ``probe_timeout_s`` bounds the wait
    for the probe job (default :data:`DEFAULT_PROBE_TIMEOUT_S`). A probe that does not pass
    raises :class:`ProbeFailedError` (exit 6) carrying the whole report; Slurm that cannot be
    reached at all raises :class:`UnavailableError` (exit 5). A probe that passes also refreshes the
    workspace's cache of cluster facts (``<workspace_root>/cluster/facts.json``, which ``execute`` reuses).
    """
    path, loaded = load_profile_file(profile, environ=environ)
    selected, selected_profile = select_cluster(loaded, cluster, file=str(path))
    report: ProbeReport | None = None
    if probe:
        # the probe job's slurm-*.out under the workspace's umask, as execute's
        runner = runner if runner is not None else cpu_job_runner(selected_profile, env=environ)
        report = probe_cluster(
            selected,
            selected_profile,
            runner=runner,
            clock=clock or system_clock,
            sleep=sleep or time.sleep,
            probe_id=probe_id,
            timeout_s=DEFAULT_PROBE_TIMEOUT_S if probe_timeout_s is None else probe_timeout_s,
        )
        if not report.passed:
            raise ProbeFailedError(report, operation="profile.validate", file=str(path))
        now = clock or system_clock
        facts = read_facts(SlurmScheduler(runner, clock=now), now)
        save_facts(selected_profile.workspace_root, facts, modes_for(selected_profile.workspace_sharing), now)
    return ProfileValidation(
        file=str(path),
        schema_version=loaded.schema_version,
        selected_cluster=selected,
        clusters=tuple(_summary(name, loaded.clusters[name], name == selected) for name in loaded.cluster_names()),
        probe=report,
    )


def init_profile(
    profile: str | Path | None = None,
    *,
    template: ProfileTemplate | None = None,
    force: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ProfileInitResult:
    """Write a commented profile; never overwrites an existing file unless ``force``."""
    path = resolve_profile_path(profile, environ)
    chosen = template or ProfileTemplate()
    text = render_profile(chosen)
    document = parse_document(text, file=str(path), fmt="yaml")
    try:
        validate_document(Profile, document, operation="profile.init")
    except InvalidInputError as exc:
        raise InvalidInputError.from_problems(
            [_as_option_problem(p) for p in exc.problems], operation="profile.init"
        ) from exc
    overwritten = write_text_atomic(path, text, overwrite=force, operation="profile.init")
    return ProfileInitResult(file=str(path), cluster=chosen.cluster, schema_version=1, overwritten=overwritten)


def _as_option_problem(problem: Problem) -> Problem:
    """Problems in the rendered template are caused by options: name the option, not the file line."""
    key = problem.key_path or ()
    option = next(
        (_INIT_OPTIONS[part] for part in reversed(key) if isinstance(part, str) and part in _INIT_OPTIONS), None
    )
    return problem.model_copy(
        update={"file": None, "line": None, "key_path": (option,) if option else problem.key_path}
    )


def _summary(name: str, cluster: ClusterProfile, selected: bool) -> ClusterSummary:
    python = cluster.compute_python.interpreter or f"image:{cluster.compute_python.image}"
    return ClusterSummary(
        name=name,
        selected=selected,
        workspace_root=cluster.workspace_root,
        account=cluster.account,
        gpu_partition=cluster.partitions.gpu,
        cpu_partition=cluster.partitions.cpu,
        gpus_per_node=cluster.gpus_per_node,
        gpu_request=cluster.gpu_request,
        container_runtime=cluster.container_runtime,
        compute_python=python,
        default_time_limit=cluster.default_time_limit,
        sbatch_options=cluster.sbatch_options,
        environment=cluster.environment,
    )
