"""What a CSV cell may hold of untrusted text: nothing a spreadsheet runs as a formula.

A spreadsheet opening a CSV evaluates a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab or
a carriage return before one of them) as a formula, so a job's log line such as ``=HYPERLINK(...)`` would run on
the reader's machine. Following OWASP's guidance on CSV injection, :func:`csv_text` prefixes such a cell with a
single quote, which spreadsheets show as text. It is for text cells only: a number written as a number
(``-1.5``) stays a number.
"""

from __future__ import annotations

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
"""The first characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection)."""


def csv_text(text: str) -> str:
    """``text`` as a CSV text cell: prefixed with ``'`` when it begins with one of :data:`FORMULA_PREFIXES`."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text
