"""The client worker's use of the installed host ``data-designer``: environment, config, endpoints, seeds, create.

The host reads ``HOME`` (its ``~/.data-designer``) and the telemetry switch when its modules are
imported, so :func:`prepare_environment` must run before :func:`import_host`. Nothing here needs the
network beyond the model endpoints:

* telemetry is switched off (``NEMO_TELEMETRY_ENABLED=false``), and the host's OpenTelemetry metrics
  endpoint, a fixed loopback port shared by every worker on a node, is disabled per run config;
* the host counts tokens with tiktoken's ``cl100k_base`` (profiling after generation, reasoning-token
  estimates during it), which downloads the encoding without a timeout when it is not cached.
  :func:`forbid_tiktoken_downloads` makes tiktoken read only its local cache and fail at once
  otherwise; the host then logs one warning per profiled column and carries on.

Host objects are typed ``Any``: the host ships no type information for these modules.
"""

from __future__ import annotations

import importlib
import logging
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faker
import numpy

from data_designer.slurm.contracts.records import AliasEndpoints
from data_designer.slurm.planner import sampler_seed_words

PROVIDER_PREFIX = "ddslurm-"
"""Providers the worker registers are named ``ddslurm-<alias>``: one per model alias."""


class ConfigRejected(Exception):
    """The Data Designer config (or what it needs from the environment) is invalid: retrying cannot help.

    ``fix`` is what to change, when the worker knows better than "correct the config" (``client-error.json``).
    """

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


def prepare_environment(home: Path) -> dict[str, str]:
    """Point the host at ``home`` (the attempt's) and switch its phone-home off; returns what was set."""
    settings = {
        "HOME": str(home),
        "DATA_DESIGNER_HOME": str(home / ".data-designer"),
        "NEMO_TELEMETRY_ENABLED": "false",
    }
    os.environ.update(settings)
    return settings


@dataclass(frozen=True)
class Host:
    """The host modules the worker uses (imported after :func:`prepare_environment`)."""

    config: Any
    interface: Any
    version: str


def import_host() -> Host:
    from importlib.metadata import version

    config = importlib.import_module("data_designer.config")
    interface = importlib.import_module("data_designer.interface.data_designer")
    return Host(config=config, interface=interface, version=version("data-designer"))


