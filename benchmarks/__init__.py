"""Benchmarks for data-designer-slurm: each ``bench_*.py`` module prints figures checked against targets.

Run them with ``uv run python benchmarks/run.py [--quick] [NAME ...]``; see ``benchmarks/README.md``.
"""
