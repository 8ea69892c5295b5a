"""Installed distribution versions: what the supervisor checks and the client worker records."""

from __future__ import annotations

import importlib.metadata


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
