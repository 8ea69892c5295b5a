"""``wait``'s progress: off a terminal, a line only when something changed, plus one a minute; on a terminal, the
bar is drawn at the final state before it closes."""

from __future__ import annotations

from typing import Any

from data_designer.slurm.cli._status_commands import _Progress
from data_designer.slurm.contracts import RunStatus


def status(done: int, state: str = "running", **counts: int) -> RunStatus:
    fields: dict[str, Any] = {
        "run_id": "r-1",
        "run_dir": "/ws/runs/r-1",
        "name": "r",
        "cluster": "c",
        "state": state,
        "records_total": 200,
        "records_done": done,
        "shards_total": 2,
        "counts": counts or {"running": 2},
        "shards": (),
        "checked_at": "2026-12-02T00:00:00Z",
        "evidence": "live",
        "scheduler_calls": 1,
    }
    return RunStatus.model_validate(fields)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_line_is_printed_only_when_something_changed_and_once_a_minute() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = _Progress(enabled=True, tty=False, monotonic=clock, echo=lines.append)
    for second, done in [(0, 0), (15, 0), (30, 0), (45, 50), (60, 50), (75, 50), (104, 50), (105, 50), (120, 50)]:
        clock.now = second
        progress.show(status(done))
    # 0: first; 45: records changed; 105: a minute after the last line (heartbeat)
    assert len(lines) == 3, lines
    assert "records 0/200" in lines[0]
    assert "records 50/200" in lines[1]
    assert lines[2] == lines[1]
    clock.now = 121
    progress.show(status(200, "succeeded", succeeded=2))
    assert len(lines) == 4
    assert "succeeded" in lines[3]


def test_a_disabled_progress_prints_nothing() -> None:
    lines: list[str] = []
    progress = _Progress(enabled=False, tty=False, echo=lines.append)
    progress.show(status(0))
    assert lines == []


def test_on_a_terminal_the_bar_ends_at_the_final_state() -> None:
    progress = _Progress(enabled=True, tty=True)
    progress.show(status(0))
    progress.show(status(200, "succeeded", succeeded=2))
    bar: Any = progress._bar
    (task,) = bar.tasks
    assert (task.completed, task.total) == (200, 200)
    assert "succeeded" in task.description
    progress.close()
    assert bar.live.is_started is False