def forbid_tiktoken_downloads() -> None:
    """Make tiktoken read encodings from its local cache only; a URL fails at once instead of downloading."""
    load: Any = importlib.import_module("tiktoken.load")
    original = load.read_file
    if getattr(original, "_ddslurm_offline", False):
        return

    def read_file(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise OSError(
                f"not downloading {blobpath!r}: the worker runs offline (pre-seed TIKTOKEN_CACHE_DIR to profile tokens)"
            )
        data: bytes = original(blobpath)
        return data

    read_file._ddslurm_offline = True  # type: ignore[attr-defined]
    load.read_file = read_file


def load_builder(host: Host, config: Mapping[str, Any]) -> Any:
    """The host's builder from the digested mapping (never re-parsed from YAML); ConfigRejected if the host refuses."""
    try:
        return host.config.DataDesignerConfigBuilder.from_config(dict(config))
    except Exception as exc:  # the host raises pydantic, ValueError and its own errors for a bad config
        raise ConfigRejected(f"the host cannot load the config: {_one_line(exc)}") from exc


def rewrite_models(
    host: Host,
    builder: Any,
    endpoints: Mapping[str, AliasEndpoints],
    concurrency: Mapping[str, int],
    routed: Mapping[str, str],
) -> list[Any]:
    """Point every alias at its endpoint with the planned concurrency; returns the providers.

    The endpoint is the alias's router in ``routed`` (alias -> local URL) where it has one, else its
    first base URL.

    API keys travel by environment variable name: the host's secret resolver reads the value.
    """
    existing = {model.alias: model for model in builder.model_configs}
    providers = []
    for alias, endpoint in endpoints.items():
        if not endpoint.base_urls:
            raise ConfigRejected(f"model alias {alias!r} has no endpoint")
        if endpoint.api_key_env is not None and not os.environ.get(endpoint.api_key_env):
            raise ConfigRejected(
                f"model alias {alias!r} takes its API key from ${endpoint.api_key_env}, which is unset or empty",
                fix=f"set ${endpoint.api_key_env} where execute runs (external.{alias}.api_key_env names it)",
            )
        name = PROVIDER_PREFIX + alias
        providers.append(
            host.config.ModelProvider(
                name=name,
                endpoint=routed.get(alias, endpoint.base_urls[0]),
                provider_type="openai",
                api_key=endpoint.api_key_env,
            )
        )
        model = existing.get(alias)
        if model is None:
            model = host.config.ModelConfig(alias=alias, model=endpoint.model, provider=name)
        params = model.inference_parameters
        if alias in concurrency:
            params = params.model_copy(update={"max_parallel_requests": concurrency[alias]})
        rewritten = model.model_copy(update={"model": endpoint.model, "provider": name, "inference_parameters": params})
        if alias in existing:
            with _quiet_model_removal(builder):
                builder.delete_model_config(alias)
        builder.add_model_config(rewritten)
    return providers


REMOVAL_WARNING = "No model configurations found after deleting model configuration"
"""The host's warning when the last model config is deleted: the worker adds the rewritten one right after."""


class _DropRemovalWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return REMOVAL_WARNING not in record.getMessage()


@contextmanager
def _quiet_model_removal(builder: Any) -> Iterator[None]:
    """Replacing an alias's model config deletes it first; the host warns when that empties the list.

    The builder has no replace, and ``add_model_config`` refuses an alias it holds, so the warning is
    filtered on the builder module's logger for the one delete (the rewritten config follows at once).
    """
    host_logger = logging.getLogger(type(builder).__module__)
    quiet = _DropRemovalWarning()
    host_logger.addFilter(quiet)
    try:
        yield
    finally:
        host_logger.removeFilter(quiet)


@dataclass
class UsageTap:
    """Remembers the host's resource providers per dataset name, to read its per-alias usage counters."""

    providers: dict[str, Any] = field(default_factory=dict)
    supported: bool = False

    def usage(self, dataset_name: str) -> dict[str, Any] | None:
        """Alias -> the host's ModelUsageStats for one create call; None when this host hides them."""
        provider = self.providers.get(dataset_name)
        registry = getattr(provider, "model_registry", None)
        models = getattr(registry, "models", None)
        if not isinstance(models, dict):
            return None
        return {alias: facade.usage_stats for alias, facade in models.items()}


def make_designer(host: Host, artifact_path: Path, providers: list[Any], *, batch_size: int) -> tuple[Any, UsageTap]:
    """A DataDesigner writing under ``artifact_path`` that only knows ``providers``, and its usage tap.

    The host keeps per-alias usage on the resource provider each ``create`` builds and returns no
    handle to it; the subclass records it (the host's ``_create_resource_provider`` hook, checked).
    """
    base = host.interface.DataDesigner
    tap = UsageTap(supported=callable(getattr(base, "_create_resource_provider", None)))

    class Designer(base):  # type: ignore[misc,valid-type]
        def _create_resource_provider(self, dataset_name: str, *args: Any, **kwargs: Any) -> Any:
            provider = super()._create_resource_provider(dataset_name, *args, **kwargs)
            tap.providers[dataset_name] = provider
            return provider

    designer = Designer(artifact_path=artifact_path, model_providers=providers)
    designer.set_run_config(host.config.RunConfig(buffer_size=batch_size, display_tui=False, otel_metrics_port=None))
    return designer, tap


def validate(designer: Any, builder: Any) -> None:
    """The host's full validation (columns, references, templates, processors); ConfigRejected on failure."""
    try:
        designer.validate(builder)
    except Exception as exc:
        raise ConfigRejected(f"the host rejects the config: {_one_line(exc)}") from exc


def seed_generators(seed: int) -> None:
    """Seed every generator the host's samplers draw from; call right before create.

    See ``docs/architecture/sharding.md``.
    """
    numpy.random.seed(list(sampler_seed_words(seed)))
    random.seed(seed)
    faker.Faker.seed(seed)


def is_deterministic_failure(exc: BaseException) -> bool:
    """A sampler failure that recurs with the same seed (constraints too tight): a config error, not retryable."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == "RejectionSamplingError":
            return True
        current = current.__cause__ or current.__context__
    return False


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."
