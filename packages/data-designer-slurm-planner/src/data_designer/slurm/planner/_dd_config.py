"""Read a Data Designer config as plain data: aliases, columns, seed dataset, digest, sharding findings.

The host is never imported: the config is the document ``DataDesignerConfigBuilder.write_config``
writes (``{data_designer: {...}, library_version}``, YAML or JSON) or the shorthand with the
``DataDesignerConfig`` keys at the top level, read by :func:`parse_document` or wrapped from an
inline mapping (``Document(file="<inline>", data=mapping)``). Only the structure the plan depends
on is checked here; unknown keys and values are left to the host, which validates the config with
its plugins installed in the runtime.

Aliases follow the host: a built-in LLM, embedding or image column calls its ``model_alias``
(``SingleColumnConfig.get_model_aliases``); a plugin column is read by its keys named
``model_alias``/``*_model_alias`` (a string) and ``model_aliases``/``*_model_aliases`` (a list);
a judge-score profiler calls its ``model_alias``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from data_designer.slurm.contracts import (
    ColumnSummary,
    ConfigFinding,
    ConfigFindingCode,
    ConfigLayout,
    ConfigSummary,
    InvalidInputError,
    KeyPath,
    ModelAliasUse,
    Problem,
    SamplingStrategy,
    SeedDatasetSummary,
    SeedSelection,
    ToolAliasUse,
    excerpt,
    format_key_path,
)
from data_designer.slurm.planner._digest import NotCanonicalError, sha256_digest
from data_designer.slurm.planner._document import Document
from data_designer.slurm.planner._secrets import find_secret_literals

BUILTIN_COLUMN_TYPES = frozenset(
    {
        "custom",
        "embedding",
        "expression",
        "image",
        "llm-code",
        "llm-judge",
        "llm-structured",
        "llm-text",
        "sampler",
        "seed-dataset",
        "validation",
    }
)
MODEL_COLUMN_TYPES = frozenset({"embedding", "image", "llm-code", "llm-judge", "llm-structured", "llm-text"})
"""Built-in column types that call exactly one model, named by ``model_alias``."""

BUILTIN_PROCESSOR_TYPES = frozenset({"drop_columns", "schema_transform"})
"""Both run per batch, row by row: safe to shard."""

FILESYSTEM_SEED_TYPES = frozenset({"local", "directory", "file_contents", "agent_rollout"})

_PLUGIN_ALIAS_KEY = re.compile(r"(?:.+_)?model_alias")
_PLUGIN_ALIASES_KEY = re.compile(r"(?:.+_)?model_aliases")
_OPERATION = "read_dd_config"
_STRATEGIES: dict[str, SamplingStrategy] = {"ordered": "ordered", "shuffle": "shuffle"}


def config_digest(data: Any) -> str:
    """The digest of a Data Designer config document: ``sha256`` of its canonical JSON."""
    return sha256_digest(data)


def read_dd_config(document: Document, *, operation: str = _OPERATION) -> ConfigSummary:
    """Read ``document`` as a Data Designer config; raise one :class:`InvalidInputError` naming every problem."""
    if document.problems:
        raise InvalidInputError.from_problems(list(document.problems), operation=operation, file=document.file)
    reader = _Reader(document)
    summary = reader.read()
    if reader.problems or summary is None:
        problems = sorted(reader.problems, key=lambda p: (p.line or 0, format_key_path(p.key_path or ())))
        raise InvalidInputError.from_problems(problems, operation=operation, file=document.file)
    return summary


@dataclass
class _Alias:
    alias: str
    defined: bool = False
    model: str | None = None
    provider: str | None = None
    generation_type: str | None = None
    columns: list[str] = field(default_factory=list)
    used_by_profiler: bool = False
    path: KeyPath | None = None
    first_use: KeyPath = ()


class _Reader:
    """One pass over the document: collects problems (structure) and findings (sharding) with their lines."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.problems: list[Problem] = []
        self.findings: list[ConfigFinding] = []
        self.aliases: dict[str, _Alias] = {}
        self.tools: dict[str, ToolAliasUse] = {}
        self.tool_columns: dict[str, list[str]] = {}

    # -- reporting -------------------------------------------------------------------------------

    def problem(self, code: str, message: str, path: KeyPath, hint: str) -> None:
        self.problems.append(self.document.problem_at(path, code=code, message=message, hint=hint))

    def finding(
        self,
        code: ConfigFindingCode,
        message: str,
        path: KeyPath,
        *,
        error: bool,
        sharded_only: bool,
        hint: str | None,
        column: str | None = None,
    ) -> None:
        self.findings.append(
            ConfigFinding(
                code=code,
                severity="error" if error else "warning",
                sharded_only=sharded_only,
                message=message,
                hint=hint,
                column=column,
                key_path=path or None,
                line=self.document.line_of(path),
            )
        )

    def typed(self, mapping: dict[str, Any], key: str, kind: type, path: KeyPath, *, required: bool) -> Any:
        """``mapping[key]`` when it has type ``kind``; None (and a problem if it was required or mistyped)."""
        value = mapping.get(key)
        if value is None:
            if required:
                self.problem("missing_key", f"{key!r} is required here", (*path, key), f"add {key!r}")
            return None
        if not isinstance(value, kind):
            what = {str: "a string", list: "a list", dict: "a mapping", bool: "true or false"}.get(kind, kind.__name__)
            self.problem("wrong_type", f"{key!r} must be {what}, got {excerpt(value)}", (*path, key), f"write {what}")
            return None
        return value

    def entries(self, mapping: dict[str, Any], key: str, path: KeyPath) -> Iterator[tuple[KeyPath, dict[str, Any]]]:
        """The mappings of the list ``mapping[key]`` (absent or null: none), with their paths."""
        items = self.typed(mapping, key, list, path, required=False) or []
        for index, item in enumerate(items):
            item_path = (*path, key, index)
            if isinstance(item, dict):
                yield item_path, item
            else:
                self.problem("wrong_type", f"entry {index} of {key!r} must be a mapping", item_path, "write a mapping")

    # -- the document ----------------------------------------------------------------------------

    def read(self) -> ConfigSummary | None:
        data = self.document.data
        hint = "give the file write_config writes ('data_designer' at the top) or the config keys ('columns'...)"
        if not isinstance(data, dict):
            self.problem("not_a_dd_config", "a Data Designer config must be a mapping", (), hint)
            return None
        layout: ConfigLayout
        prefix: KeyPath
        if "data_designer" in data:
            layout, prefix = "builder", ("data_designer",)
            root = self.typed(data, "data_designer", dict, (), required=True)
            library_version = self.typed(data, "library_version", str, (), required=False)
        elif "columns" in data:
            layout, prefix, root, library_version = "shorthand", (), data, None
        else:
            self.problem("not_a_dd_config", "neither 'data_designer' nor 'columns' is at the top level", (), hint)
            return None
        self.find_secrets()
        if root is None:
            return None
        model_configs_given = self.read_model_configs(root, prefix)
        self.read_tool_configs(root, prefix)
        columns = self.read_columns(root, prefix)
        self.read_profilers(root, prefix)
        processor_types = self.read_processors(root, prefix)
        seed = self.read_seed(root, prefix)
        self.check_aliases(model_configs_given, prefix)
        try:
            digest = config_digest(data)
        except NotCanonicalError as exc:
            self.problems.append(
                Problem(
                    code="not_plain_data",
                    message=str(exc),
                    file=self.document.file,
                    key_path=exc.info.key_path,
                    hint=exc.info.hint,
                )
            )
            return None
        if self.problems:
            return None
        return ConfigSummary(
            file=self.document.file,
            digest=digest,
            layout=layout,
            library_version=library_version,
            columns=tuple(columns),
            aliases=tuple(self.alias_uses()),
            tool_aliases=tuple(self.tool_uses()),
            sampler_columns=tuple(c.name for c in columns if c.column_type == "sampler"),
            seed_dataset=seed,
            processor_types=tuple(processor_types),
            findings=tuple(
                sorted(self.findings, key=lambda f: (f.line or 0, format_key_path(f.key_path or ()), f.code))
            ),
        )

    def find_secrets(self) -> None:
        """Secret literals anywhere: under secret-like keys (``api_key``, ``Authorization``...) or token-shaped."""
        self.problems.extend(find_secret_literals(self.document))

    def read_model_configs(self, root: dict[str, Any], prefix: KeyPath) -> bool:
        given = False
        for path, entry in self.entries(root, "model_configs", prefix):
            given = True
            alias = self.typed(entry, "alias", str, path, required=True)
            model = self.typed(entry, "model", str, path, required=False)
            provider = self.typed(entry, "provider", str, path, required=False)
            params = self.typed(entry, "inference_parameters", dict, path, required=False) or {}
            if alias is None:
                continue
            if alias in self.aliases:
                self.problem(
                    "duplicate_alias", f"model alias {excerpt(alias)} is defined twice", (*path, "alias"), "rename one"
                )
                continue
            self.aliases[alias] = _Alias(
                alias,
                defined=True,
                model=model,
                provider=provider,
                generation_type=_generation_type(params),
                path=(*path, "alias"),
            )
        return given

    def read_tool_configs(self, root: dict[str, Any], prefix: KeyPath) -> None:
        for path, entry in self.entries(root, "tool_configs", prefix):
            alias = self.typed(entry, "tool_alias", str, path, required=True)
            providers = self.typed(entry, "providers", list, path, required=False) or []
            if alias is None:
                continue
            if alias in self.tools:
                self.problem(
                    "duplicate_alias",
                    f"tool alias {excerpt(alias)} is defined twice",
                    (*path, "tool_alias"),
                    "rename one",
                )
                continue
            names = tuple(p for p in providers if isinstance(p, str))
            self.tools[alias] = ToolAliasUse(alias=alias, defined=True, providers=names)

    def read_columns(self, root: dict[str, Any], prefix: KeyPath) -> list[ColumnSummary]:
        if self.typed(root, "columns", list, prefix, required=True) is None:
            return []
        columns: list[ColumnSummary] = []
        seen: set[str] = set()
        for path, entry in self.entries(root, "columns", prefix):
            name = self.typed(entry, "name", str, path, required=True)
            column_type = self.typed(entry, "column_type", str, path, required=True)
            if name is None or column_type is None:
                continue
            if name in seen:
                self.problem(
                    "duplicate_column", f"column {excerpt(name)} is defined twice", (*path, "name"), "rename one"
                )
                continue
            seen.add(name)
            builtin = column_type in BUILTIN_COLUMN_TYPES
            aliases = self.column_aliases(entry, column_type, path)
            for alias in aliases:
                self.use_alias(alias, (*path, "model_alias")).columns.append(name)
            tool_alias = self.typed(entry, "tool_alias", str, path, required=False)
            if tool_alias is not None:
                self.tool_columns.setdefault(tool_alias, []).append(name)
            sampler_type = None
            if column_type == "sampler":
                sampler_type = self.typed(entry, "sampler_type", str, path, required=True)
            self.column_findings(name, column_type, path)
            columns.append(
                ColumnSummary(
                    name=name,
                    column_type=column_type,
                    builtin=builtin,
                    model_aliases=aliases,
                    tool_alias=tool_alias,
                    sampler_type=sampler_type,
                    drop=self.typed(entry, "drop", bool, path, required=False) or False,
                    key_path=format_key_path(path),
                    line=self.document.line_of(path),
                )
            )
        return columns

    def column_aliases(self, entry: dict[str, Any], column_type: str, path: KeyPath) -> tuple[str, ...]:
        if column_type in MODEL_COLUMN_TYPES:
            alias = self.typed(entry, "model_alias", str, path, required=True)
            return (alias,) if alias is not None else ()
        if column_type in BUILTIN_COLUMN_TYPES:
            return ()
        found: list[str] = []
        for key, value in entry.items():
            if _PLUGIN_ALIAS_KEY.fullmatch(key) and value is not None:
                alias = self.typed(entry, key, str, path, required=False)
                if alias is not None:
                    found.append(alias)
            elif _PLUGIN_ALIASES_KEY.fullmatch(key) and value is not None:
                for index, item in enumerate(self.typed(entry, key, list, path, required=False) or []):
                    if isinstance(item, str):
                        found.append(item)
                    else:
                        self.problem(
                            "wrong_type", f"{key!r} lists {excerpt(item)}", (*path, key, index), "list alias names"
                        )
        return tuple(dict.fromkeys(found))

    def column_findings(self, name: str, column_type: str, path: KeyPath) -> None:
        if column_type == "custom":
            self.finding(
                "custom_column",
                f"custom column {excerpt(name)} is written by its function's name only; "
                "the runtime cannot rebuild the generator from the config file",
                (*path, "column_type"),
                error=True,
                sharded_only=False,
                hint="provide the generator as a column-generator plugin installed on the cluster",
                column=name,
            )
        elif column_type not in BUILTIN_COLUMN_TYPES:
            self.finding(
                "plugin_column",
                f"column {excerpt(name)} has the plugin type {excerpt(column_type)}: its aliases were read from keys named "
                "*model_alias(es), and whether it depends on row order is unknown here",
                (*path, "column_type"),
                error=False,
                sharded_only=False,
                hint="install the plugin on the cluster; the runtime validates the column with it",
                column=name,
            )

    def read_profilers(self, root: dict[str, Any], prefix: KeyPath) -> None:
        for path, entry in self.entries(root, "profilers", prefix):
            alias = self.typed(entry, "model_alias", str, path, required=False)
            if alias is not None:
                self.use_alias(alias, (*path, "model_alias")).used_by_profiler = True
            self.finding(
                "profiler",
                "each shard runs the profiler on its own rows: its analysis describes one shard, not the dataset",
                path,
                error=False,
                sharded_only=True,
                hint="profile the merged dataset after the run if a whole-dataset analysis is needed",
            )

    def read_processors(self, root: dict[str, Any], prefix: KeyPath) -> list[str]:
        types: list[str] = []
        for path, entry in self.entries(root, "processors", prefix):
            processor_type = self.typed(entry, "processor_type", str, path, required=True)
            if processor_type is None:
                continue
            types.append(processor_type)
            if processor_type not in BUILTIN_PROCESSOR_TYPES:
                self.finding(
                    "plugin_processor",
                    f"processor type {excerpt(processor_type)} comes from a plugin: if it works on the whole dataset "
                    "(process_after_generation), each shard runs it on its own rows only",
                    (*path, "processor_type"),
                    error=False,
                    sharded_only=True,
                    hint="make sure the processor is row-wise, or run it on the merged dataset",
                )
        return types

    def read_seed(self, root: dict[str, Any], prefix: KeyPath) -> SeedDatasetSummary | None:
        seed = self.typed(root, "seed_config", dict, prefix, required=False)
        if seed is None:
            return None
        path = (*prefix, "seed_config")
        source = self.typed(seed, "source", dict, path, required=True)
        raw_strategy = seed.get("sampling_strategy") or "ordered"
        strategy = _STRATEGIES.get(raw_strategy) if isinstance(raw_strategy, str) else None
        if strategy is None:
            self.problem(
                "invalid_value",
                f"sampling_strategy {excerpt(raw_strategy)} is neither 'ordered' nor 'shuffle'",
                (*path, "sampling_strategy"),
                "write 'ordered' or 'shuffle'",
            )
            return None
        selection_value = self.typed(seed, "selection_strategy", dict, path, required=False)
        selection: SeedSelection | None = None
        if selection_value is not None:
            # The host's IndexRange | PartitionBlock union: start/end make an index range; anything else,
            # even {}, validates as a partition block (all its fields have defaults).
            selection = "index_range" if {"start", "end"} & selection_value.keys() else "partition_block"
        if source is None:
            return None
        source_path = (*path, "source")
        seed_type = self.typed(source, "seed_type", str, source_path, required=True)
        location = self.typed(source, "path", str, source_path, required=False)
        if seed_type is None:
            return None
        self.seed_findings(strategy, seed_type, location, path)
        return SeedDatasetSummary(
            seed_type=seed_type,
            path=location,
            sampling_strategy=strategy,
            selection=selection,
            key_path=path,
            line=self.document.line_of(path),
        )

    def seed_findings(self, strategy: str, seed_type: str, location: str | None, path: KeyPath) -> None:
        if strategy == "ordered":
            self.finding(
                "seed_ordered",
                "the seed dataset is read in order: every shard would start at the same first row, "
                "so the shards would repeat each other's seed rows",
                (*path, "sampling_strategy"),
                error=True,
                sharded_only=True,
                hint="set seed_config.sampling_strategy to 'shuffle', or plan a single shard",
            )
        else:
            self.finding(
                "seed_shuffled",
                "each shard shuffles the seed dataset on its own: a seed row can appear in several shards "
                "(one unsharded run uses every row once before repeating any)",
                (*path, "sampling_strategy"),
                error=False,
                sharded_only=True,
                hint="split the seed file per shard if every row must be used exactly once",
            )
        if seed_type in FILESYSTEM_SEED_TYPES and location is not None and not location.startswith("/"):
            self.finding(
                "seed_relative_path",
                f"seed path {excerpt(location)} is relative: the host resolves it from the job's working directory "
                "on the compute node, not from the config file",
                (*path, "source", "path"),
                error=False,
                sharded_only=False,
                hint="write an absolute path on the shared filesystem",
            )

    # -- aliases ---------------------------------------------------------------------------------

    def use_alias(self, alias: str, path: KeyPath) -> _Alias:
        if alias not in self.aliases:
            self.aliases[alias] = _Alias(alias, first_use=path)
        return self.aliases[alias]

    def check_aliases(self, model_configs_given: bool, prefix: KeyPath) -> None:
        undefined = [a for a in self.aliases.values() if not a.defined]
        if model_configs_given:
            for alias in undefined:
                self.finding(
                    "undefined_alias",
                    f"model alias {excerpt(alias.alias)} is used but model_configs does not define it",
                    alias.first_use,
                    error=True,
                    sharded_only=False,
                    hint="add it to model_configs or fix its spelling",
                    column=alias.columns[0] if alias.columns else None,
                )
        elif undefined:
            names = ", ".join(repr(a.alias) for a in undefined)
            self.finding(
                "default_model_configs",
                f"the config defines no model_configs: the host's default model configs on the compute node "
                f"must define {names}",
                (*prefix, "model_configs"),
                error=False,
                sharded_only=False,
                hint="write the model configs into the config (the config builder does when given model_configs)",
            )

    def alias_uses(self) -> Iterator[ModelAliasUse]:
        ordered = [a for a in self.aliases.values() if a.defined] + [a for a in self.aliases.values() if not a.defined]
        for a in ordered:
            yield ModelAliasUse(
                alias=a.alias,
                defined=a.defined,
                model=a.model,
                provider=a.provider,
                generation_type=a.generation_type,
                columns=tuple(a.columns),
                used_by_profiler=a.used_by_profiler,
                key_path=format_key_path(a.path) if a.path is not None else None,
                line=self.document.line_of(a.path) if a.path is not None else None,
            )

    def tool_uses(self) -> Iterator[ToolAliasUse]:
        for alias, tool in self.tools.items():
            yield tool.model_copy(update={"columns": tuple(self.tool_columns.get(alias, ()))})
        for alias, columns in self.tool_columns.items():
            if alias not in self.tools:
                yield ToolAliasUse(alias=alias, defined=False, columns=tuple(columns))


def _generation_type(params: dict[str, Any]) -> str:
    """The host's rule (``ModelConfig._convert_inference_parameters``): explicit type, else inferred from keys."""
    explicit = params.get("generation_type")
    if explicit == "image":
        return "image"
    if explicit == "embedding" or "encoding_format" in params or "dimensions" in params:
        return "embedding"
    return explicit if isinstance(explicit, str) else "chat-completion"
