"""The one record-index range type: global record indices ``[start, stop)``.

The planner's range arithmetic (``planner.missing_ranges``, ``first_claims``...), shard plans, attempt
records, result manifests and coverage all use :class:`IndexRange`. It is a named tuple, so it unpacks
as ``start, stop``, sorts by start, and persists as a two-element JSON array ``[start, stop]``.
"""

from __future__ import annotations

from typing import NamedTuple


class IndexRange(NamedTuple):
    """Global record indices ``[start, stop)`` with ``0 <= start < stop``."""

    start: int
    stop: int

    @property
    def records(self) -> int:
        return self.stop - self.start
