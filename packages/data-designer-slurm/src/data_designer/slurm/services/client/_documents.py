"""The files a user would have written, made from Python values: a Data Designer config, a run file, a benchmark file.

The client never validates or compiles anything itself: it writes the documents ``execute`` and ``benchmark run``
read (the run file naming the config by its absolute path, as the run-file docs show), and those services validate
them exactly as they validate a file a user wrote, with the same errors, located in the file written here.

The texts are deterministic (keys in the order given, the builder's own YAML), so equal inputs give equal files,
and the files go where :class:`ClientFiles` puts them: content-addressed, never overwritten with other bytes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from data_designer.slurm.contracts import InvalidInputError, SlurmExtensionError
from data_designer.slurm.runtime.store import read_bounded, write_text_atomic

CLIENT_DIR = ("data-designer-slurm", "python")
"""Under ``$XDG_CACHE_HOME`` (else ``~/.cache``): the client's directory of written inputs."""
_FILE_MODE = 0o660
"""Group-readable at most: ``execute`` snapshots a file never more readable than its source, and the workspace's
own mode applies below that (a private workspace keeps 0600)."""


def plain(value: Any) -> Any:
    """``value`` as plain YAML data: a contracts model as what was set on it, mappings and sequences element-wise."""
    if isinstance(value, BaseModel):
        return plain(value.model_dump(mode="json", exclude_unset=True))
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [plain(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def yaml_text(document: Mapping[str, Any]) -> str:
    """A document as YAML, keys in the order given (what a user writes, and stable for equal inputs)."""
    return yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, default_flow_style=False)


@dataclass(frozen=True)
class ConfigSource:
    """A Data Designer config to run: a file given by path (used as it is), or the text of one to write."""

    path: Path | None = None
    text: str | None = None


def config_source(config: Any, *, operation: str) -> ConfigSource:
    """The config behind ``config``: the host's ``DataDesignerConfigBuilder``, a built ``DataDesignerConfig`` or
    ``BuilderConfig``, a mapping (a config document), or the path of a config file (YAML or JSON)."""
    if isinstance(config, str | os.PathLike):
        return ConfigSource(path=Path(config).expanduser().absolute())
    if isinstance(config, Mapping):
        return ConfigSource(text=yaml_text(plain(config)))
    from data_designer.config.config_builder import BuilderConfig, DataDesignerConfigBuilder
    from data_designer.config.data_designer_config import DataDesignerConfig

    if isinstance(config, DataDesignerConfigBuilder):
        return ConfigSource(text=_builder_text(config, operation=operation))
    if isinstance(config, DataDesignerConfig):
        return ConfigSource(text=_text_of(BuilderConfig(data_designer=config)))
    if isinstance(config, BuilderConfig):
        return ConfigSource(text=_text_of(config))
    raise InvalidInputError(
        f"a {type(config).__name__} is not a Data Designer config",
        code="invalid_config_source",
        operation=operation,
        key_path=("config_builder",),
        hint="pass a DataDesignerConfigBuilder, a DataDesignerConfig, a config mapping or the path of a config file",
    )


def _builder_text(builder: Any, *, operation: str) -> str:
    """What ``builder.write_config(path.yaml)`` writes (its own check of an unserializable seed included)."""
    from data_designer.config.errors import BuilderSerializationError
    from data_designer.config.seed_source_dataframe import DataFrameSeedSource

    seed = builder.get_seed_config()
    if seed is not None and isinstance(seed.source, DataFrameSeedSource):
        raise InvalidInputError(
            "a DataFrame seed dataset cannot be sent to a cluster: it exists only in this process",
            code="invalid_config_source",
            operation=operation,
            key_path=("config_builder", "seed_config"),
            hint="write the DataFrame to a file and seed from it: LocalFileSeedSource.from_dataframe(df, '/path.parquet')",
        )
    try:
        return _text_of(builder.get_builder_config())
    except BuilderSerializationError as exc:  # pragma: no cover - the host's own refusal, already checked above
        raise InvalidInputError(str(exc), code="invalid_config_source", operation=operation) from exc


def _text_of(builder_config: Any) -> str:
    text = builder_config.to_yaml(indent=2)
    assert isinstance(text, str)
    return text


def run_document(
    *,
    name: str,
    config_file: Path,
    records: int,
    shards: int | None,
    records_per_shard: int | None,
    deployments: Mapping[str, Any] | None,
    external: Mapping[str, Any] | None,
    client: Any,
    submission: Any,
    seed: int | None,
) -> dict[str, Any]:
    """The run file ``execute`` would read for these settings (only what was given: the defaults stay the
    planner's, spelled out in the plan as for any run file)."""
    sharding: dict[str, Any] = {}
    if shards is not None:
        sharding["shards"] = shards
    if records_per_shard is not None:
        sharding["records_per_shard"] = records_per_shard
    document: dict[str, Any] = {
        "schema_version": 1,
        "name": name,
        "data_designer": {"config": str(config_file)},
        "records": records,
        "sharding": sharding,
    }
    if seed is not None:
        document["seed"] = seed
    for key, value in (("deployments", deployments), ("external", external), ("client", client)):
        if value is not None:
            document[key] = plain(value)
    if submission is not None:
        document["submission"] = plain(submission)
    return document


def benchmark_document(bench: Any) -> dict[str, Any]:
    """A benchmark file's document from a contracts ``BenchmarkSpec`` or a mapping; a ``base`` given as a run handle
    (anything with a ``run_file``) names that run's run file."""
    document = plain(bench)
    if not isinstance(document, dict):
        raise InvalidInputError(
            f"a {type(bench).__name__} is not a benchmark",
            code="invalid_benchmark_source",
            operation="benchmark.load",
            hint="pass a BenchmarkSpec, a mapping of a benchmark file's keys, or the path of a benchmark file",
        )
    base = bench.get("base") if isinstance(bench, Mapping) else None
    run_file = getattr(base, "run_file", None)
    if isinstance(run_file, str):
        document["base"] = {"run": run_file}
    return document


class ClientFiles:
    """Where the client writes the files it makes: ``<root>/<kind>/<sha256[:16] of the text>/<name>``.

    Content-addressed, so the same config or run gives the same path (and the same run file bytes) every time, a
    run's record names a file that still holds what was submitted, and nothing is ever overwritten with other
    bytes (a file found with other bytes is replaced by the right ones). Written atomically, group-readable at
    most, in private directories.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of(cls, environ: Mapping[str, str] | None, root: str | Path | None = None) -> ClientFiles:
        """``root``, else ``$XDG_CACHE_HOME/data-designer-slurm/python`` (else under ``~/.cache``)."""
        if root is not None:
            return cls(Path(root).expanduser().absolute())
        env = os.environ if environ is None else environ
        cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
        return cls(Path(cache).expanduser().absolute().joinpath(*CLIENT_DIR))

    def write(self, kind: str, name: str, text: str, *, operation: str) -> Path:
        """The path of a file named ``name`` holding ``text`` (written unless it already holds exactly that)."""
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = self.root / kind / digest / name
        data = text.encode("utf-8")
        try:
            if read_bounded(path, operation=operation) == data:
                return path
        except SlurmExtensionError:  # missing or unreadable: written below
            pass
        write_text_atomic(path, text, overwrite=True, operation=operation, mode=_FILE_MODE)
        return path
