"""Collecting a run: ``merge`` (in process or as a CPU job) and its records as a DataFrame."""

from data_designer.slurm.services.collect._dataset import load_dataset
from data_designer.slurm.services.collect._merge import merge_run

__all__ = ["load_dataset", "merge_run"]
