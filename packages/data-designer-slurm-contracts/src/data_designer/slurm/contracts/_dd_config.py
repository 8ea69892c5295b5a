"""What the planner reads out of a Data Designer config, as values.

The planner reads the config file (written by the host's ``DataDesignerConfigBuilder.write_config``,
or an inline mapping) as plain data, without importing the host. A :class:`ConfigSummary` names
every model alias (defined in ``model_configs`` or only referenced) with the columns that use it,
the sampler columns, the seed dataset, and :class:`ConfigFinding` values for what cannot run, or
cannot be split into shards safely. Full validation, with the installed plugins, is the runtime's.

Severity: an ``error`` finding blocks submission; a ``warning`` is reported and the run proceeds.
A finding with ``sharded_only`` set matters only when the plan has more than one shard.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, PositiveInt, StringConstraints

from data_designer.slurm.contracts._errors import KeyPath, Problem
from data_designer.slurm.contracts._types import FROZEN

Sha256Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A sha256 digest of canonical JSON: 64 lowercase hexadecimal characters."""

FindingSeverity = Literal["error", "warning"]

ConfigFindingCode = Literal[
    "seed_ordered",
    "seed_shuffled",
    "seed_relative_path",
    "custom_column",
    "plugin_column",
    "plugin_processor",
    "profiler",
    "undefined_alias",
    "default_model_configs",
]
"""Every finding the config reader reports (see ``docs/architecture/sharding.md`` for each)."""

ConfigLayout = Literal["builder", "shorthand"]
"""``builder``: ``{data_designer: {...}, library_version}`` as ``write_config`` writes it; ``shorthand``: the
``DataDesignerConfig`` keys (``columns``, ``model_configs``...) at the top level."""

SamplingStrategy = Literal["ordered", "shuffle"]
SeedSelection = Literal["index_range", "partition_block"]


class ConfigFinding(BaseModel):
    """Something in a Data Designer config that cannot run, or cannot be sharded safely, and how to fix it."""

    model_config = FROZEN

    code: ConfigFindingCode
    severity: FindingSeverity
    sharded_only: bool = Field(description="True when it matters only for a plan with more than one shard.")
    message: str
    hint: str | None = None
    column: str | None = Field(default=None, description="The column it is about, if any.")
    key_path: KeyPath | None = Field(default=None, strict=False, description="Where in the config document it is.")
    line: PositiveInt | None = None

    def to_problem(self, file: str | None = None) -> Problem:
        """The same finding as a :class:`Problem`, to render or to raise."""
        return Problem(
            code=self.code, message=self.message, file=file, line=self.line, key_path=self.key_path, hint=self.hint
        )


class ColumnSummary(BaseModel):
    """One column of the config: its type and the aliases it calls."""

    model_config = FROZEN

    name: str
    column_type: str = Field(description="The host's column_type, e.g. 'llm-text', 'sampler', or a plugin's type.")
    builtin: bool = Field(description="False for a column type that comes from a plugin.")
    model_aliases: tuple[str, ...] = Field(
        strict=False, description="Every model alias the column calls, as the host's get_model_aliases() lists them."
    )
    tool_alias: str | None = None
    sampler_type: str | None = Field(default=None, description="For sampler columns: 'category', 'uuid'...")
    drop: bool = False
    key_path: str
    line: PositiveInt | None = None


class ModelAliasUse(BaseModel):
    """One model alias: where it is defined (if it is) and who calls it."""

    model_config = FROZEN

    alias: str
    defined: bool = Field(description="Whether the config's model_configs defines it.")
    model: str | None = Field(default=None, description="The model id, when defined.")
    provider: str | None = Field(default=None, description="The provider name, when defined.")
    generation_type: str | None = Field(
        default=None, description="'chat-completion', 'embedding' or 'image', when defined."
    )
    columns: tuple[str, ...] = Field(strict=False, description="Columns calling it, in config order.")
    used_by_profiler: bool = False
    key_path: str | None = Field(default=None, description="Where it is defined.")
    line: PositiveInt | None = None

    @property
    def used(self) -> bool:
        return bool(self.columns) or self.used_by_profiler


class ToolAliasUse(BaseModel):
    """One MCP tool alias: its providers (when defined) and the columns that may call it."""

    model_config = FROZEN

    alias: str
    defined: bool
    providers: tuple[str, ...] = Field(strict=False, default=())
    columns: tuple[str, ...] = Field(strict=False, default=())


class SeedDatasetSummary(BaseModel):
    """The config's seed dataset: its source and how rows are drawn from it."""

    model_config = FROZEN

    seed_type: str = Field(description="'local', 'hf', 'directory', 'file_contents', 'agent_rollout' or a plugin's.")
    path: str | None = None
    sampling_strategy: SamplingStrategy
    selection: SeedSelection | None = None
    key_path: KeyPath = Field(strict=False)
    line: PositiveInt | None = None


class ConfigSummary(BaseModel):
    """A Data Designer config as the planner reads it: digest, aliases, columns, seed dataset, findings."""

    model_config = FROZEN

    file: str
    digest: Sha256Digest = Field(description="sha256 of the canonical JSON of the whole document.")
    layout: ConfigLayout
    library_version: str | None = Field(default=None, description="The host version that wrote the file, if named.")
    columns: tuple[ColumnSummary, ...] = Field(strict=False)
    aliases: tuple[ModelAliasUse, ...] = Field(
        strict=False, description="Defined aliases in config order, then referenced-only ones in first-use order."
    )
    tool_aliases: tuple[ToolAliasUse, ...] = Field(strict=False, default=())
    sampler_columns: tuple[str, ...] = Field(strict=False)
    seed_dataset: SeedDatasetSummary | None = None
    processor_types: tuple[str, ...] = Field(strict=False, default=())
    findings: tuple[ConfigFinding, ...] = Field(strict=False, default=())

    def alias(self, name: str) -> ModelAliasUse | None:
        """The alias named ``name``, or None."""
        return next((a for a in self.aliases if a.alias == name), None)

    @property
    def used_aliases(self) -> tuple[ModelAliasUse, ...]:
        """Aliases some column or profiler calls: every one must be deployed or external."""
        return tuple(a for a in self.aliases if a.used)

    def blocking_findings(self, *, shards: int) -> tuple[ConfigFinding, ...]:
        """The error findings that block a plan of ``shards`` shards."""
        return tuple(f for f in self.findings if f.severity == "error" and (shards > 1 or not f.sharded_only))
