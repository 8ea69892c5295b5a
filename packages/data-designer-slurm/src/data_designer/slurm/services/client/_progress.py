"""``wait()``'s progress: a bar in Jupyter and on a terminal, plain lines elsewhere (the CLI ``wait``'s behaviour).

- Jupyter (an IPython kernel): one HTML ``<progress>`` bar with the summary line, updated in place through
  ``IPython.display`` (no widget library needed).
- A terminal (stderr is a TTY): Rich's bar with the CLI's columns (counts, bar, records done of total, elapsed),
  drawn at the final state before it closes.
- Elsewhere (a log, CI): the CLI's rule: one summary line when the state, the records or the shard counts changed,
  and at least one every :data:`HEARTBEAT_S` seconds.

The mode is chosen once (``auto``) or forced (``bar``, ``lines``, ``off``); the display and the clock are seams.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

from data_designer.slurm.services.context import counts_text, run_summary, safe

ProgressMode = Literal["auto", "jupyter", "bar", "lines", "off"]
HEARTBEAT_S = 60.0


def in_jupyter() -> bool:
    """This process is an IPython kernel (a notebook), not a terminal IPython."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def resolve_mode(mode: ProgressMode) -> ProgressMode:
    if mode != "auto":
        return mode
    if in_jupyter():
        return "jupyter"
    return "bar" if sys.stderr.isatty() else "lines"


def _stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """Shows each status ``show`` is given (a :class:`~data_designer.slurm.contracts.RunStatus`, or any status
    with ``records_done``/``records_total`` and a summary given by ``summary``); :meth:`close` ends it."""

    def __init__(
        self,
        mode: ProgressMode = "auto",
        *,
        summary: Callable[[Any], str] = run_summary,
        key: Callable[[Any], tuple[object, ...]] | None = None,
        echo: Callable[[str], None] = _stderr_line,
        monotonic: Callable[[], float] = time.monotonic,
        display: Callable[[Any], Any] | None = None,
    ) -> None:
        self.mode = resolve_mode(mode)
        self._summary = summary
        self._key = key or (lambda s: (s.state, s.records_done, counts_text(s.counts)))
        self._echo = echo
        self._monotonic = monotonic
        self._display = display
        self._printed: tuple[object, ...] | None = None
        self._printed_at = 0.0
        self._bar: Any = None
        self._task: Any = None
        self._handle: Any = None

    def show(self, status: Any) -> None:
        if self.mode == "off":
            return
        if self.mode == "lines":
            now = self._monotonic()
            what = self._key(status)
            if what != self._printed or now - self._printed_at >= HEARTBEAT_S:
                self._echo(self._summary(status))
                self._printed, self._printed_at = what, now
            return
        if self.mode == "jupyter":
            self._show_html(status)
            return
        self._show_rich(status)

    def _show_html(self, status: Any) -> None:
        body = progress_html(status.records_done, status.records_total, self._summary(status))
        if self._handle is None:
            display = self._display or _ipython_display
            self._handle = display(body)
        else:
            self._handle.update(_html_object(body) if self._display is None else body)

    def _show_rich(self, status: Any) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        if self._bar is None:
            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
            bar = RichProgress(*columns, console=Console(stderr=True))  # the terminal the mode was chosen by
            bar.start()
            self._task = bar.add_task(safe(str(getattr(status, "run_id", ""))), total=status.records_total)
            self._bar = bar
        self._bar.update(
            self._task, completed=status.records_done, description=safe(counts_text(status.counts)), refresh=True
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.refresh()
            self._bar.stop()
            self._bar = None


def progress_html(done: int, total: int, line: str) -> str:
    """A ``<progress>`` bar with the records and the summary line (escaped)."""
    return (
        f'<div><progress value="{int(done)}" max="{max(int(total), 1)}" style="width: 40em"></progress> '
        f"{int(done)}/{int(total)}<br><code>{html.escape(line)}</code></div>"
    )


def _notebook_display() -> Any:
    """The running kernel's ``IPython.display`` module. Only a Jupyter kernel (``in_jupyter``) gets here, and the
    kernel has imported it already: it is taken from ``sys.modules``, never imported, since IPython is the notebook's
    own and no dependency of ours."""
    module = sys.modules.get("IPython.display")
    if module is None:
        raise RuntimeError("IPython.display is not loaded: not inside a Jupyter kernel")
    return module


def _html_object(body: str) -> Any:
    return _notebook_display().HTML(body)


def _ipython_display(body: str) -> Any:
    return _notebook_display().display(_html_object(body), display_id=True)
