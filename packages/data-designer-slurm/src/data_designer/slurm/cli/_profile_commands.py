"""``data-designer slurm profile ...``: write and validate cluster profiles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from data_designer.slurm.cli._output import DebugOption, JsonOption, human, run, table

if TYPE_CHECKING:
    from data_designer.slurm.contracts import ProbeReport, ProfileInitResult, ProfileValidation

profile_app = typer.Typer(
    name="profile",
    help="Create and check cluster profiles (where and how runs execute).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ProfileOption = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        help="Profile file. Default: $DATA_DESIGNER_SLURM_PROFILE, else $XDG_CONFIG_HOME/data-designer-slurm/profile.yaml.",
        dir_okay=False,
    ),
]
ClusterOption = Annotated[str | None, typer.Option("--cluster", help="Cluster name in the profile (not Slurm's -M).")]


@profile_app.command("init")
def init(
    profile: ProfileOption = None,
    cluster: Annotated[str, typer.Option("--cluster", help="Name of the cluster to describe.")] = "default",
    workspace_root: Annotated[
        str, typer.Option("--workspace-root", help="Shared-filesystem directory seen by login and compute nodes.")
    ] = "/shared/data-designer-slurm",
    account: Annotated[str | None, typer.Option("--account", help="Slurm account; omit to use your default.")] = None,
    gpu_partition: Annotated[str, typer.Option("--gpu-partition", help="Partition for GPU work.")] = "gpu",
    cpu_partition: Annotated[str, typer.Option("--cpu-partition", help="Partition for CPU work.")] = "cpu",
    gpus_per_node: Annotated[
        str, typer.Option("--gpus-per-node", help="A number, or 'auto' (read from GRES).")
    ] = "auto",
    gpu_request: Annotated[str, typer.Option("--gpu-request", help="'gres' or 'whole_node'.")] = "gres",
    container_runtime: Annotated[
        str, typer.Option("--container-runtime", help="'none', 'pyxis' or 'apptainer'.")
    ] = "none",
    python: Annotated[
        str, typer.Option("--python", help="Python interpreter on compute nodes with data-designer-slurm installed.")
    ] = "/usr/bin/python3",
    time_limit: Annotated[
        str, typer.Option("--time-limit", help="Default --time for jobs, e.g. '04:00:00'.")
    ] = "04:00:00",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing profile file.")] = False,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Write a commented profile file (never overwrites one without --force)."""

    def call() -> ProfileInitResult:
        from data_designer.slurm.services import ProfileTemplate, init_profile

        gpus: int | str = int(gpus_per_node) if gpus_per_node.isdigit() else gpus_per_node
        template = ProfileTemplate(
            cluster=cluster,
            workspace_root=workspace_root,
            account=account,
            gpu_partition=gpu_partition,
            cpu_partition=cpu_partition,
            gpus_per_node=gpus,
            gpu_request=gpu_request,
            container_runtime=container_runtime,
            python=python,
            default_time_limit=time_limit,
        )
        return init_profile(profile, template=template, force=force)

    def render(result: ProfileInitResult) -> str:
        verb = "Replaced" if result.overwritten else "Wrote"
        return (
            f"{verb} profile {result.file} (cluster {result.cluster!r}).\n"
            f"Check it with: data-designer slurm profile validate --profile {result.file}"
        )

    run("profile.init", call, render, as_json=as_json, debug=debug)


@profile_app.command("validate")
def validate(
    profile: ProfileOption = None,
    cluster: ClusterOption = None,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="Also check the selected cluster against the real Slurm cluster (runs a tiny CPU job).",
        ),
    ] = False,
    probe_timeout: Annotated[
        float | None,
        typer.Option(
            "--probe-timeout",
            min=1.0,
            help="Seconds the probe waits for its job before cancelling it (default 180).",
        ),
    ] = None,
    as_json: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Load a profile strictly and report every problem with file, line, key and fix.

    With --probe, the selected cluster is also checked against the real cluster, each check
    reported as ok, failed or not run (with the reason): the Slurm commands answer; the gpu and
    cpu partitions exist and are up; the user may use the account on them (sacctmgr); GPUs per
    node from GRES ('auto' is resolved, a different number fails); workspace_root is writable; and
    a tiny job on the cpu partition writes a token under workspace_root/.probe/ that is read back
    here and imports the runtime, at this version, with the profile's compute Python.

    Exit codes: 0 valid (and, with --probe, every check ok); 5 Slurm cannot be reached at all;
    6 a probe check failed or did not run. With --json a failing probe prints nothing on stdout;
    the error object on stderr lists one problem per check that failed or did not run (code
    probe_CHECK_failed or probe_CHECK_not_run, the profile key and the fix). Without --json the
    table of all checks is printed on stdout and the failures on stderr.
    """

    def call() -> ProfileValidation:
        from data_designer.slurm.contracts import ProbeFailedError
        from data_designer.slurm.services import validate_profile

        try:
            return validate_profile(profile, cluster, probe=probe, probe_timeout_s=probe_timeout)
        except ProbeFailedError as exc:
            if not as_json:
                typer.echo(human(render_probe(exc.report)))
            raise

    def render(result: ProfileValidation) -> str:
        rows = [
            [
                ("* " if c.selected else "  ") + c.name,
                c.workspace_root,
                c.account or "(default)",
                f"{c.gpu_partition}/{c.cpu_partition}",
                str(c.gpus_per_node),
                c.gpu_request,
                c.container_runtime,
                c.default_time_limit,
            ]
            for c in result.clusters
        ]
        head = f"Profile {result.file} is valid (schema {result.schema_version}); selected cluster: {result.selected_cluster}"
        text = (
            head
            + "\n\n"
            + table(
                [
                    "cluster",
                    "workspace",
                    "account",
                    "gpu/cpu partition",
                    "gpus/node",
                    "gpu request",
                    "containers",
                    "time",
                ],
                rows,
            )
        )
        return text if result.probe is None else text + "\n\n" + render_probe(result.probe)

    run("profile.validate", call, render, as_json=as_json, debug=debug)


_PROBE_STATUS = {"ok": "ok", "failed": "FAILED", "not_run": "not run"}


def render_probe(report: ProbeReport) -> str:
    """A summary line and one row per check, in the order they ran, with the fix for each that is not ok."""
    slurm = report.slurm_cluster or "unknown"
    if report.slurm_version:
        slurm += f", Slurm {report.slurm_version}"
    bad = report.not_ok()
    total = len(report.checks)
    verdict = f"all {total} checks ok" if not bad else f"{len(bad)} of {total} checks failed or did not run"
    gpus = "" if report.gpus_per_node_resolved is None else f"; GPUs per node: {report.gpus_per_node_resolved}"
    head = f"Probe of cluster {report.cluster!r} (Slurm cluster {slurm}) in {report.duration_s:.1f}s: {verdict}{gpus}"
    rows = [
        [
            check.name,
            _PROBE_STATUS[check.status],
            check.detail + (f" (fix: {check.hint})" if check.hint and check.status != "ok" else ""),
        ]
        for check in report.checks
    ]
    return head + "\n\n" + table(["check", "status", "detail"], rows)
