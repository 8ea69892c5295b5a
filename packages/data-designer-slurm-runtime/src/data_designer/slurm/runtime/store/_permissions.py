"""Who may read what a run writes: the modes of every file and directory in a workspace.

A workspace is private by default (directories 0700, files 0600, umask 077) or shared with its group
(profile ``workspace_sharing: group``: directories 0770 with setgid so that new entries keep the
directory's group, files 0660, umask 007). Writers set modes explicitly (``fchmod``/``chmod`` after
creating), never through the umask: a login shell's umask 022 must not make a private run readable, and
a umask of 077 must not strip the group bits of a shared one. The allocation sets the umask anyway
(:func:`apply_umask`), for the files that libraries and Slurm create on their own (logs, ``slurm-*.out``).

A writer that is not told the modes takes them from the directory it writes into
(:func:`modes_of_directory`): a setgid directory belongs to a group-shared workspace, anything else to a
private one. ``execute`` creates the run directory with the profile's modes, so every writer below it
(supervisor, client worker, launcher, ``status``) agrees without being told.

An input snapshot never gets more permissions than its source (:func:`snapshot_mode`): a private seed
file stays private in a group-shared workspace.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import WorkspaceSharing


@dataclass(frozen=True, slots=True)
class FileModes:
    """The modes of one sharing level: new files, new directories (with setgid for a group) and the umask."""

    sharing: WorkspaceSharing
    file: int
    directory: int
    umask: int


PRIVATE_MODES = FileModes(sharing="private", file=0o600, directory=0o700, umask=0o077)
GROUP_MODES = FileModes(sharing="group", file=0o660, directory=0o2770, umask=0o007)


def modes_for(sharing: WorkspaceSharing) -> FileModes:
    """The modes of a profile's ``workspace_sharing``."""
    return GROUP_MODES if sharing == "group" else PRIVATE_MODES


def modes_of_directory(directory: Path) -> FileModes:
    """The modes to write with in ``directory``: group when its nearest existing ancestor (or itself) is setgid."""
    for candidate in (directory, *directory.parents):
        try:
            mode = os.stat(candidate).st_mode
        except OSError:  # missing (or unreadable): ask the parent
            continue
        return GROUP_MODES if mode & stat.S_ISGID else PRIVATE_MODES
    return PRIVATE_MODES


def snapshot_mode(modes: FileModes, source_mode: int) -> int:
    """The mode of a copy of a file whose mode is ``source_mode``: the chosen file mode, at most the source's."""
    return modes.file & stat.S_IMODE(source_mode)


def apply_umask(modes: FileModes) -> int:
    """Set this process's umask to ``modes.umask`` (children and Slurm steps inherit it); returns the previous one."""
    return os.umask(modes.umask)
