"""The image registry of a workspace: ``<workspace>/images/<name>/<generation:04d>.json``, write-once per generation.

A name's current entry is its highest readable generation (a tombstone, ``removed: true``, means the name has no
image now); a new generation is taken with ``link(2)`` (:func:`store.write_record_once`), so of two writers of
one generation exactly one wins and the loser reads the registry again. Nothing is rewritten, there are no lock
files, and two names never share a file: concurrent ``image add`` of different names cannot disturb each other.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from data_designer.slurm.contracts import UnavailableError
from data_designer.slurm.contracts.records import IMAGE_SCHEMA, ImageEntry
from data_designer.slurm.runtime.store import (
    Clock,
    FileModes,
    RecordConflict,
    RecordOk,
    check_component,
    make_directories,
    read_record,
    system_clock,
    write_record_once,
)

IMAGES_DIR = "images"
DIGESTS_DIR = "digests"
_GENERATION = re.compile(r"^(?P<number>[0-9]{4,})\.json$")
_OPERATION = "images.registry"


@dataclass(frozen=True)
class ImageHistory:
    """Every generation of one name, ascending, and the names of generation files that could not be read."""

    name: str
    entries: tuple[ImageEntry, ...]
    unreadable: tuple[str, ...] = ()
    highest: int = 0
    """The highest generation number on disk, readable or not (the next one is one past it)."""

    @property
    def current(self) -> ImageEntry | None:
        """The newest entry, None when the name has none or its newest is a tombstone."""
        if not self.entries or self.entries[-1].removed:
            return None
        return self.entries[-1]


class ImageRegistry:
    """The registry under ``<root>/images/`` (pure paths plus record reads and write-once writes)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.directory = self.root / IMAGES_DIR

    def name_dir(self, name: str) -> Path:
        return self.directory / check_component(name, "image name")

    def generation_file(self, name: str, generation: int) -> Path:
        return self.name_dir(name) / f"{generation:04d}.json"

    def digests_dir(self, name: str) -> Path:
        """Where the digests of this name's image files are cached by identity."""
        return self.name_dir(name) / DIGESTS_DIR

    def names(self) -> tuple[str, ...]:
        """Every name with a directory (sorted); a name whose newest entry is a tombstone included."""
        try:
            return tuple(sorted(n for n in os.listdir(self.directory) if not n.startswith(".")))
        except (FileNotFoundError, NotADirectoryError):
            return ()
        except OSError as exc:
            raise _unavailable(self.directory, exc) from exc

    def history(self, name: str) -> ImageHistory:
        directory = self.name_dir(name)
        try:
            files = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return ImageHistory(name, ())
        except OSError as exc:
            raise _unavailable(directory, exc) from exc
        numbered = sorted(
            (int(match.group("number")), file) for file in files if (match := _GENERATION.fullmatch(file))
        )
        entries: list[ImageEntry] = []
        unreadable: list[str] = []
        for number, file in numbered:
            found = read_record(directory / file, IMAGE_SCHEMA)
            if isinstance(found, RecordOk) and found.payload.generation == number and found.payload.name == name:
                entries.append(found.payload)
            else:
                unreadable.append(f"{file}: {found.status if not isinstance(found, RecordOk) else 'mismatched'}")
        return ImageHistory(name, tuple(entries), tuple(unreadable), numbered[-1][0] if numbered else 0)

    def current(self, name: str) -> ImageEntry | None:
        return self.history(name).current

    def write_generation(self, entry: ImageEntry, modes: FileModes, *, clock: Clock = system_clock) -> bool:
        """Write ``entry`` as its generation of its name, once; False when another writer took that generation."""
        make_directories(self.name_dir(entry.name), modes)
        written = write_record_once(
            self.generation_file(entry.name, entry.generation), IMAGE_SCHEMA, entry, clock=clock, operation=_OPERATION
        )
        return not isinstance(written, RecordConflict)


def _unavailable(path: Path, exc: OSError) -> UnavailableError:
    return UnavailableError(
        f"cannot list {str(path)!r}: {exc.strerror}",
        code="filesystem_unavailable",
        operation=_OPERATION,
        file=str(path),
        hint="check the workspace on the shared filesystem",
    )
