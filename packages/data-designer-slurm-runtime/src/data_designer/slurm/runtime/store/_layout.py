"""Run ids and the run-directory layout: pure path arithmetic, no I/O (see ``docs/architecture/run-directory.md``).

A run id is ``<run name>-<YYYYMMDDTHHMMSSZ>-<6 lowercase hex>``; the name follows the contracts'
``Name`` rule (lowercase letters, digits, ``.``, ``_``, ``-``), so a run id is always one safe path
component. Every name that comes from outside (input file names, log step names) is checked to be
one plain component: no ``/``, no ``..``, no NUL or control character, no leading ``.`` (hidden names
are reserved for writers' temporary files). Numbers are zero-padded to a minimum width and parsed
back only in that canonical spelling.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from data_designer.slurm.contracts import InvalidInputError, SubmissionBinding, find_control_character
from data_designer.slurm.runtime.store._record_io import Clock, system_clock

RUNS_DIR = "runs"
RUN_RECORD = "run.json"
INPUTS_DIR = "inputs"
MANIFEST = "manifest.json"
PLAN_RECORD = "plan.json"
SUBMISSIONS_DIR = "submissions"
SHARDS_DIR = "shards"
ATTEMPTS_DIR = "attempts"
CLAIM_FILE = "claim"
ATTEMPT_RECORD = "attempt.json"
HEARTBEAT_RECORD = "heartbeat.json"
PROGRESS_RECORD = "progress.json"
REQUESTS_RECORD = "requests.json"
CLIENT_ERROR_RECORD = "client-error.json"
LOGS_DIR = "logs"
OUTPUT_DIR = "output"
STATUS_RECORD = "status.json"
MERGE_DIR = "merge"
BENCHMARK_RECORD = "benchmark.json"
ENDPOINTS_RECORD = "endpoints.json"
SERVER_METRICS_RECORD = "server-metrics.json"
PORTS_DIR = "ports"
OBSERVATIONS_DIR = "observations"
RETRIES_DIR = "retries"
CANCELLATIONS_DIR = "cancellations"
SET_ASIDE_DIR = "set-aside"
"""Damaged parts a retry took out of their attempts' ``output/`` (``set-aside/<generation>/<the part's path>``)."""
WORKER_HOME_DIR = "home"  # the client worker's $HOME (the host's settings and caches)
HOST_ARTIFACTS_DIR = "artifacts"  # the host's own batch files and metadata (the host makes and writes it)
JOB_NAME_PREFIX = "dd-"
"""Every job of ours is named ``dd-...``: a run's array chunks ``dd-<run id>-c<chunk>`` (:func:`submission_binding`)."""

SHARD_WIDTH = 5
ATTEMPT_WIDTH = 4
PART_WIDTH = 5
RUN_ID_SUFFIX_HEX = 6

RUN_ID_PATTERN = (
    r"^(?P<name>[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?)-(?P<stamp>[0-9]{8}T[0-9]{6}Z)-(?P<suffix>[0-9a-f]{6})$"
)
_RUN_ID = re.compile(RUN_ID_PATTERN)
_STAMP = "%Y%m%dT%H%M%SZ"
_MAX_COMPONENT_BYTES = 255


