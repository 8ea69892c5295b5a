"""The store's durable writes and bounded reads are the planner's (``planner/_files.py``): one implementation."""

from data_designer.slurm.planner import (
    fsync_directory,
    make_directories,
    read_bounded,
    read_text,
    write_all,
    write_new_file,
    write_text_atomic,
)

__all__ = [
    "fsync_directory",
    "make_directories",
    "read_bounded",
    "read_text",
    "write_all",
    "write_new_file",
    "write_text_atomic",
]
