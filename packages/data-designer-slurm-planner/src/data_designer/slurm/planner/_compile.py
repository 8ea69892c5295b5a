"""Compile a run against a cluster profile into an :class:`ExecutionPlan` (pure, deterministic, offline).

:func:`compile` resolves every default (the plan's ``run`` spells them out, profile defaults
included), splits records into shards, packs replicas onto nodes, renders every server and
client argv and the batch script, and chunks the shards into array jobs. Every problem is
collected and raised at once as one :class:`InvalidInputError`. What cannot be known offline
(registered images without a registry, ``gpus_per_node: auto`` without probed facts) becomes an
:class:`Unresolved` entry, never a guess.

Every argv in a plan is a template bound inside the allocation (see ``_argv``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.version import Version

from data_designer.slurm.contracts import (
    AllocationPlan,
    ClientPlan,
    ClusterFacts,
    ClusterProfile,
    CommandDeployment,
    ConfigSummary,
    EndpointPlan,
    ExecutionPlan,
    ImagePlan,
    ImageRecord,
    InvalidInputError,
    KeyPath,
    PlanWarning,
    Problem,
    ReplicaPlan,
    RunSpec,
    ShardPlan,
    SubmissionLayout,
    Unresolved,
    VllmDeployment,
    excerpt,
    format_key_path,
    format_time_limit,
    parse_time_limit,
)
from data_designer.slurm.planner._argv import client_argv, command_argv, vllm_argv
from data_designer.slurm.planner._dd_config import read_dd_config
from data_designer.slurm.planner._digest import MAX_RUN_SEED, canonical_json_data, derive_sampler_seed
from data_designer.slurm.planner._document import Document
from data_designer.slurm.planner._images import Installation, client_problems, role_warning, serving_problems
from data_designer.slurm.planner._layout import PackingError, chunk_shards, pack_replicas, shard_ranges
from data_designer.slurm.planner._limits import run_limit_problems
from data_designer.slurm.planner._model_names import model_mismatches, served_model
from data_designer.slurm.planner._sbatch import ScriptRequest, render_script, slurm_path_problems
from data_designer.slurm.planner._sbatch_options import resolve_sbatch_options
from data_designer.slurm.planner._vllm import SUPPORTED_VLLM, is_supported_vllm_version, serve_flags_version_for

SIGNAL_SLACK_S = 60
"""Slurm may deliver the warning signal up to this much earlier than asked."""

MB_PER_GB = 1000
"""The run file's ``*_gb`` memory in Slurm's MB (``--mem``): decimal, so ``memory_gb: 4`` fits a 4000 MB node."""


class _Problems:
    """Problems collected while compiling; raised together at the end."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, code: str, key_path: KeyPath, message: str, hint: str) -> None:
        self.items.append(Problem(code=code, key_path=key_path, message=message, hint=hint))


