"""The Python client: ``SlurmDataDesigner`` (the host's ``DataDesigner().create(...)`` habit) and the run and
benchmark handles it returns, each method one service call."""

from data_designer.slurm.services.client._benchmark_handle import BenchmarkHandle, BenchmarkReport
from data_designer.slurm.services.client._client import SlurmDataDesigner
from data_designer.slurm.services.client._run_handle import RunHandle

__all__ = ["BenchmarkHandle", "BenchmarkReport", "RunHandle", "SlurmDataDesigner"]
