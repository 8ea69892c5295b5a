"""``python -m data_designer.slurm.runtime.images.finish --workspace-root DIR --name NAME --generation G``.

The registry import job's last step (after ``enroot import`` succeeded): :func:`finish_import` records the image as
generation ``G + 1``. Exit 0 with one line naming the completion, else the error's exit code and its lines on stderr
(the job's log, which ``image info`` shows).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from data_designer.slurm.contracts import SlurmExtensionError
from data_designer.slurm.runtime.images._import import finish_import
from data_designer.slurm.runtime.images._registry import ImageRegistry
from data_designer.slurm.runtime.images._squashfs import IMAGE_TOOLS
from data_designer.slurm.runtime.scheduler import SubprocessRunner


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m data_designer.slurm.runtime.images.finish")
    parser.add_argument("--workspace-root", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--generation", required=True, type=int)
    args = parser.parse_args(argv)
    registry = ImageRegistry(args.workspace_root)
    try:
        entry = finish_import(
            registry,
            args.name,
            args.generation,
            runner=SubprocessRunner(programs=IMAGE_TOOLS),
            environ=os.environ,
        )
    except SlurmExtensionError as exc:
        for line in exc.info.render_lines():
            print(f"image import not recorded: {line}", file=sys.stderr)
        return int(exc.exit_code)
    print(
        f"image {entry.name!r} generation {entry.generation}: {entry.path} sha256 {entry.sha256} "
        f"({entry.size} bytes) recorded",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