def compile(
    run: RunSpec,
    profile: ClusterProfile,
    *,
    cluster: str,
    config: Document,
    facts: ClusterFacts | None = None,
    images: Iterable[ImageRecord] | None = None,
    installation: Installation | None = None,
) -> ExecutionPlan:
    """The execution plan of ``run`` on ``profile`` (cluster ``cluster``) with its Data Designer ``config`` document.

    ``config`` comes from :func:`resolve_config` (the inline mapping, or the text of the config file).

    ``facts`` are what the runtime probed (GPUs per node, MaxArraySize); ``images`` the registry, or None
    when it cannot be read: every image named from the registry is then unresolved. A registered image's
    inspection is checked against its use (``_images``): a client image against ``installation``, the
    submitting installation (default: this version, any ``data-designer``).
    """
    over = run_limit_problems(run)  # before anything proportional to a count is built
    if over:
        raise InvalidInputError.from_problems(over, operation="plan.compile")
    facts = facts or ClusterFacts()
    registry = None if images is None else {image.name: image for image in images}
    problems = _Problems()
    unresolved: list[Unresolved] = []
    warnings: list[PlanWarning] = []

    summary: ConfigSummary | None = None
    try:
        summary = read_dd_config(config, operation="plan.compile")
    except InvalidInputError as exc:
        problems.items.extend(exc.problems)

    needs_gpus = any(_replica_gpus(d) for d in run.deployments.values())
    gpus_per_node = _gpus_per_node(profile, facts, unresolved, required=needs_gpus)
    # Without GPU work the node size does not matter for packing: every replica shares the first node.
    packing_gpus = gpus_per_node if gpus_per_node is not None or needs_gpus else 1
    time_limit_s = _time_limit_s(run, profile, problems)
    # The check bind_submission applies to the run directory, here too: a dry run refuses what execute refuses.
    problems.items.extend(
        slurm_path_problems(profile.workspace_root, what="workspace root", key_path=("workspace_root",))
    )
    shards = _shards(run, problems)
    aliases = _check_aliases(run, summary, len(shards), config.file, problems, warnings)
    warnings.extend(model_mismatches(run, summary))

    resolver = _Images(profile, registry, installation or Installation(), problems, unresolved, warnings)
    replicas = _replicas(run, profile, packing_gpus, resolver, problems)
    launcher, compute_image = _launcher(profile, resolver, problems)
    client = _client(run, profile, aliases, summary, replicas, compute_image, resolver, problems)

    # Authored sbatch options as sbatch reads them (abbreviations and short letters resolved), never a reserved one.
    authored = (
        resolve_sbatch_options(profile.sbatch_options, path=("clusters", cluster, "sbatch_options")),
        resolve_sbatch_options(run.submission.sbatch_options, path=("submission", "sbatch_options")),
    )
    problems.items.extend(problem for options in authored for problem in options.problems)

    if problems.items or summary is None:
        # every replica of a deployment checks its engine args: one problem is reported once, in the order found
        raise InvalidInputError.from_problems(list(dict.fromkeys(problems.items)), operation="plan.compile")

    partition = run.submission.partition or profile.partitions.gpu
    account = run.submission.account if run.submission.account is not None else profile.account
    time_limit = format_time_limit(time_limit_s)
    whole_node = profile.gpu_request == "whole_node"
    exclusive = run.submission.exclusive or whole_node
    nodes, cpus_per_node, memory_mb_per_node, gres = _shape(replicas, client, packing_gpus)
    allocation = AllocationPlan(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        gpus=sum(r.gpus for r in replicas),
        cpus_per_node=cpus_per_node,
        memory_mb_per_node=memory_mb_per_node,
        partition=partition,
        account=account,
        time_limit=time_limit,
        time_limit_s=time_limit_s,
        exclusive=exclusive,
        requeue=run.submission.requeue,
        warning_lead_s=run.submission.warning_lead_s,
        drain_grace_s=run.submission.drain_grace_s,
        workspace_sharing=profile.workspace_sharing,
        replicas=tuple(replicas),
        client=client,
    )

    script: str | None = None
    extra_args: tuple[str, ...] = ()
    if nodes is not None and cpus_per_node is not None and memory_mb_per_node is not None and launcher is not None:
        rendered = render_script(
            ScriptRequest(
                nodes=nodes,
                cpus_per_node=cpus_per_node,
                memory_mb_per_node=memory_mb_per_node,
                gres_gpus_per_node=0 if whole_node else gres,
                exclusive=exclusive,
                time_limit=time_limit,
                partition=partition,
                account=account,
                warning_lead_s=run.submission.warning_lead_s,
                requeue=run.submission.requeue,
                launcher=launcher,
            )
        )
        script, extra_args = rendered.script, rendered.sbatch_args
    submission = SubmissionLayout(
        script=script,
        sbatch_args=(*(option for options in authored for option in options.options), *extra_args),
        environment=job_environment(profile, replicas, client),
        chunks=chunk_shards(
            len(shards), max_array_size=facts.max_array_size, throttle=run.submission.max_concurrent_shards
        ),
    )

    gpu_hours: float | None = None
    held_per_node = gpus_per_node if exclusive else gres
    if nodes is not None and held_per_node is not None:
        gpu_hours = round(len(shards) * nodes * held_per_node * time_limit_s / 3600, 6)

    body: dict[str, Any] = {
        "run": _resolved_run(run, config.data, aliases, partition, account, time_limit),
        "cluster": cluster,
        "config_digest": summary.digest,
        "shards": tuple(shards),
        "allocation": allocation,
        "submission": submission,
        "gpu_hours_upper_bound": gpu_hours,
        "unresolved": tuple(unresolved),
        "warnings": tuple(warnings),
    }
    draft = ExecutionPlan(digest="", **body)
    return draft.model_copy(update={"digest": plan_digest(draft)})


def plan_digest(plan: ExecutionPlan) -> str:
    """sha256 of the canonical JSON of ``plan`` without its digest field."""
    return hashlib.sha256(canonical_json_data(plan.model_dump(mode="json", exclude={"digest"}))).hexdigest()


