"""How a re-encoding merge encodes: dictionaries only where they pay, and no pandas on the way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from data_designer.slurm.runtime.merge import dictionary_columns
from data_designer.slurm.runtime.testing import write_run_directory


def test_mostly_distinct_text_goes_without_a_dictionary_everything_else_keeps_one() -> None:
    rows = 1_000
    sample = pa.table(
        {
            "review": pa.array([f"review number {i} of many" for i in range(rows)]),
            "product": pa.array(["kettle", "lamp", "bike", "desk"] * (rows // 4)),
            "_dd_run_id": pa.array(["run-1"] * rows),
            "_dd_index": pa.array(range(rows), type=pa.int64()),
            "score": pa.array([float(i) for i in range(rows)]),
        }
    )
    assert dictionary_columns(sample) == ["product", "_dd_run_id", "_dd_index", "score"]
    half = pa.table({"a": pa.array([str(i % 500) for i in range(rows)])})  # exactly half distinct: kept
    assert dictionary_columns(half) == ["a"]
    assert dictionary_columns(pa.table({"a": pa.array([], type=pa.string())})) == ["a"]


def test_a_compacting_merge_never_imports_pandas(tmp_path: Path) -> None:
    """pyarrow 24 imports pandas (0.2 s, 50 MiB) on any Python-to-Arrow conversion; the merge makes none."""
    root = tmp_path / "ws"
    root.mkdir()
    layout = write_run_directory(root, shards=3, records_per_shard=20, parquet_parts=True)
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from data_designer.slurm.runtime.merge import MergeOptions, merge_snapshot\n"
        "from data_designer.slurm.runtime.store import RunLayout, read_run\n"
        f"LAYOUT = RunLayout.of_run_dir(Path({str(layout.run_dir)!r}))\n"
        f"merge_snapshot(read_run(LAYOUT), MergeOptions(output=Path({str(tmp_path / 'out')!r}), compact=True))\n"
        f"merge_snapshot(read_run(LAYOUT), MergeOptions(output=Path({str(tmp_path / 'spliced')!r})))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "False"
