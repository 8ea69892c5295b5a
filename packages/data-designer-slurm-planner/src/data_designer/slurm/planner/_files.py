"""The one bounded reader of the files a user names, and the one durable writer (the shell's I/O, not the planner's).

The planner's own CLI (``_main.py``) and the runtime's store read and write through these; nothing else in the
planner does I/O.

**Reading.** A path may name anything: a FIFO blocks a plain ``open`` forever, ``/dev/zero`` (or a symbolic link
to it) reads until memory runs out, and a 50 MB YAML file takes a minute to parse. :func:`read_bounded` opens
without blocking (``O_NONBLOCK``: a FIFO without a writer opens at once), checks what it opened with ``fstat`` (a
symbolic link to a regular file is fine, since the check is on what it points at), refuses a size over the cap
before reading, and reads at most the cap plus one byte, so a file growing meanwhile is refused too. The caps are
the contracts' ``MAX_INPUT_FILE_BYTES`` (authored YAML/JSON) and ``MAX_SEED_FILE_BYTES``.

**Writing.** Writes go to a temporary file in the target's directory, are fsynced, then renamed (replace) or
hard-linked (create-only, which fails if the target appeared meanwhile: ``link(2)`` is atomic on NFS and Lustre
where ``O_EXCL`` on the final name may not be). Nothing is ever left half-written under the final name.

**Outputs.** Every file a command writes at a path the user named (``--plot FILE``, ``profile init --profile``, the
files of ``--out DIR``) goes through :func:`write_output`: a symbolic link at the target (a dangling one too) is
refused, an existing file is replaced only with ``force``, a missing parent directory is never created (the error
names it and the fix), and the file is private (0600) unless it is written into a group-shared workspace's
directory. :func:`check_output_location` is its first half, for a command that checks before it works (``merge
--output DIR`` publishes a directory, not a file, and checks its target with it). A name or path over the file
system's limit (``ENAMETOOLONG``) is :func:`name_too_long` (exit 2) wherever an OS error is translated.

**Modes.** A workspace is private by default (directories 0700, files 0600, umask 077) or shared with its group
(profile ``workspace_sharing: group``: directories 0770 with setgid so that new entries keep the directory's
group, files 0660, umask 007). Writers set modes explicitly (``fchmod``/``chmod`` after creating), never through
the umask: a login shell's umask 022 must not make a private run readable, and a umask of 077 must not strip the
group bits of a shared one. A writer that is not told the modes takes them from the directory it writes into
(:func:`modes_of_directory`): a setgid directory belongs to a group-shared workspace, anything else to a private
one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import (
    MAX_INPUT_FILE_BYTES,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
    WorkspaceSharing,
    describe_bytes,
)

TOO_LARGE_HINT = (
    "profiles, run, benchmark and Data Designer config files are small YAML or JSON; put bulk data in a seed dataset"
)

_CHUNK = 1 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


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


# --- reading ----------------------------------------------------------------------------------------------------------


def read_bounded(
    path: Path | str,
    *,
    operation: str,
    limit: int = MAX_INPUT_FILE_BYTES,
    too_large_hint: str = TOO_LARGE_HINT,
    what: str = "",
) -> bytes:
    """The bytes of the regular file ``path``, refused (exit 2) when it is anything else or holds over ``limit``.

    ``what`` names the file in messages (``profile '/p.yaml' does not exist``).
    """
    name = str(path)
    shown = f"{what} {name!r}" if what else repr(name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(exc, name, shown, operation) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((label for test, label in _KINDS if test(info.st_mode)), "not a regular file")
            raise _not_a_file(name, shown, kind, operation)
        if info.st_size > limit:
            raise _too_large(name, f"{shown} is {describe_bytes(info.st_size)}", limit, too_large_hint, operation)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise _too_large(name, f"{shown} grew while it was read", limit, too_large_hint, operation)
        return b"".join(chunks)
    except OSError as exc:
        raise UnavailableError(
            f"cannot read {shown}: {exc.strerror}", code="filesystem_unavailable", operation=operation, file=name
        ) from exc
    finally:
        os.close(fd)


def read_text(path: Path | str, *, operation: str, limit: int = MAX_INPUT_FILE_BYTES, what: str = "") -> str:
    """Read a UTF-8 text file of at most ``limit`` bytes (:func:`read_bounded`: regular files only), mapping
    failures onto the error tree."""
    data = read_bounded(path, operation=operation, limit=limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = f"{what} {str(path)!r}" if what else repr(str(path))
        raise InvalidInputError(
            f"{shown} is not UTF-8 text", code="not_utf8", operation=operation, file=str(path), hint="save it as UTF-8"
        ) from exc


def _open_error(exc: OSError, name: str, shown: str, operation: str) -> Exception:
    if isinstance(exc, FileNotFoundError):
        return NotFoundError(
            f"{shown} does not exist", code="file_not_found", operation=operation, file=name, hint="check the path"
        )
    if isinstance(exc, IsADirectoryError):
        return _not_a_file(name, shown, "a directory", operation)
    if exc.errno == errno.ENXIO:  # a socket, or a device without its driver
        return _not_a_file(name, shown, "a socket or device", operation)
    if isinstance(exc, PermissionError):
        return InvalidInputError(
            f"{shown} is not readable",
            code="permission_denied",
            operation=operation,
            file=name,
            hint="fix its permissions",
        )
    if exc.errno == errno.ENAMETOOLONG:
        return name_too_long(name, operation)
    if exc.errno == errno.ELOOP:
        return InvalidInputError(
            f"{shown} is a loop of symbolic links",
            code="not_a_file",
            operation=operation,
            file=name,
            hint="point the link at a regular file",
        )
    return UnavailableError(
        f"cannot read {shown}: {exc.strerror}", code="filesystem_unavailable", operation=operation, file=name
    )


def _not_a_file(name: str, shown: str, kind: str, operation: str) -> InvalidInputError:
    return InvalidInputError(
        f"{shown} is {kind}, not a regular file",
        code="not_a_file",
        operation=operation,
        file=name,
        hint="name a regular file (a symbolic link to one is fine)",
    )


def _too_large(name: str, what: str, limit: int, hint: str, operation: str) -> InvalidInputError:
    return InvalidInputError(
        f"{what}, above the limit of {describe_bytes(limit)}",
        code="file_too_large",
        operation=operation,
        file=name,
        hint=hint,
    )


# --- writing ----------------------------------------------------------------------------------------------------------


def write_text_atomic(
    path: Path, text: str, *, overwrite: bool, operation: str, mode: int | None = None, modes: FileModes | None = None
) -> bool:
    """:func:`write_output` of ``text`` (UTF-8) at a path the tool chose itself, whose missing parent directories it
    may make (the default profile's ``~/.config/data-designer-slurm/``, the subdirectories of an ``--out DIR`` it
    created); returns whether an existing file was replaced.

    Missing directories are made with ``modes`` (default: those of the nearest existing directory,
    :func:`modes_of_directory`); the file gets ``mode`` (default: ``modes.file``). Everything else is
    :func:`write_output`'s rule: no symbolic link at the target, :class:`ConflictError` for an existing file unless
    ``overwrite``.
    """
    directory = path.parent
    chosen = modes_of_directory(directory) if modes is None else modes
    try:
        make_directories(directory, chosen)
    except OSError as exc:
        raise output_os_error(exc, path, operation, None, verb=f"create directory {str(directory)!r} for") from exc
    return write_output(path, text.encode("utf-8"), force=overwrite, operation=operation, modes=chosen, mode=mode)


def write_output(
    path: Path,
    data: bytes,
    *,
    force: bool,
    operation: str,
    modes: FileModes | None = None,
    mode: int | None = None,
    key_path: tuple[str, ...] | None = None,
) -> bool:
    """Write ``data`` at the user-named ``path``, the one way a command writes an output file; returns whether an
    existing file was replaced.

    Refused: a symbolic link at ``path`` (dangling or not; exit 2, ``output_symlink``), a directory or other
    non-regular file there (exit 2, ``not_a_file``), an existing file without ``force`` (exit 4, ``file_exists``), a
    missing parent directory (exit 2, ``output_parent_missing``: never made), a name over the file system's limit
    (exit 2, ``name_too_long``), an unwritable location (exit 2, ``permission_denied``). The bytes go to a temporary
    file in the target's directory, fsynced, then renamed over the target (``force``) or hard-linked to it (create
    only: a file that appeared meanwhile is a conflict, never overwritten). The file gets ``mode``, else
    ``modes.file``, else that of :func:`modes_of_directory` of its directory: 0600, or 0660 inside a group-shared
    workspace. ``key_path`` names the option that gave the path (``("--plot",)``).
    """
    existed = check_output_location(path, force=force, operation=operation, key_path=key_path)
    directory = path.parent
    chosen = modes_of_directory(directory) if modes is None else modes
    temp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        write_new_file(temp, data, chosen.file if mode is None else mode)
        if force:
            os.replace(temp, path)  # rename(2) replaces a symbolic link that appeared meanwhile, never follows it
        else:
            try:
                os.link(temp, path)
            except FileExistsError as exc:
                raise _exists(path, operation, key_path) from exc
            finally:
                os.unlink(temp)
        fsync_directory(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise output_os_error(exc, path, operation, key_path) from exc
    return existed


def check_output_location(
    path: Path, *, force: bool, operation: str, key_path: tuple[str, ...] | None = None, directory_ok: bool = False
) -> bool:
    """The refusals of :func:`write_output` that need no writing, for a command to make before it works; returns
    whether something exists at ``path`` (then it is a regular file and ``force`` was given, or, with
    ``directory_ok``, a directory the caller judges itself).

    Never follows a symbolic link at ``path``; never creates anything.
    """
    name = str(path)
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise output_os_error(exc, path, operation, key_path) from exc
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise InvalidInputError(
                f"{name!r} is a symbolic link; an output is never written through one",
                code="output_symlink",
                operation=operation,
                file=name,
                key_path=key_path,
                hint="name the file itself (a path that is not a symbolic link), or remove the link first",
            )
        if directory_ok and stat.S_ISDIR(info.st_mode):
            return True
        if not stat.S_ISREG(info.st_mode):
            kind = next((label for test, label in _KINDS if test(info.st_mode)), "not a regular file")
            raise InvalidInputError(
                f"{name!r} is {kind}, not a regular file",
                code="not_a_file",
                operation=operation,
                file=name,
                key_path=key_path,
                hint="name a new file, or an existing regular file with --force",
            )
        if not force:
            raise _exists(path, operation, key_path)
    directory = path.parent
    try:
        parent = os.stat(directory)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise _no_parent(path, operation, key_path, "does not exist") from exc
        raise output_os_error(exc, path, operation, key_path) from exc
    if not stat.S_ISDIR(parent.st_mode):
        raise _no_parent(path, operation, key_path, "is not a directory")
    return info is not None


def name_too_long(name: str, operation: str, *, key_path: tuple[str, ...] | None = None) -> InvalidInputError:
    """Exit 2 (``name_too_long``) for a path the file system refused with ``ENAMETOOLONG``, naming the part that is
    over its limit: one name (a path component) over ``NAME_MAX`` bytes, else the whole path over ``PATH_MAX``."""
    name_max, path_max = _limits(name)
    parts = [part for part in name.split("/") if part]
    longest = max(parts, key=lambda part: len(os.fsencode(part)), default="")
    size = len(os.fsencode(longest))
    if size > name_max:
        shown = longest if len(longest) <= 40 else longest[:37] + "..."
        what = f"has a name of {size} bytes ({shown!r}), over the file system's limit of {name_max} bytes per name"
    else:
        what = f"is {len(os.fsencode(name))} bytes long, over the file system's limit ({path_max} bytes per path)"
    return InvalidInputError(
        f"path {name!r} {what}",
        code="name_too_long",
        operation=operation,
        file=name,
        key_path=key_path,
        hint=f"use shorter names: at most {name_max} bytes per path component",
    )


def _limits(name: str) -> tuple[int, int]:
    """``NAME_MAX`` and ``PATH_MAX`` of the file system of the nearest existing ancestor of ``name``."""
    path = Path(name)
    for candidate in (*path.parents, Path(".")):
        try:
            return os.pathconf(candidate, "PC_NAME_MAX"), os.pathconf(candidate, "PC_PATH_MAX")
        except (OSError, ValueError):
            continue
    return 255, 4096  # pragma: no cover - no ancestor answers: Linux's defaults


def _no_parent(path: Path, operation: str, key_path: tuple[str, ...] | None, why: str) -> InvalidInputError:
    directory = str(path.parent)
    return InvalidInputError(
        f"cannot write {str(path)!r}: its directory {directory!r} {why} (it is never created for you)",
        code="output_parent_missing",
        operation=operation,
        file=str(path),
        key_path=key_path,
        hint=f"create the directory first (mkdir -p {directory!r}), or name a path in an existing directory",
    )


def output_os_error(
    exc: OSError, path: Path, operation: str, key_path: tuple[str, ...] | None = None, *, verb: str = "write"
) -> Exception:
    """The error for ``exc`` raised while writing the output ``path``: too long a name, a missing parent or an
    unwritable location exit 2, anything else the filesystem's (exit 5)."""
    if exc.errno == errno.ENAMETOOLONG:
        return name_too_long(str(path), operation, key_path=key_path)
    if exc.errno in (errno.ENOTDIR, errno.ENOENT):
        return _no_parent(path, operation, key_path, "does not exist or is not a directory")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return InvalidInputError(
            f"cannot {verb} {str(path)!r}: {exc.strerror}",
            code="permission_denied",
            operation=operation,
            file=str(path),
            key_path=key_path,
            hint="choose a writable location",
        )
    return UnavailableError(
        f"cannot {verb} {str(path)!r}: {exc.strerror}",
        code="filesystem_unavailable",
        operation=operation,
        file=str(path),
    )