@dataclass(frozen=True, order=True)
class RunId:
    """A validated run id: run name, creation time (UTC, whole seconds) and a random suffix."""

    name: str
    created: datetime
    suffix: str

    def __post_init__(self) -> None:
        if self.created.tzinfo is None or self.created.utcoffset() is None:
            raise InvalidInputError(f"run id time {self.created!r} is naive", code="invalid_run_id")
        text = f"{self.name}-{self.created.astimezone(UTC).strftime(_STAMP)}-{self.suffix}"
        if not _RUN_ID.fullmatch(text) or self.created.microsecond:
            raise _invalid_run_id(text)

    def __str__(self) -> str:
        return self.text

    @cached_property
    def text(self) -> str:
        """The id as written in names and records (computed once: readers compare it per record)."""
        return f"{self.name}-{self.created.astimezone(UTC).strftime(_STAMP)}-{self.suffix}"

    @classmethod
    def parse(cls, text: str) -> RunId:
        """Parse a run id; raises InvalidInputError (``invalid_run_id``) for anything else."""
        match = _RUN_ID.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise _invalid_run_id(text)
        try:
            # the fields by position (the pattern fixed them as digits): strptime's locale checks cost more
            # than the rest of the parse, and 'runs ls' parses every run directory's name
            s = match.group("stamp")
            created = datetime(
                int(s[0:4]), int(s[4:6]), int(s[6:8]), int(s[9:11]), int(s[11:13]), int(s[13:15]), tzinfo=UTC
            )
        except ValueError as exc:
            raise _invalid_run_id(text) from exc
        return cls(match.group("name"), created, match.group("suffix"))


RunIdFactory = Callable[[str], RunId]
"""Makes a fresh run id for a run name; injected into services so ids are deterministic in tests."""


