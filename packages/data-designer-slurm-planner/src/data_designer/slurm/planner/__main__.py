"""``python -m data_designer.slurm.planner compile|expand ...`` (see ``_main``)."""

from data_designer.slurm.planner._main import main

if __name__ == "__main__":
    raise SystemExit(main())
