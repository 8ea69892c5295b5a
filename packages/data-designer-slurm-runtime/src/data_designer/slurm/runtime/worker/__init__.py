"""The Data Designer client worker of one shard attempt: ``python -m data_designer.slurm.runtime.worker``.

The worker (``_main``), its host adapter (``_host``), inputs (``_inputs``), outputs (``_output``), the local
router in front of each alias's replicas (``_router``), their request evidence (``_evidence``: ``requests.json``)
and the drain on a signal (``_drain``). Importing this package imports none of them (the host and pyarrow load only when the worker runs): the few names it exports
load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from data_designer.slurm.runtime.worker._drain import DEFAULT_SETTLE_S
    from data_designer.slurm.runtime.worker._host import forbid_tiktoken_downloads

__all__ = ["DEFAULT_SETTLE_S", "forbid_tiktoken_downloads"]

# name -> the private module that defines it (the host adapter imports faker and numpy, so nothing loads eagerly)
_LAZY = {
    "DEFAULT_SETTLE_S": "data_designer.slurm.runtime.worker._drain",
    "forbid_tiktoken_downloads": "data_designer.slurm.runtime.worker._host",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
