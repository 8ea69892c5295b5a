"""PEP 440 versions and specifiers, read by ``packaging`` (pure), as image compatibility and the supervisor need them.

:func:`satisfies` is ``SpecifierSet.contains(version, prereleases=True)``: pre-releases are accepted, and a version or
specifier ``packaging`` does not parse is never satisfied, so nothing is accepted on a guess.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` lies in every clause of ``specifier`` (comma-separated; empty: any version)."""
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def same_version(found: str, ours: str) -> bool:
    """Whether ``found`` spells the version ``ours`` (``1.0.0rc1`` is ``1.0rc1``; a local label must match)."""
    try:
        return found == ours or Version(found) == Version(ours)
    except InvalidVersion:
        return False
