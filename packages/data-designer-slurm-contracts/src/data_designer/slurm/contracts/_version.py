"""The lockstep version of all four data-designer-slurm packages."""

__version__ = "1.0.0rc1+ddslurm"
