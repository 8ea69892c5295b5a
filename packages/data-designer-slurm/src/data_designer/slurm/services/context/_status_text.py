"""How a run's and a benchmark's status read in a notebook: one summary line and a table of rows (text and HTML).

The summary line has the CLI's format (``status`` and ``wait`` print the same line: state, records, shards per
state, evidence and its age, ETA); the tables are built from the status models alone, so ``repr`` never asks Slurm.
Every cell is escaped for HTML; control characters are shown escaped in text.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from data_designer.slurm.contracts import BenchmarkStatus, RunStatus

_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def safe(text: str) -> str:
    """``text`` on one line, control and format characters written as escapes (``\\n``, ``\\x1b``, ``\\u202e``):
    a log line cannot move the cursor or reorder what follows. The CLI's ``one_line`` rule exactly (a test holds the
    two to it); the CLI keeps its own copy so that ``--help`` imports nothing of the services."""
    if text.isprintable():
        return text
    return "".join(_escape(char) if unicodedata.category(char) in _UNPRINTABLE else char for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def counts_text(counts: Mapping[Any, int]) -> str:
    return ", ".join(f"{count} {state}" for state, count in counts.items()) or "none"


def duration_text(seconds: float) -> str:
    total = round(seconds)
    if total < 120:
        return f"{total}s"
    if total < 7200:
        return f"{total // 60}m{total % 60:02d}s"
    return f"{total // 3600}h{(total % 3600) // 60:02d}m"


def evidence_text(status: RunStatus) -> str:
    if status.evidence == "none":
        return "no scheduler evidence"
    age = f" ({duration_text(status.evidence_age_s or 0.0)} old)" if status.evidence == "cached" else ""
    failed = " and ".join(f"{item.source} {item.status}" for item in status.degraded)
    return f"scheduler evidence {status.evidence}{age}" + (f", partial: {failed}" if failed else "")


def run_summary(status: RunStatus) -> str:
    """The CLI's ``status`` summary line."""
    pct = 100.0 * status.records_done / status.records_total
    parts = [
        f"{status.run_id}: {status.state}",
        f"records {status.records_done}/{status.records_total} ({pct:.0f}%)",
        f"shards {counts_text(status.counts)}",
        evidence_text(status),
    ]
    if status.eta_s is not None and status.state in ("running", "pending") and status.eta_s > 0:
        parts.append(f"ETA {duration_text(status.eta_s)}")
    return safe("; ".join(parts))


RUN_COLUMNS = ("shard", "state", "records", "reason", "job", "attempts", "last log line")


def run_rows(status: RunStatus) -> list[list[str]]:
    """One row per shard (the CLI's ``status --shards`` columns)."""
    rows = []
    for s in status.shards:
        job = "" if s.job_id is None else s.job_id + ("" if s.array_task is None else f"_{s.array_task}")
        rows.append(
            [
                str(s.shard),
                s.state,
                f"{s.records_done}/{s.records_total}",
                s.reason or "",
                job,
                str(len(s.attempts)),
                safe(s.last_log_line or ""),
            ]
        )
    return rows


BENCHMARK_COLUMNS = ("child", "case", "repeat", "state", "run", "records")


def benchmark_summary(status: BenchmarkStatus) -> str:
    done = "complete" if status.complete else "not complete"
    return safe(
        f"benchmark {status.benchmark_id}: {done}; children {counts_text(status.counts)}; "
        f"scheduler evidence {status.evidence}"
    )


def benchmark_rows(status: BenchmarkStatus) -> list[list[str]]:
    rows = []
    for child in status.children:
        run = child.run
        records = "" if run is None or run.records_done is None else f"{run.records_done}/{run.records_total}"
        case = ", ".join(f"{label}={value}" for label, value in child.case)
        rows.append([str(child.index), safe(case), str(child.repeat), child.state, child.run_id or "", records])
    return rows


def text_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An aligned plain-text table."""
    header = [c.upper() for c in columns]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def html_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A small HTML table under a title line, every cell escaped."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return (
        f"<div><p><code>{html.escape(title)}</code></p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )
