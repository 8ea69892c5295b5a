"""``python -m data_designer.slurm.runtime.supervisor --plan plan.json`` (what every batch script execs)."""

from data_designer.slurm.runtime.supervisor._main import main

if __name__ == "__main__":
    raise SystemExit(main())
