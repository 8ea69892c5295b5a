"""The imperative shell of data-designer-slurm: files, scheduler adapter, state store, supervisor."""

from data_designer.slurm.runtime._files import read_text, write_text_atomic

__all__ = ["read_text", "write_text_atomic"]
