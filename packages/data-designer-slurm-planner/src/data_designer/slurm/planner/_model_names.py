"""Model names: the name each deployed server answers to, and where the Data Designer config names another.

The run file decides what a server serves; the Data Designer config only names the alias its columns call.
The client worker rewrites every deployed alias to the deployment's served name (``EndpointPlan.model``), so
a model name in the config that differs from the deployment's is never sent: the plan warns about it
(``model_mismatch``), because a user who edited only the config would otherwise not learn it is ignored.
Inside the allocation the supervisor checks the same name against the server's ``/v1/models``
(``runtime.supervisor._served_models``).
"""

from __future__ import annotations

from data_designer.slurm.contracts import (
    CommandDeployment,
    ConfigSummary,
    PlanWarning,
    RunSpec,
    VllmDeployment,
    excerpt,
)

_NAME_LIMIT = 120


def served_model(deployment: VllmDeployment | CommandDeployment, alias: str) -> str:
    """The model name a deployed server answers to: vLLM serves the alias (--served-model-name); a command
    template serves the alias only where it passes ``{served_name}``, else the deployment's ``model``."""
    if isinstance(deployment, VllmDeployment) or any("{served_name}" in part for part in deployment.argv):
        return alias
    return deployment.model


def model_mismatches(run: RunSpec, summary: ConfigSummary | None) -> list[PlanWarning]:
    """One warning per alias whose Data Designer config names a model other than the run file's (the
    deployment's ``model`` or served name, an external endpoint's ``model``): the run file wins.

    The messages name the config's key, not its file: a plan's digest does not depend on where the config was
    read from."""
    if summary is None:
        return []
    out: list[PlanWarning] = []
    for alias, deployment in run.deployments.items():
        use = summary.alias(alias)
        served = served_model(deployment, alias)
        if use is None or use.model is None or use.model in (deployment.model, served):
            continue
        out.append(
            PlanWarning(
                code="model_mismatch",
                key_path=f"deployments.{alias}.model",
                message=f"the Data Designer config names {_name(use.model)}{_at(use.key_path)}, the deployment "
                f"{_name(deployment.model)}: the deployment wins, the client asks its server for {_name(served)}",
            )
        )
    for alias, external in run.external.items():
        use = summary.alias(alias)
        if use is None or use.model is None or external.model is None or use.model == external.model:
            continue
        out.append(
            PlanWarning(
                code="model_mismatch",
                key_path=f"external.{alias}.model",
                message=f"the Data Designer config names {_name(use.model)}{_at(use.key_path)}, the run file "
                f"{_name(external.model)}: the run file wins",
            )
        )
    return out


def _name(model: str) -> str:
    """A model name as messages show it: whole up to a long path's length (an excerpt beyond; never a secret)."""
    return excerpt(model, limit=_NAME_LIMIT)


def _at(key_path: str | None) -> str:
    """Where the config defines the alias's model (its ``key_path`` names the alias key)."""
    if not key_path:
        return ""
    head, dot, last = key_path.rpartition(".")
    return f" ({head}.model)" if dot and last == "alias" else f" ({key_path})"
