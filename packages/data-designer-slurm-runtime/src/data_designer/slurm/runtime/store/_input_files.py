"""The bounded reader of the files a user names is the planner's (``planner/_files.py``): one implementation."""

from data_designer.slurm.planner import read_bounded

__all__ = ["read_bounded"]
