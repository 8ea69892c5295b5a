"""``python -m data_designer.slurm.runtime.merge --run-dir DIR`` (what the merge job execs)."""

from data_designer.slurm.runtime.merge._job_main import main

if __name__ == "__main__":
    raise SystemExit(main())