def _check_aliases(
    run: RunSpec,
    summary: ConfigSummary | None,
    shards: int,
    config_file: str,
    problems: _Problems,
    warnings: list[PlanWarning],
) -> list[str]:
    """Every alias the client talks to (config order, then served-but-unused ones); problems for unserved ones."""
    served = set(run.deployments) | set(run.external)
    used = [a.alias for a in summary.used_aliases] if summary is not None else []
    if summary is not None:
        for use in summary.used_aliases:
            if use.alias not in served:
                who = ", ".join(use.columns) or "the profiler"
                problems.add(
                    "alias_not_served",
                    ("deployments",),
                    f"model alias {excerpt(use.alias)} (used by {who}) is neither deployed nor external",
                    f"add a deployment or an external endpoint named {excerpt(use.alias)}",
                )
        blocking = summary.blocking_findings(shards=shards)
        problems.items.extend(f.to_problem(config_file) for f in blocking)
        for finding in summary.findings:
            if finding not in blocking and (shards > 1 or not finding.sharded_only):
                where = format_key_path(finding.key_path) if finding.key_path else None
                warnings.append(PlanWarning(code=finding.code, key_path=where, message=finding.message))
    for alias in [*run.deployments, *run.external]:
        if summary is not None and alias not in used:
            section = "deployments" if alias in run.deployments else "external"
            warnings.append(
                PlanWarning(
                    code="alias_unused",
                    key_path=f"{section}.{alias}",
                    message=f"alias {excerpt(alias)} is served but no column or profiler of the Data Designer config uses it",
                )
            )
    for alias in run.client.concurrency:
        if alias not in served:
            problems.add(
                "unknown_alias",
                ("client", "concurrency", alias),
                f"concurrency is set for {alias!r}, which is neither deployed nor external",
                f"use one of: {', '.join(sorted(served)) or '(no aliases)'}",
            )
    return [*dict.fromkeys([*(a for a in used if a in served), *run.deployments, *run.external])]


def _replica_gpus(deployment: VllmDeployment | CommandDeployment) -> int:
    if isinstance(deployment, VllmDeployment):
        return deployment.tensor_parallel * deployment.pipeline_parallel
    return deployment.gpus_per_replica


def _gpus_per_node(
    profile: ClusterProfile, facts: ClusterFacts, unresolved: list[Unresolved], *, required: bool
) -> int | None:
    """GPUs per node from the profile, else the probed facts; unresolved (when GPU work needs it) otherwise."""
    if isinstance(profile.gpus_per_node, int):
        return profile.gpus_per_node
    if facts.gpus_per_node is not None:
        return facts.gpus_per_node
    if not required:
        return None
    unresolved.append(
        Unresolved(
            what="gpus_per_node",
            key_path="gpus_per_node",
            detail="the profile says 'auto' and the cluster was not probed",
            hint="run 'data-designer slurm profile validate --probe' or set gpus_per_node in the profile",
        )
    )
    return None


