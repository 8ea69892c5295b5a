"""What an error may show of a value: a short excerpt, never a secret.

Every message built from authored input shows values through :func:`excerpt`, and every
:class:`~data_designer.slurm.contracts.Problem` and error passes its text through :func:`redact`
as a last line of defence, so neither a long value (a file read as the wrong kind of document)
nor a secret (a token pasted under the wrong key) ends up in a terminal, a log or ``--json``.

Two rules with different costs of a false positive:

- :func:`looks_like_token` finds *known* token shapes (``sk-``, ``nvapi-``, ``hf_``, ``ghp_``...,
  ``Bearer ...``, JWTs, AWS access key ids) and passwords in URLs (``https://user:pass@host``). The planner refuses such values in authored files, so
  the rule stays narrow: a prompt or a model id must never match it.
- :func:`looks_secret` adds long high-entropy words (20 or more characters of mixed case and
  digits, not hexadecimal). Only messages are redacted by it: hiding a model id in an error is
  cheap, printing a password is not. Hexadecimal digests stay readable.
"""

from __future__ import annotations

import math
import re
from collections import Counter

EXCERPT_LIMIT = 40
"""The most characters of a value an error message shows."""

REDACTED = "<redacted>"

_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-|nvapi-|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|hf_|glpat-|xox[abprs]-)[A-Za-z0-9_-]{16,}"
    r"|(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r"|(?i:\bbearer\s+)(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{12,}=*"
    r"|(?i:\bbasic\s+)(?=[A-Za-z0-9+/]*[0-9])[A-Za-z0-9+/]{12,}=*"
    r"|(?i:\bauthorization\s*:\s*(?:token|apikey|api-key)\s+)\S{8,}"
    r"|(?i:\b[a-z][a-z0-9+.-]*://)[^/?#@\s:]*:[^/?#@\s]+@"
)
_WORD = re.compile(r"[A-Za-z0-9_+/=-]{20,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_JOINERS = re.compile(r"[-_/]")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s:]*:[^/?#@\s]+@")


def looks_like_token(text: str) -> bool:
    """Whether ``text`` contains a known token shape (``sk-``, ``hf_``, ``Bearer ...``, a JWT, ``user:pass@``...)."""
    return _TOKEN.search(text) is not None


def _high_entropy(word: str) -> bool:
    core = word.strip("=")
    if len(core) < 20 or _HEX.fullmatch(core):
        return False
    if not (any(c.isupper() for c in core) and any(c.islower() for c in core) and any(c.isdigit() for c in core)):
        return False
    # Names and paths ('Meta-Llama-3.1-8B-Instruct', '/data/Run2/x') are words joined; a token is one long run.
    if max(len(part) for part in _JOINERS.split(core)) < 20:
        return False
    counts = Counter(core)
    entropy = -sum(n / len(core) * math.log2(n / len(core)) for n in counts.values())
    return entropy >= 3.5


def looks_secret(text: str) -> bool:
    """Whether ``text`` contains a token shape (see :func:`looks_like_token`) or a long high-entropy word."""
    if looks_like_token(text):
        return True
    return any(_high_entropy(m.group(0)) for m in _WORD.finditer(text))


def redact(text: str) -> str:
    """``text`` with every secret-shaped part (see :func:`looks_secret`) replaced by ``<redacted>``."""
    text = _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    text = _TOKEN.sub(REDACTED, text)
    return _WORD.sub(lambda m: REDACTED if _high_entropy(m.group(0)) else m.group(0), text)


def excerpt(value: object, limit: int = EXCERPT_LIMIT) -> str:
    """How a message shows ``value``: its ``repr``, cut to ``limit`` characters, or a placeholder for a secret.

    ``'abc'`` stays ``'abc'``; a long string becomes ``'first 40 characters'... (1234 characters)``; a
    secret-shaped string becomes ``<redacted, 48 characters>``; a long list or mapping shows its type and size.
    """
    if isinstance(value, str):
        if looks_secret(value):
            return f"<redacted, {len(value)} characters>"
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}... ({len(value)} characters)"
    if isinstance(value, dict | list | tuple):
        text = repr(value)
        if len(text) <= limit and not looks_secret(text):
            return text
        return f"a {type(value).__name__} of {len(value)} entries"
    text = redact(repr(value))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
