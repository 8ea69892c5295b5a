"""``load_analysis()``: the host's own dataset profiler over a run's merged records, computed once per merge.

The host's ``DataDesigner.create`` profiles the dataset it generated with ``DataDesignerDatasetProfiler`` over the
config's column configs and returns ``DatasetProfilerResults``; this does the same over the merged records (read by
``load_dataset``, without provenance columns) with the config the run's plan holds, and the run's record count as
the target. Column profilers that call a model (the judge-score profiler) are left out: the models are served inside
the run's allocations, not where this runs; every column statistic is computed.

The results are kept beside the merge (``store.keep_dataset_profile``: ``<merge>/dataset-profile.json``, write-once)
with the sha256 of the merge manifest they were computed from, and read back on the next call (from any process)
while that manifest is the same.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data_designer.slurm.contracts import ExecutionPlan, InternalError, MergeResult
from data_designer.slurm.planner import canonical_json
from data_designer.slurm.runtime.store import keep_dataset_profile, read_bounded, read_dataset_profile

_OPERATION = "analysis.profile"
PROFILE_SCHEMA = "data-designer-slurm/dataset-profile/1"


def dataset_profile(
    merge: MergeResult, plan: ExecutionPlan, load_frame: Callable[[], Any]
) -> Any:  # DatasetProfilerResults (the host's type; not imported at module level)
    """The profile of the merge ``merge`` describes: the kept one when it was computed from this manifest, else
    computed from ``load_frame()`` (the merged records) and kept."""
    if merge.merge_dir is None or merge.manifest is None:
        raise InternalError("the merge has no directory to profile", code="internal_error", operation=_OPERATION)
    directory = Path(merge.merge_dir)
    manifest_sha = hashlib.sha256(read_bounded(merge.manifest, operation=_OPERATION)).hexdigest()
    kept = _kept(directory, manifest_sha)
    if kept is not None:
        return kept
    results = profile_frame(load_frame(), plan)
    document = {
        "schema": PROFILE_SCHEMA,
        "run_id": merge.run_id,
        "plan_digest": plan.digest,
        "merge_manifest_sha256": manifest_sha,
        "profile": results.model_dump(mode="json"),
    }
    keep_dataset_profile(directory, canonical_json(document), operation=_OPERATION)
    return results


def profile_frame(frame: Any, plan: ExecutionPlan) -> Any:
    """``DataDesignerDatasetProfiler.profile_dataset`` as the host's ``create`` calls it, over ``frame``."""
    from data_designer.config.config_builder import DataDesignerConfigBuilder
    from data_designer.engine.analysis.dataset_profiler import DataDesignerDatasetProfiler, DatasetProfilerConfig
    from data_designer.engine.resources.resource_provider import ResourceProvider
    from data_designer.engine.storage.artifact_storage import ArtifactStorage

    inline = plan.run.data_designer.inline
    assert inline is not None  # a plan holds its config inline
    builder = DataDesignerConfigBuilder.from_config(dict(inline))
    with tempfile.TemporaryDirectory(prefix="dd-slurm-profile-") as scratch:  # the provider wants an artifact path
        provider = ResourceProvider(artifact_storage=ArtifactStorage(artifact_path=scratch))
        profiler = DataDesignerDatasetProfiler(
            config=DatasetProfilerConfig(column_configs=builder.get_column_configs(), column_profiler_configs=None),
            resource_provider=provider,
        )
        return profiler.profile_dataset(plan.run.records, frame)


def _kept(directory: Path, manifest_sha: str) -> Any:
    data = read_dataset_profile(directory, operation=_OPERATION)
    if data is None:
        return None
    try:
        document = json.loads(data)
        if document.get("schema") != PROFILE_SCHEMA or document.get("merge_manifest_sha256") != manifest_sha:
            return None
        return _results_of(document["profile"])
    except (ValueError, TypeError, KeyError, AttributeError):  # torn or of another version: computed again
        return None


def _results_of(data: Any) -> Any:
    """``DatasetProfilerResults`` from its JSON dump: the host writes a statistic it could not compute as ``"--"``
    but does not read that string back, so it is handed back as the host's ``MissingValue`` it stands for."""
    from data_designer.config.analysis.column_statistics import MissingValue
    from data_designer.config.analysis.dataset_profiler import DatasetProfilerResults

    def restore(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: restore(item) for key, item in value.items()}
        if isinstance(value, list):
            return [restore(item) for item in value]
        return MissingValue.CALCULATION_FAILED if value == MissingValue.CALCULATION_FAILED.value else value

    return DatasetProfilerResults.model_validate(restore(data))