def _exists(path: Path, operation: str, key_path: tuple[str, ...] | None = None) -> ConflictError:
    return ConflictError(
        f"{str(path)!r} already exists",
        code="file_exists",
        operation=operation,
        file=str(path),
        key_path=key_path,
        hint="pass --force to overwrite it",
    )


def make_directories(directory: Path, modes: FileModes, *, exclusive: bool = False) -> list[Path]:
    """``mkdir -p`` with ``modes.directory`` set explicitly (setgid included, whatever the umask) on every
    directory created, each created one fsynced into its parent; returns the directories created, outermost first.

    A directory that already exists is left as it is (a concurrent creator's is fine), except ``directory``
    itself with ``exclusive``: then :class:`FileExistsError` says someone else has it.
    """
    missing: list[Path] = []
    for candidate in (directory, *directory.parents):
        if os.path.isdir(candidate):
            break
        missing.append(candidate)
    if exclusive and not missing:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(directory))
    created: list[Path] = []
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            if os.path.isdir(path) and not (exclusive and path == directory):
                continue
            raise
        os.chmod(path, modes.directory)
        created.append(path)
        fsync_directory(path.parent)
    return created


def write_new_file(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (exclusively) holding exactly ``data`` with ``mode``, fsynced; short writes are resumed.

    Created 0600 and widened to ``mode`` with ``fchmod`` only once it is complete: the umask plays no part.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        write_all(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``: ``os.write`` may write fewer bytes than asked (signals, NFS, quotas)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never for a regular file; refuse to spin
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` durable (a created or renamed name survives a crash)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - some filesystems refuse opening directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - fsync on a directory is unsupported on some filesystems
        pass
    finally:
        os.close(fd)
