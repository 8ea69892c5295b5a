"""The runtime's tests: ``thrift_oracle`` (the generic Thrift codec the merge's walkers are tested against) is a
module beside them, importable by its name."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
