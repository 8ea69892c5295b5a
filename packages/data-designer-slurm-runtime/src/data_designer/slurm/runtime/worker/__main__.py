"""``python -m data_designer.slurm.runtime.worker`` (what the supervisor starts in each attempt)."""

from data_designer.slurm.runtime.worker._main import main

if __name__ == "__main__":
    raise SystemExit(main())