def run_id_factory(clock: Clock = system_clock, token: Callable[[], str] | None = None) -> RunIdFactory:
    """A factory stamping ids with ``clock`` (truncated to seconds) and ``token`` (default: 3 random bytes)."""

    def make(name: str) -> RunId:
        suffix = token() if token is not None else secrets.token_hex(RUN_ID_SUFFIX_HEX // 2)
        return RunId(name, clock().astimezone(UTC).replace(microsecond=0), suffix)

    return make


def format_shard(shard: int) -> str:
    return f"{_index(shard, 'shard', minimum=0):0{SHARD_WIDTH}d}"


def format_attempt(attempt: int) -> str:
    return f"{_index(attempt, 'attempt', minimum=1):0{ATTEMPT_WIDTH}d}"


def relative_output_dir(shard: int, attempt: int) -> str:
    """An attempt's ``output/`` relative to the run directory (how merge manifests name their sources' parts)."""
    return f"{SHARDS_DIR}/{format_shard(shard)}/{ATTEMPTS_DIR}/{format_attempt(attempt)}/{OUTPUT_DIR}"


def parse_shard(name: str) -> int | None:
    """The shard number of a directory name in canonical spelling, else None (strays are ignored)."""
    return _parse_number(name, SHARD_WIDTH, minimum=0)


def parse_attempt(name: str) -> int | None:
    """The attempt number of a directory name in canonical spelling, else None (strays are ignored)."""
    return _parse_number(name, ATTEMPT_WIDTH, minimum=1)


def check_component(name: str, what: str) -> str:
    """``name`` if it is one plain, visible path component; raises InvalidInputError otherwise."""
    problem = None
    if not isinstance(name, str) or not name:
        problem = "is empty"
    elif name in (".", "..") or "/" in name or "\\" in name:
        problem = "is not a single path component"
    elif find_control_character(name) is not None:
        problem = "contains a NUL or control character"
    elif name.startswith("."):
        problem = "starts with '.' (reserved for temporary files)"
    elif len(name.encode("utf-8", "surrogatepass")) > _MAX_COMPONENT_BYTES:
        problem = f"is longer than {_MAX_COMPONENT_BYTES} bytes"
    if problem is not None:
        raise InvalidInputError(
            f"{what} {name!r} {problem}",
            code="invalid_path_component",
            key_path=(what,),
            hint="use a plain file name: no '/', '..', leading '.', NUL or control characters",
        )
    return name


@dataclass(frozen=True)
class RunLayout:
    """Where every file of one run lives under ``<root>/runs/<run id>/`` (pure path arithmetic)."""

    root: Path
    run_id: RunId

    def __post_init__(self) -> None:
        text = str(self.root)
        # '%' and '\\' would be read as file-name patterns by sbatch --output (planner bind_submission).
        if not self.root.is_absolute() or find_control_character(text) is not None or "%" in text or "\\" in text:
            raise InvalidInputError(
                f"workspace root {text!r} must be an absolute path without '%', backslashes or control characters",
                code="invalid_workspace",
                hint="use the profile's absolute workspace path on the shared filesystem",
            )

    @classmethod
    def of(cls, root: Path | str, run_id: RunId | str) -> RunLayout:
        return cls(Path(root), run_id if isinstance(run_id, RunId) else RunId.parse(run_id))

    @classmethod
    def of_run_dir(cls, run_dir: Path) -> RunLayout:
        """The layout of the run whose directory is ``run_dir``; InvalidInputError for any other directory."""
        if run_dir.parent.name != RUNS_DIR or not _RUN_ID.fullmatch(run_dir.name):
            raise InvalidInputError(
                f"{str(run_dir)!r} is not a run directory (<workspace>/{RUNS_DIR}/<run id>)", code="invalid_run"
            )
        return cls.of(run_dir.parent.parent, run_dir.name)

    @cached_property
    def run_dir(self) -> Path:
        return self.root / RUNS_DIR / str(self.run_id)

    @property
    def run_record(self) -> Path:
        return self.run_dir / RUN_RECORD

    @property
    def inputs_dir(self) -> Path:
        return self.run_dir / INPUTS_DIR

    def input_file(self, *parts: str) -> Path:
        """A snapshotted input under ``inputs/`` (nested names allowed, each one plain component)."""
        if not parts:
            raise InvalidInputError("an input file needs a name", code="invalid_path_component", key_path=("input",))
        return self.inputs_dir.joinpath(*(check_component(part, "input") for part in parts))

    @property
    def inputs_manifest(self) -> Path:
        return self.inputs_dir / MANIFEST

    @property
    def plan_record(self) -> Path:
        return self.run_dir / PLAN_RECORD

    @property
    def submissions_dir(self) -> Path:
        return self.run_dir / SUBMISSIONS_DIR

    def submission_record(self, sequence: int) -> Path:
        return self.submissions_dir / f"{_index(sequence, 'sequence', minimum=1):04d}.json"

    @cached_property
    def shards_dir(self) -> Path:
        return self.run_dir / SHARDS_DIR

    def shard_dir(self, shard: int) -> Path:
        return self.shards_dir / format_shard(shard)

    def attempts_dir(self, shard: int) -> Path:
        return self.shard_dir(shard) / ATTEMPTS_DIR

    def attempt_dir(self, shard: int, attempt: int) -> Path:
        # one path parse instead of three joins: readers call this for every attempt of every shard
        return Path(f"{self.shards_dir}/{format_shard(shard)}/{ATTEMPTS_DIR}/{format_attempt(attempt)}")

    def claim(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / CLAIM_FILE

    def attempt_record(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / ATTEMPT_RECORD

    def heartbeat(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / HEARTBEAT_RECORD

    def progress(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / PROGRESS_RECORD

    def requests(self, shard: int, attempt: int) -> Path:
        """What the client worker's routers saw of the requests (``RequestEvidence``; replaced by the worker)."""
        return self.attempt_dir(shard, attempt) / REQUESTS_RECORD

    def client_error(self, shard: int, attempt: int) -> Path:
        """Why the client worker failed (``ClientErrorRecord``; written once by the worker)."""
        return self.attempt_dir(shard, attempt) / CLIENT_ERROR_RECORD

    def logs_dir(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / LOGS_DIR

    def log_file(self, shard: int, attempt: int, step: str) -> Path:
        """The log of one step (``supervisor``, ``server-<alias>-<replica>``, ``client``...)."""
        return self.logs_dir(shard, attempt) / f"{check_component(step, 'log step')}.log"

    def worker_home(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / WORKER_HOME_DIR

    def host_artifacts(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / HOST_ARTIFACTS_DIR

    def output_dir(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / OUTPUT_DIR

    def output_part(self, shard: int, attempt: int, part: int) -> Path:
        return self.output_dir(shard, attempt) / f"part-{_index(part, 'part', minimum=0):0{PART_WIDTH}d}.parquet"

    def output_manifest(self, shard: int, attempt: int) -> Path:
        return self.output_dir(shard, attempt) / MANIFEST

    def status(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / STATUS_RECORD

    def endpoints(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / ENDPOINTS_RECORD

    def server_metrics(self, shard: int, attempt: int) -> Path:
        """What the replicas' ``/metrics`` said while the client ran (``ServerSamplesRecord``; the supervisor)."""
        return self.attempt_dir(shard, attempt) / SERVER_METRICS_RECORD

    def ports_dir(self, shard: int, attempt: int) -> Path:
        return self.attempt_dir(shard, attempt) / PORTS_DIR

    @property
    def observations_dir(self) -> Path:
        """Appended scheduler observations of the run (``observations/NNNN.json``; many writers)."""
        return self.run_dir / OBSERVATIONS_DIR

    @property
    def retries_dir(self) -> Path:
        """Retry intents (``retries/NNNN.json``, NNNN = the generation; write-once) and their resume claims."""
        return self.run_dir / RETRIES_DIR

    def retry_intent(self, generation: int) -> Path:
        return self.retries_dir / f"{_index(generation, 'generation', minimum=1):04d}.json"

    @property
    def set_aside_dir(self) -> Path:
        """Damaged parts retries set aside, by generation: ``set-aside/NNNN/shards/.../output/<part>`` (never read
        as output, never deleted by the product)."""
        return self.run_dir / SET_ASIDE_DIR

    def set_aside_path(self, generation: int, part_path: str) -> str:
        """Where retry generation ``generation`` puts the part at ``part_path`` (both relative to the run dir)."""
        return f"{SET_ASIDE_DIR}/{_index(generation, 'generation', minimum=1):04d}/{part_path}"

    def resume_claim(self, generation: int, resume: int) -> Path:
        """The ``resume``-th takeover of generation ``generation``'s intent (``retries/NNNN.resume-K``)."""
        return (
            self.retries_dir
            / f"{_index(generation, 'generation', minimum=1):04d}.resume-{_index(resume, 'resume', minimum=1)}"
        )

    @property
    def cancellations_dir(self) -> Path:
        """Appended cancellation records (``cancellations/NNNN.json``)."""
        return self.run_dir / CANCELLATIONS_DIR

    def batch_log(self, job_name: str, array_task: int, stream: str) -> Path:
        """Slurm's own stdout/stderr of one array task (``sbatch --output/--error`` as the planner binds them)."""
        return self.run_dir / f"slurm-{check_component(job_name, 'job name')}_{array_task}.{stream}"

    @property
    def merge_dir(self) -> Path:
        return self.run_dir / MERGE_DIR

    @property
    def benchmark_record(self) -> Path:
        return self.run_dir / BENCHMARK_RECORD


def submission_binding(layout: RunLayout) -> SubmissionBinding:
    """How the planner names the run's jobs (``dd-<run id>-c<chunk>``) and where their batch logs go."""
    run_id = str(layout.run_id)
    return SubmissionBinding(run_id=run_id, run_dir=str(layout.run_dir), job_name_prefix=f"{JOB_NAME_PREFIX}{run_id}")


def _index(value: int, what: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(
            f"{what} number {value!r} is invalid",
            code="invalid_index",
            key_path=(what,),
            hint=f"use an integer >= {minimum}",
        )
    return value


def _parse_number(name: str, width: int, *, minimum: int) -> int | None:
    if not name.isascii() or not name.isdigit():
        return None
    number = int(name)
    if number < minimum or f"{number:0{width}d}" != name:
        return None
    return number


def _invalid_run_id(text: object) -> InvalidInputError:
    return InvalidInputError(
        f"{text!r} is not a run id",
        code="invalid_run_id",
        key_path=("run_id",),
        hint="a run id looks like '<run name>-20260101T120000Z-0a1b2c'",
    )
