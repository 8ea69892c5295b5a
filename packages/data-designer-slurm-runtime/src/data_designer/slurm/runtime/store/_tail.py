"""Bounded reads of growing text logs: the last N lines of a file, and the complete lines appended since an offset.

Both read from a known position and stop at a byte cap, so a log of many gigabytes costs what the lines asked for,
never the whole file. Files are opened as every run-directory read is (``_run_files``: no symbolic link followed,
no FIFO blocked on, regular files only). Lines keep their indentation (a traceback stays readable); only a trailing ``\\r`` is dropped
and a line longer than ``MAX_LINE_CHARS`` is shortened, saying by how much. Bytes that are not UTF-8 are replaced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.runtime.store._run_files import run_file

TAIL_BLOCK_BYTES = 64 * 1024
TAIL_MAX_BYTES = 4 * 1024 * 1024
"""The most bytes a tail reads from the end of one file (the lines before them are reported as not shown)."""
APPEND_MAX_BYTES = 1024 * 1024
"""The most bytes one read of appended lines takes; the rest is left for the next read."""
MAX_LINE_CHARS = 4000


@dataclass(frozen=True)
class LogTail:
    """The last lines of a file; ``truncated``: lines before them exist but are not shown; ``end``: the offset
    read up to (where reading appended lines continues)."""

    lines: tuple[str, ...]
    truncated: bool
    end: int


@dataclass(frozen=True)
class Appended:
    """Complete lines appended after an offset, and the offset after them (a partial last line is left unread
    unless ``final``); ``reset``: the file became shorter than the offset (replaced or truncated), read from 0."""

    lines: tuple[str, ...]
    end: int
    reset: bool = False


def read_tail(path: Path | str, lines: int, *, max_bytes: int = TAIL_MAX_BYTES) -> LogTail | None:
    """The last ``lines`` lines of the text file at ``path`` (None when it cannot be opened), reading backwards in
    blocks until enough newlines are seen or ``max_bytes`` are read."""
    try:
        with run_file(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            position = size
            blocks: list[bytes] = []
            newlines = 0
            while position > 0 and newlines <= lines and size - position < max_bytes:
                step = min(TAIL_BLOCK_BYTES, position, max_bytes - (size - position))
                position -= step
                handle.seek(position)
                block = handle.read(step)
                blocks.append(block)
                newlines += block.count(b"\n")
    except OSError:
        return None
    data = b"".join(reversed(blocks))
    end = position + len(data)
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # the file ends with a newline: no empty last line
    truncated = False
    if position > 0 and len(pieces) > 1:
        pieces = pieces[1:]  # the first piece starts mid-line
        truncated = True
    elif position > 0:
        truncated = True  # one line longer than the cap: its end is shown
    if len(pieces) > lines:
        pieces = pieces[-lines:]
        truncated = True
    return LogTail(lines=tuple(_line(piece) for piece in pieces), truncated=truncated, end=end)


def read_appended(
    path: Path | str, offset: int, *, final: bool = False, max_bytes: int = APPEND_MAX_BYTES
) -> Appended | None:
    """The complete lines written to ``path`` after byte ``offset`` (at most ``max_bytes`` of them; a line longer
    than that is returned in pieces). ``final``: the writer is done, so a last line without a newline counts too.
    None when the file cannot be opened."""
    try:
        with run_file(path) as handle:
            size = handle.seek(0, os.SEEK_END)
            reset = size < offset
            start = 0 if reset else offset
            handle.seek(start)
            data = handle.read(min(max_bytes, size - start))
    except OSError:
        return None
    if final and len(data) < max_bytes:
        cut = len(data)  # the writer is done: up to the end, a last line without a newline included
    else:
        cut = data.rfind(b"\n") + 1
        if cut == 0 and len(data) >= max_bytes:
            cut = len(data)  # one line longer than a read: returned in pieces
    body = data[:cut]
    pieces = body.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    return Appended(lines=tuple(_line(piece) for piece in pieces), end=start + cut, reset=reset)


def _line(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").removesuffix("\r")
    if len(text) <= MAX_LINE_CHARS:
        return text
    return f"{text[:MAX_LINE_CHARS]}... ({len(text) - MAX_LINE_CHARS} more characters)"
