"""Benchmarks: ``benchmark run`` (every child an ordinary run), ``status``, ``ls`` and ``analyze`` (with its plot)."""

from data_designer.slurm.services.benchmarks._analyze import analyze_benchmark
from data_designer.slurm.services.benchmarks._run import run_benchmark
from data_designer.slurm.services.benchmarks._status import benchmark_status, find_benchmark, list_benchmarks

__all__ = ["analyze_benchmark", "benchmark_status", "find_benchmark", "list_benchmarks", "run_benchmark"]
