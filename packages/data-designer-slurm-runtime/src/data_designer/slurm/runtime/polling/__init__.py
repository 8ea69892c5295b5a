"""Polling with a deadline: one loop for every wait in the runtime and above it, clock and sleep injected."""

from data_designer.slurm.runtime.polling._poll import poll

__all__ = ["poll"]
