"""PEP 440 versions and specifiers, as far as image compatibility needs them (pure; no ``packaging`` in the planner).

:func:`satisfies` answers whether a version found in an image lies in a requirement's specifier (``>=1.0.0rc1,<2``),
with the rules of ``packaging.specifiers.SpecifierSet.contains(version, prereleases=True)``, which the supervisor's
environment check uses: pre-releases are accepted, ``<V`` refuses V's own pre-releases (unless V is one) and ``>V``
its post-releases, a local label (``+cu129``) is ignored unless ``==`` names one. Operators: ``==``, ``!=`` (both
with a trailing ``.*``), ``<``, ``<=``, ``>``, ``>=``, ``~=``. A version or clause this does not parse is
never satisfied (:func:`parse_version` says which), so nothing is accepted on a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(
    r"^\s*v?(?:(?P<epoch>[0-9]+)!)?(?P<release>[0-9]+(?:\.[0-9]+)*)"
    r"(?:[-_.]?(?P<pre_l>alpha|beta|preview|pre|a|b|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?"
    r"(?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"^\s*(?P<op>~=|==|!=|<=|>=|<|>)\s*(?P<version>[^\s,]+?)(?P<wild>\.\*)?\s*$")
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_NO_PRE = 9
_LAST = 1 << 62


@dataclass(frozen=True, order=True)
class Version:
    """A parsed version; instances order as PEP 440 orders public versions (the local label is not compared)."""

    epoch: int
    release: tuple[int, ...]
    pre: tuple[int, int]
    post: int
    dev: int
    local: str | None = None

    @property
    def is_prerelease(self) -> bool:
        return self.pre[0] != _NO_PRE or self.dev != _LAST

    @property
    def public(self) -> Version:
        return Version(self.epoch, self.release, self.pre, self.post, self.dev)


def parse_version(text: str) -> Version | None:
    """The version ``text`` spells, or None when it is not a PEP 440 version."""
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    release = tuple(int(part) for part in match.group("release").split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    pre_l, post_n = match.group("pre_l"), match.group("post_n1") or match.group("post_n2")
    has_post = match.group("post_n1") is not None or match.group("post_l") is not None
    has_dev = match.group("dev_l") is not None
    if pre_l is not None:
        pre = (_PRE[pre_l.lower()], int(match.group("pre_n") or 0))
    elif has_dev and not has_post:
        pre = (-1, 0)  # 1.0.dev0 comes before 1.0a0
    else:
        pre = (_NO_PRE, 0)
    return Version(
        epoch=int(match.group("epoch") or 0),
        release=release,
        pre=pre,
        post=int(post_n or 0) if has_post else -1,
        dev=int(match.group("dev_n") or 0) if has_dev else _LAST,
        local=match.group("local").lower() if match.group("local") else None,
    )


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` lies in every clause of ``specifier`` (comma-separated; empty: any version)."""
    found = parse_version(version)
    if found is None:
        return False
    clauses = [clause for clause in specifier.split(",") if clause.strip()]
    return all(_clause_holds(found, clause) for clause in clauses)


def _clause_holds(found: Version, clause: str) -> bool:
    match = _CLAUSE.fullmatch(clause)
    if match is None:
        return False
    op, wild = match.group("op"), match.group("wild") is not None
    bound = parse_version(match.group("version"))
    if bound is None or (wild and op not in ("==", "!=")):
        return False
    if wild:
        prefix = _padded(bound.release, len(match.group("version").split(".")))
        inside = found.epoch == bound.epoch and _padded(found.release, len(prefix))[: len(prefix)] == prefix
        return inside if op == "==" else not inside
    if op in ("==", "!="):
        equal = (found if bound.local is not None else found.public) == bound
        return equal if op == "==" else not equal
    public = found.public
    if op == ">=":
        return public >= bound
    if op == "<=":
        return public <= bound
    if op == ">":
        # Not a post-release of the bound itself (unless the bound is one).
        same_base = _base(public) == _base(bound)
        return public > bound and not (same_base and public.post >= 0 and bound.post < 0)
    if op == "<":
        same_base = _base(public) == _base(bound)
        return public < bound and not (same_base and public.is_prerelease and not bound.is_prerelease)
    # ~=: at least the bound, and the same release prefix but for its last part.
    if len(bound.release) < 2 and len(match.group("version").split(".")) < 2:
        return False
    width = len(match.group("version").split("+")[0].split("."))
    prefix = _padded(bound.release, width)[:-1]
    return public >= bound and _padded(public.release, len(prefix))[: len(prefix)] == prefix


def _base(version: Version) -> tuple[int, tuple[int, ...]]:
    return version.epoch, version.release


def _padded(release: tuple[int, ...], width: int) -> tuple[int, ...]:
    return release + (0,) * (width - len(release))
