"""``SlurmDataDesigner``: the host's ``DataDesigner().create(config_builder, num_records=N)`` habit, on Slurm.

``create`` writes the files a user would have written (the builder's config as ``write_config`` writes it, and a
run file naming it: :mod:`._documents`) and hands the run file to ``execute_run``, so the run is validated, compiled,
snapshotted and submitted exactly as ``data-designer slurm execute RUN_FILE`` does it (same errors, same inputs
layout, same plan digest as the equivalent run file). ``preview`` hands the same file to ``plan_run`` (the dry run).
It returns at once with a :class:`RunHandle`; ``run(RUN)`` and ``runs()`` give handles in any later process.
``benchmark`` does the same with a benchmark file and ``run_benchmark``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import (
    CheckFailedError,
    ConflictError,
    ErrorInfo,
    InternalError,
    InterruptError,
    InvalidInputError,
    NotFoundError,
    RunDryRun,
    SlurmExtensionError,
    UnavailableError,
)
from data_designer.slurm.runtime.scheduler import CommandRunner
from data_designer.slurm.runtime.store import Clock, RunId, RunIdFactory, read_run_record, system_clock
from data_designer.slurm.services.benchmarks import find_benchmark, run_benchmark
from data_designer.slurm.services.client._benchmark_handle import BenchmarkHandle
from data_designer.slurm.services.client._documents import (
    ClientFiles,
    benchmark_document,
    config_source,
    run_document,
    yaml_text,
)
from data_designer.slurm.services.client._progress import ProgressMode
from data_designer.slurm.services.client._run_handle import RunHandle
from data_designer.slurm.services.client._session import Session
from data_designer.slurm.services.context import ServiceContext
from data_designer.slurm.services.plans import plan_run
from data_designer.slurm.services.runs import execute_run, list_runs, locate_run

RUN_FILE_NAME = "run.yaml"
CONFIG_FILE_NAME = "config.yaml"
BENCHMARK_FILE_NAME = "benchmark.yaml"


class SlurmDataDesigner:
    """A client of one profile cluster (``profile``: a profile file, default as for the CLI; ``cluster``: one of its
    clusters). The keyword-only arguments are seams (the CLI's defaults otherwise): ``environ`` (the environment
    ``sbatch`` gets; None: this process's), ``runner`` (the Slurm commands), ``clock``, ``id_factory`` (new run
    ids), ``sleep``/``monotonic`` (waits), ``progress`` (``wait``'s display: ``auto``, ``jupyter``, ``bar``,
    ``lines``, ``off``) and ``files_dir`` (where ``create`` and ``benchmark`` write the files they make; default
    ``$XDG_CACHE_HOME/data-designer-slurm/python``)."""

    def __init__(
        self,
        profile: str | Path | None = None,
        cluster: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        runner: CommandRunner | None = None,
        clock: Clock = system_clock,
        id_factory: RunIdFactory | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        progress: ProgressMode = "auto",
        files_dir: str | Path | None = None,
    ) -> None:
        self.session = Session(
            profile=profile,
            cluster=cluster,
            environ=environ,
            runner=runner,
            clock=clock,
            id_factory=id_factory,
            sleep=sleep,
            monotonic=monotonic,
            progress=progress,
            files_dir=files_dir,
        )
        self._files = ClientFiles.of(environ, files_dir)

    # -- runs --------------------------------------------------------------------------------------------------

    def create(
        self,
        config_builder: Any,
        *,
        num_records: int,
        shards: int | None = None,
        records_per_shard: int | None = None,
        deployments: Mapping[str, Any] | None = None,
        external: Mapping[str, Any] | None = None,
        client: Any = None,
        submission: Any = None,
        seed: int | None = None,
        name: str = "dataset",
        run_id: str | None = None,
    ) -> RunHandle:
        """Submit a run of ``config_builder`` (the host's ``DataDesignerConfigBuilder``, a built config, a config
        mapping, or a config file's path) for ``num_records`` records, and return its handle at once.

        The other arguments are the run file's keys (``sharding.shards``/``records_per_shard``, ``deployments``,
        ``external``, ``client``, ``submission``, ``seed``, ``name``), as the contracts' models (``VllmDeployment``,
        ``ClientSettings``, ``SubmissionSettings``...) or plain mappings; they are validated as the run file is.
        ``run_id`` submits an existing run's missing chunks instead (``execute --run-id``). Errors: those of
        ``execute`` (exit code in ``error.info.exit_code``)."""
        run_file = self.run_file(
            config_builder,
            num_records=num_records,
            shards=shards,
            records_per_shard=records_per_shard,
            deployments=deployments,
            external=external,
            client=client,
            submission=submission,
            seed=seed,
            name=name,
        )
        result = execute_run(run_file, run_id=run_id, id_factory=self.session.id_factory, **self.session.observed())
        return RunHandle(result.run_id, self.session, submitted=result)

    def preview(
        self,
        config_builder: Any,
        *,
        num_records: int,
        shards: int | None = None,
        records_per_shard: int | None = None,
        deployments: Mapping[str, Any] | None = None,
        external: Mapping[str, Any] | None = None,
        client: Any = None,
        submission: Any = None,
        seed: int | None = None,
        name: str = "dataset",
        cluster_check: bool = False,
        out: str | Path | None = None,
        force: bool = False,
    ) -> RunDryRun:
        """The dry run of what :meth:`create` would submit (``execute --dry-run``): the plan's summary, nothing
        submitted; ``cluster_check`` asks the cluster's facts, ``out`` writes the plan files there."""
        run_file = self.run_file(
            config_builder,
            num_records=num_records,
            shards=shards,
            records_per_shard=records_per_shard,
            deployments=deployments,
            external=external,
            client=client,
            submission=submission,
            seed=seed,
            name=name,
        )
        return plan_run(run_file, cluster_check=cluster_check, out=out, force=force, **self.session.observed())

    def run_file(
        self,
        config_builder: Any,
        *,
        num_records: int,
        shards: int | None = None,
        records_per_shard: int | None = None,
        deployments: Mapping[str, Any] | None = None,
        external: Mapping[str, Any] | None = None,
        client: Any = None,
        submission: Any = None,
        seed: int | None = None,
        name: str = "dataset",
    ) -> Path:
        """The run file :meth:`create` submits (and its config file beside it), written under ``files_dir``."""
        source = config_source(config_builder, operation="execute")
        config_file = source.path
        if config_file is None:
            assert source.text is not None
            config_file = self._files.write("configs", CONFIG_FILE_NAME, source.text, operation="execute")
        document = run_document(
            name=name,
            config_file=config_file,
            records=num_records,
            shards=shards,
            records_per_shard=records_per_shard,
            deployments=deployments,
            external=external,
            client=client,
            submission=submission,
            seed=seed,
        )
        return self._files.write("runs", RUN_FILE_NAME, yaml_text(document), operation="execute")

    def run(self, run: str | Path | RunHandle) -> RunHandle:
        """The handle of a run of this workspace: its run id, its run directory, or its name (the newest run of
        that name). NotFoundError (exit 3) when there is none."""
        if isinstance(run, RunHandle):
            return run
        text = str(run)
        by_id = "/" in text
        try:
            RunId.parse(text)
            by_id = True
        except (InvalidInputError, ValueError):
            pass
        if by_id:
            layout = locate_run(text, **self.session.located())
            read_run_record(layout, operation="run.locate")  # the same refusal as 'status RUN' for no such run
            return RunHandle(str(layout.run_id), self.session)
        named = [summary for summary in list_runs(all=True, **self.session.observed()).runs if summary.name == text]
        if not named:
            raise NotFoundError(
                f"no run with id or name {text!r} in this workspace",
                code="run_not_found",
                operation="run.locate",
                hint="'data-designer slurm runs ls --all' lists the runs (check --profile and --cluster)",
            )
        return RunHandle(named[0].run_id, self.session)

    def runs(self, *, all: bool = False, refresh: bool = False) -> list[RunHandle]:
        """Handles of the workspace's runs, newest first (``runs ls``: the 20 newest unless ``all``); runs whose
        directory cannot be read are left out."""
        listed = list_runs(all=all, refresh=refresh, **self.session.observed())
        return [RunHandle(s.run_id, self.session) for s in listed.runs if s.state not in ("unreadable", "incomplete")]

    # -- benchmarks --------------------------------------------------------------------------------------------

    def benchmark(self, bench: Any) -> BenchmarkHandle:
        """Run a benchmark (``benchmark run``): a benchmark file's path, a contracts ``BenchmarkSpec`` or a mapping
        of its keys (``base`` may be a :class:`RunHandle`: that run's run file is the base). Returns at once; a
        child that could not be submitted raises the error ``benchmark run`` exits with (the children submitted
        before it stay: ``benchmark(...)`` again submits the rest)."""
        if isinstance(bench, str | Path):
            bench_file = Path(bench)
        else:
            text = yaml_text(benchmark_document(bench))
            bench_file = self._files.write("benchmarks", BENCHMARK_FILE_NAME, text, operation="benchmark.run")
        result = run_benchmark(bench_file, id_factory=self.session.id_factory, **self.session.observed())
        if result.error is not None:
            raise error_of(result.error)
        return BenchmarkHandle(result.benchmark_id, self.session, submitted=result)

    def benchmark_by_id(self, bench: str | Path | BenchmarkHandle) -> BenchmarkHandle:
        """The handle of a benchmark of this workspace: its id, a unique id prefix, its name (the newest of that
        name) or the file it was run from. NotFoundError (exit 3, ``benchmark_not_found``) when there is none."""
        if isinstance(bench, BenchmarkHandle):
            return bench
        ctx = ServiceContext.of(**self.session.located())
        layout = find_benchmark(Path(ctx.selected.profile.workspace_root), bench)
        return BenchmarkHandle(layout.benchmark_id, self.session)

    def __repr__(self) -> str:
        return f"SlurmDataDesigner(profile={self.session.profile!r}, cluster={self.session.cluster!r})"


def error_of(info: ErrorInfo) -> SlurmExtensionError:
    """The typed error an :class:`ErrorInfo` describes (its category's class, with its code, message and hint)."""
    cls = next((c for c in _ERROR_CLASSES if c.category == info.category), SlurmExtensionError)
    return cls(
        info.message,
        code=info.code,
        operation=info.operation,
        file=info.file,
        key_path=info.key_path,
        line=info.line,
        hint=info.hint,
        problems=info.problems,
    )


_ERROR_CLASSES: tuple[type[SlurmExtensionError], ...] = (
    InvalidInputError,
    NotFoundError,
    ConflictError,
    UnavailableError,
    CheckFailedError,
    InternalError,
    InterruptError,
)
