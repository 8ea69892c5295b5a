"""Who may read what a run writes: the modes of every file and directory in a workspace.

The modes themselves (:class:`FileModes`, private or group, :func:`modes_for`, :func:`modes_of_directory`) are the
planner's, with the durable writer that applies them (``planner/_files.py`` has the rules). ``execute`` creates
the run directory with the profile's modes, so every writer below it (supervisor, client worker, launcher,
``status``) agrees without being told. Here: the umask the allocation sets anyway (:func:`apply_umask`), for the
files that libraries and Slurm create on their own (logs, ``slurm-*.out``), and the mode of an input snapshot, which
never gets more permissions than its source (:func:`snapshot_mode`): a private seed file stays private in a
group-shared workspace.
"""

from __future__ import annotations

import os
import stat

from data_designer.slurm.planner import FileModes


def snapshot_mode(modes: FileModes, source_mode: int) -> int:
    """The mode of a copy of a file whose mode is ``source_mode``: the chosen file mode, at most the source's."""
    return modes.file & stat.S_IMODE(source_mode)


def apply_umask(modes: FileModes) -> int:
    """Set this process's umask to ``modes.umask`` (children and Slurm steps inherit it); returns the previous one."""
    return os.umask(modes.umask)