def _time_limit_s(run: RunSpec, profile: ClusterProfile, problems: _Problems) -> int:
    """The time limit in seconds as Slurm enforces it (whole minutes), checked against the run's budgets."""
    authored = run.submission.time_limit or profile.default_time_limit
    seconds = parse_time_limit(authored)
    assert seconds is not None  # TimeLimit values are validated when loaded
    seconds = -(-seconds // 60) * 60
    startup = max((d.startup_timeout_s for d in run.deployments.values()), default=0)
    needed = startup + run.submission.drain_grace_s + run.submission.warning_lead_s + SIGNAL_SLACK_S
    if seconds < needed:
        problems.add(
            "time_limit_too_short",
            ("submission", "time_limit"),
            f"time limit {authored!r} ({seconds} s) is shorter than startup budget {startup} s + drain grace "
            f"{run.submission.drain_grace_s} s + warning lead {run.submission.warning_lead_s} s + "
            f"{SIGNAL_SLACK_S} s early-signal slack = {needed} s",
            f"set submission.time_limit to at least {format_time_limit(needed)}, or lower the budgets",
        )
    return seconds


def _shards(run: RunSpec, problems: _Problems) -> list[ShardPlan]:
    if run.seed > MAX_RUN_SEED:
        problems.add(
            "seed_range", ("seed",), f"seed {run.seed} is too large", f"use an integer from 0 to {MAX_RUN_SEED}"
        )
        return []
    try:
        ranges = shard_ranges(run.records, shards=run.sharding.shards, records_per_shard=run.sharding.records_per_shard)
    except ValueError as exc:
        problems.add("empty_shard", ("sharding", "shards"), str(exc), f"use at most {run.records} shards")
        return []
    return [
        ShardPlan(shard=index, start=r.start, stop=r.stop, seed=derive_sampler_seed(run.seed, index))
        for index, r in enumerate(ranges)
    ]


def job_environment(profile: ClusterProfile, replicas: Sequence[ReplicaPlan], client: ClientPlan) -> tuple[str, ...]:
    """Names of every variable the job takes from the submitting environment, in first-named order."""
    names = [*profile.environment, *(n for r in replicas for n in r.pass_environment), *client.pass_environment]
    return tuple(dict.fromkeys(names))


def _environment(profile: ClusterProfile) -> dict[str, str]:
    env: dict[str, str] = {}
    if profile.huggingface.hf_home is not None:
        env["HF_HOME"] = profile.huggingface.hf_home
    if profile.huggingface.offline:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def _replicas(
    run: RunSpec,
    profile: ClusterProfile,
    gpus_per_node: int | None,
    images: _Images,
    problems: _Problems,
) -> list[ReplicaPlan]:
    requests: list[tuple[str, int, int]] = []  # (alias, replica, gpus)
    for alias, deployment in run.deployments.items():
        gpus = _replica_gpus(deployment)
        requests.extend((alias, replica, gpus) for replica in range(deployment.replicas))
    placements = None
    if gpus_per_node is not None:
        try:
            placements = pack_replicas([gpus for _, _, gpus in requests], gpus_per_node).placements
        except PackingError as exc:
            alias = requests[exc.index][0]
            field = "tensor_parallel" if isinstance(run.deployments[alias], VllmDeployment) else "gpus_per_replica"
            problems.add(
                "replica_shape",
                ("deployments", alias, field),
                f"a replica of {alias!r} needs {exc}",
                f"use at most {gpus_per_node} GPUs per replica, or a multiple of {gpus_per_node}",
            )
            return []
    deployment_images = {
        alias: images.resolve(d.image, ("deployments", alias, "image"), serving=(alias, isinstance(d, VllmDeployment)))
        for alias, d in run.deployments.items()
    }
    base_env = _environment(profile)
    out: list[ReplicaPlan] = []
    for position, (alias, replica, gpus) in enumerate(requests):
        deployment = run.deployments[alias]
        placement = placements[position] if placements is not None else None
        remote = placement is None or placement.node_indices != (0,)
        rank_argv: tuple[tuple[str, ...], ...] = ()
        if isinstance(deployment, VllmDeployment):
            nodes = len(placement.node_indices) if placement is not None else 1
            version = images.vllm_flags_version(alias, deployment, problems)
            argv, rank_argv = vllm_argv(alias, deployment, nodes=nodes, version=version, problems=problems.items)
            cpus, health = deployment.cpus_per_replica, "/health"
        else:
            argv = command_argv(alias, deployment, gpus=gpus, problems=problems.items)
            cpus, health = deployment.cpus_per_replica, deployment.health_path
        out.append(
            ReplicaPlan(
                alias=alias,
                replica=replica,
                engine=deployment.engine,
                served_name=served_model(deployment, alias),
                node_indices=placement.node_indices if placement is not None else None,
                gpus_per_node=placement.gpus_per_node if placement is not None else min(gpus, gpus_per_node or gpus),
                gpu_indices=placement.gpu_indices if placement is not None else None,
                gpus=gpus,
                cpus=cpus,
                memory_mb=deployment.memory_gb_per_replica * MB_PER_GB,
                argv=argv,
                rank_argv=rank_argv,
                environment=dict(base_env),
                pass_environment=tuple(dict.fromkeys([*profile.environment, *deployment.environment])),
                bind="all" if remote else "loopback",
                requires_api_key=True,
                health_path=health,
                startup_timeout_s=deployment.startup_timeout_s,
                image=deployment_images[alias],
            )
        )
    return out


class _Images:
    """Resolves image references against the registry and checks each registered image against its use."""

    def __init__(
        self,
        profile: ClusterProfile,
        registry: Mapping[str, ImageRecord] | None,
        installation: Installation,
        problems: _Problems,
        unresolved: list[Unresolved],
        warnings: list[PlanWarning],
    ) -> None:
        self.profile = profile
        self.registry = registry
        self.installation = installation
        self.problems = problems
        self.unresolved = unresolved
        self.warnings = warnings

    def vllm_flags_version(self, alias: str, deployment: VllmDeployment, problems: _Problems) -> str | None:
        """The release whose ``vllm serve`` flags the deployment's engine args are checked against (a key of the
        flag data): the registered image's inspected vLLM, else the stated ``vllm_version``; None: neither is known
        (then the flags every supported release accepts). A stated version that is unsupported, or that disagrees
        with the image's, is a problem."""
        key_path: KeyPath = ("deployments", alias, "vllm_version")
        stated = deployment.vllm_version
        if stated is not None and not is_supported_vllm_version(stated):
            problems.add(
                "vllm_version_unsupported",
                key_path,
                f"vllm_version {stated} is not a supported vLLM release ({SUPPORTED_VLLM})",
                f"install a vLLM release in {SUPPORTED_VLLM} on the compute nodes and state it, or remove the key",
            )
            stated = None
        inspected = self._inspected_vllm(deployment.image)
        if stated is not None and inspected is not None and _release_line(stated) != _release_line(inspected):
            problems.add(
                "vllm_version_mismatch",
                key_path,
                f"vllm_version {stated} disagrees with the vLLM the image {excerpt(str(deployment.image))} holds "
                f"({inspected})",
                "remove vllm_version (the image's vLLM is used), or name an image that holds that release",
            )
        installed = inspected if inspected is not None and is_supported_vllm_version(inspected) else stated
        return serve_flags_version_for(installed) if installed is not None else None

    def _inspected_vllm(self, reference: str | None) -> str | None:
        if reference is None or reference.startswith("/") or self.registry is None:
            return None
        record = self.registry.get(reference)
        if record is None or record.versions is None:
            return None
        return record.versions.get("vllm")

    def resolve(
        self, reference: str | None, key_path: KeyPath, *, serving: tuple[str, bool] | None = None
    ) -> ImagePlan | None:
        """The image ``reference`` names at ``key_path``; ``serving`` is (alias, is a vllm deployment) for a
        deployment's image, None for the client's or the compute image."""
        if reference is None:
            return None
        profile = self.profile
        if profile.container_runtime == "none":
            self.problems.add(
                "no_container_runtime",
                key_path,
                f"image {excerpt(reference)} is set but the cluster profile's container_runtime is 'none'",
                "remove the image, or set container_runtime to 'pyxis' or 'apptainer' in the profile",
            )
            return None
        runtime = profile.container_runtime
        if reference.startswith("/"):
            return ImagePlan(reference=reference, path=reference, runtime=runtime)
        record = self.registry.get(reference) if self.registry is not None else None
        if record is None:
            self.unresolved.append(
                Unresolved(
                    what="image",
                    key_path=format_key_path(key_path),
                    detail=f"image {reference!r} is named, and the image registry "
                    + ("was not read" if self.registry is None else "has no image of that name"),
                    hint=f"register it with 'data-designer slurm image add SOURCE --name {reference}', "
                    "or give an absolute path",
                )
            )
            return ImagePlan(reference=reference, runtime=runtime)
        if serving is not None:
            found = serving_problems(record, alias=serving[0], vllm=serving[1], runtime=runtime, key_path=key_path)
        else:
            found = client_problems(record, installation=self.installation, key_path=key_path)
        self.problems.items.extend(found)
        warning = role_warning(record, "serving" if serving is not None else "client", key_path)
        if warning is not None:
            self.warnings.append(warning)
        return ImagePlan(reference=reference, path=record.path, digest=record.digest, runtime=runtime)


def _release_line(version: str) -> tuple[int, ...]:
    """``0.33.1+cu129`` -> ``(0, 33)``: releases of one minor line share their ``vllm serve`` flags."""
    return Version(version).release[:2]


def _launcher(
    profile: ClusterProfile,
    images: _Images,
    problems: _Problems,
) -> tuple[tuple[str, ...] | None, ImagePlan | None]:
    """The words the batch script execs before ``-m <supervisor>`` (None while the compute image is unresolved),
    and the compute image, if the profile names one."""
    python = profile.compute_python
    if python.interpreter is not None:
        return (python.interpreter,), None
    assert python.image is not None
    image = images.resolve(python.image, ("compute_python", "image"))
    if image is not None and profile.container_runtime != "apptainer":
        problems.add(
            "compute_image_runtime",
            ("compute_python", "image"),
            f"the supervisor can start in an image only with container_runtime 'apptainer' "
            f"(the profile says {profile.container_runtime!r})",
            "set compute_python.interpreter to a Python with data-designer-slurm installed on the compute nodes",
        )
        return None, image
    if image is None or image.path is None:
        return None, image
    return ("apptainer", "exec", image.path, "python3"), image


def _client(
    run: RunSpec,
    profile: ClusterProfile,
    aliases: Sequence[str],
    summary: ConfigSummary | None,
    replicas: Sequence[ReplicaPlan],
    compute_image: ImagePlan | None,
    images: _Images,
    problems: _Problems,
) -> ClientPlan:
    """The client worker: in the client image if set, else where the supervisor runs (interpreter or compute image)."""
    settings = run.client
    image = compute_image
    if settings.image is not None:
        image = images.resolve(settings.image, ("client", "image"))
    in_image = settings.image is not None or profile.compute_python.image is not None
    python = "python3" if in_image else (profile.compute_python.interpreter or "python3")
    endpoints = []
    for alias in aliases:
        concurrency = settings.concurrency.get(alias, settings.default_concurrency)
        if alias in run.deployments:
            endpoints.append(
                EndpointPlan(
                    alias=alias,
                    kind="deployed",
                    model=served_model(run.deployments[alias], alias),
                    replicas=tuple(i for i, r in enumerate(replicas) if r.alias == alias),
                    concurrency=concurrency,
                )
            )
        elif alias in run.external:
            external = run.external[alias]
            use = summary.alias(alias) if summary is not None else None
            model = external.model or (use.model if use is not None else None)
            if model is None and summary is not None:
                problems.add(
                    "external_model",
                    ("external", alias, "model"),
                    f"the Data Designer config names no model for alias {excerpt(alias)}",
                    "set the model name the endpoint serves",
                )
                continue
            if model is None:
                continue
            endpoints.append(
                EndpointPlan(
                    alias=alias,
                    kind="external",
                    model=model,
                    endpoint=external.endpoint,
                    api_key_env=external.api_key_env,
                    concurrency=concurrency,
                )
            )
    keys = [e.api_key_env for e in endpoints if e.api_key_env is not None]
    return ClientPlan(
        argv=client_argv(python),
        batch_size=settings.batch_size,
        cpus=settings.cpus,
        memory_gb=settings.memory_gb,
        memory_mb=settings.memory_gb * MB_PER_GB,
        endpoints=tuple(endpoints),
        pass_environment=tuple(dict.fromkeys([*profile.environment, *keys])),
        image=image,
    )


def _shape(
    replicas: Sequence[ReplicaPlan], client: ClientPlan, gpus_per_node: int | None
) -> tuple[int | None, int | None, int | None, int]:
    """(nodes, CPUs per node, memory per node in MB, GPUs requested per node) of the allocation; counts None while
    GPUs/node are unknown.

    Each is the most any node holds (one task per node, so sbatch asks the same of every node): the client's on
    node 0 plus every replica's on each of its nodes."""
    if gpus_per_node is None:
        return None, None, None, 0
    cpus: dict[int, int] = {0: client.cpus}
    memory: dict[int, int] = {0: client.memory_mb}
    gpus: dict[int, int] = {0: 0}
    for replica in replicas:
        assert replica.node_indices is not None
        for node in replica.node_indices:
            cpus[node] = cpus.get(node, 0) + replica.cpus
            memory[node] = memory.get(node, 0) + replica.memory_mb
            gpus[node] = gpus.get(node, 0) + replica.gpus_per_node
    return len(cpus), max(cpus.values()), max(memory.values()), max(gpus.values())


def _resolved_run(
    run: RunSpec,
    config: Any,
    aliases: Sequence[str],
    partition: str,
    account: str | None,
    time_limit: str,
) -> RunSpec:
    """``run`` with every default spelled out and the config inline (the plan is self-contained)."""
    client = run.client.model_copy(
        update={
            "concurrency": {
                alias: run.client.concurrency.get(alias, run.client.default_concurrency) for alias in aliases
            }
        }
    )
    submission = run.submission.model_copy(
        update={"time_limit": time_limit, "partition": partition, "account": account}
    )
    source = run.data_designer.model_copy(update={"config": None, "inline": config})
    return run.model_copy(update={"data_designer": source, "client": client, "submission": submission})
