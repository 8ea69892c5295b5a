"""Model identity at readiness: the names a replica lists on ``GET /v1/models`` against the name the plan expects.

A healthy server that serves another name than the client will ask for (``ReplicaPlan.served_name``, the
client's ``EndpointPlan.model``) fails every request of a strict server with "model not found", and with a
permissive one answers under the wrong name. So after ``/health`` answers 200 the supervisor asks
``/v1/models`` (with the per-attempt key, which every replica requires on ``/v1/*``) and judges the answer:

* a list naming the expected name: ready;
* a list without it: the attempt ends ``server_failed_to_start`` naming the expected and the served names;
* 401 or 403: the attempt ends ``server_failed_to_start`` (the client's requests would be refused too);
* no answer, or another status (5xx while loading): not ready yet, asked again until the startup budget;
* vLLM: anything else (404, a body without a model list) ends the attempt: vLLM always serves the list.
  A ``command`` engine need not be OpenAI-compatible on ``/v1/models``: 404, 405 or a body without a model
  list leaves readiness to ``/health`` alone (said in the supervisor's log).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Literal

from data_designer.slurm.contracts import ReplicaPlan

MODELS_TIMEOUT_S = 2.0
_MAX_BODY_BYTES = 1024 * 1024
_SHOWN_NAMES = 5
# Straight to the node, as the health check: a site's http_proxy must not see (or break) it.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class ModelsReply:
    """What ``GET /v1/models`` answered: its status (None: no HTTP answer) and the listed ids (None: no list)."""

    status: int | None
    names: tuple[str, ...] | None = None
    detail: str = ""


@dataclass(frozen=True)
class Identity:
    """The verdict on one reply: ``ready``, ``wait`` (ask again) or ``failed``, with a sentence for the log/status."""

    verdict: Literal["ready", "wait", "failed"]
    message: str = ""


def ask_models(base_url: str, key: str | None, *, timeout_s: float = MODELS_TIMEOUT_S) -> ModelsReply:
    """``GET {base_url}/models`` (``base_url`` ends in ``/v1``) with ``Authorization: Bearer key`` when given."""
    request = urllib.request.Request(f"{base_url}/models", method="GET")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with _OPENER.open(request, timeout=timeout_s) as answer:
            status, body = answer.status, answer.read(_MAX_BODY_BYTES)
    except urllib.error.HTTPError as exc:
        return ModelsReply(exc.code, detail=f"HTTP {exc.code}")
    except (OSError, ValueError) as exc:  # URLError is an OSError; refused, reset, timed out
        return ModelsReply(None, detail=str(exc) or type(exc).__name__)
    return ModelsReply(status, _model_ids(body), detail=f"HTTP {status}")


def judge(plan: ReplicaPlan, step: str, reply: ModelsReply) -> Identity:
    """Whether replica ``step`` (of ``plan``) serves the name its clients will ask for (module docstring)."""
    expected = plan.served_name
    if reply.status == 200 and reply.names is not None:
        if expected in reply.names:
            return Identity("ready")
        return Identity("failed", _mismatch(plan, step, reply.names))
    if reply.status in (401, 403):
        return Identity(
            "failed",
            f"server {step} refused the per-attempt key on GET /v1/models ({reply.detail}); the client's requests "
            f"would be refused too: let the server read the key from the variable {{api_key_env}} names",
        )
    if reply.status is None or (reply.status >= 500 and reply.status != 501):
        return Identity("wait", f"GET /v1/models: {reply.detail}")
    if plan.engine == "command" and (reply.status in (404, 405, 501) or reply.names is None):
        return Identity(
            "ready", f"{step} answers GET /v1/models with {reply.detail} and no model list: readiness is /health alone"
        )
    return Identity(
        "failed",
        f"server {step} answered GET /v1/models with {reply.detail} and no model list; vLLM always lists its "
        f"served model ({expected!r}): check the server's argv and engine_args",
    )


def _mismatch(plan: ReplicaPlan, step: str, names: tuple[str, ...]) -> str:
    shown = ", ".join(repr(n) for n in names[:_SHOWN_NAMES]) or "no model"
    more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
    if plan.engine == "vllm":
        fix = f"vLLM was started with --served-model-name {plan.served_name!r}: check what answered on its port"
    else:
        fix = (
            f"pass '{{served_name}}' as the server's model name in deployments.{plan.alias}.argv, or set "
            f"deployments.{plan.alias}.model to the name the server serves"
        )
    return (
        f"server {step} serves {shown}{more} but the client will ask for {plan.served_name!r} "
        f"(deployment {plan.alias!r}): {fix}"
    )


def _model_ids(body: bytes) -> tuple[str, ...] | None:
    """The ``id`` of every entry of an OpenAI model list (``{"data": [{"id": ...}, ...]}``); None if not one."""
    try:
        parsed: Any = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    data = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(data, list):
        return None
    return tuple(item["id"] for item in data if isinstance(item, dict) and isinstance(item.get("id"), str))
