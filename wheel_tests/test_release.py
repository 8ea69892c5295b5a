"""release_check: the artifacts in dist/ release as one (runs in the workspace venv, reads dist/ like test_dist.py).

- Each sdist, unpacked on its own, rebuilds (``uv build --wheel``) a wheel whose RECORD equals the one in dist/:
  every path with its sha256 and size, not only the file names. RECORD hashes file contents, never timestamps, and
  the build backend writes METADATA and entry points deterministically, so equal bytes are the honest expectation;
  a difference means the sdist lacks something the wheel was built from.
- An sdist's PKG-INFO says what its wheel's METADATA says (name, version, Python, requirements, extras): versions
  are lockstep and siblings pinned ``==VERSION`` in every artifact (test_dist.py checks the wheels' pins in
  ``build``; the sdists are checked here).
- Each README renders as the index page would: readme_renderer (Warehouse's renderer) turns the wheel's markdown
  long description into HTML that is not empty and names the distribution. ``twine check`` does not render
  markdown at all, so this is the only check that it does.
- The docs (fern/pages/*.mdx, README.md, the packages' READMEs) name this release only: every X.Y.Z version of
  ours in them (one with a local label or on our major version) and every ``data-designer...==`` pin is VERSION or
  its public part.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable, Mapping
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from readme_renderer.markdown import render

REPO = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = (
    "data-designer-slurm-contracts",
    "data-designer-slurm-planner",
    "data-designer-slurm-runtime",
    "data-designer-slurm",
)
DOCS = (*sorted(REPO.glob("fern/pages/*.mdx")), REPO / "README.md", *sorted(REPO.glob("packages/*/README.md")))
# Metadata fields an sdist's PKG-INFO must share with its wheel's METADATA (multi-valued ones compared as sets).
SHARED_FIELDS = ("Name", "Version", "Requires-Python", "Summary", "Description-Content-Type")
SHARED_LISTS = ("Requires-Dist", "Provides-Extra")

# A full X.Y.Z version, optionally with a pre-release segment and a local label (1.0.0rc1, 1.0.0rc1+ddslurm). It
# counts as ours when it has a local label or shares our major version: the docs name other projects' versions too
# (vLLM 0.33.0rc1, Typer 0.29, Python 3.11), all on other majors or with fewer components, while a stale mention of
# an earlier release of ours (1.0.0rc1 once we are 1.0.0) keeps our major.
_FULL_VERSION = re.compile(r"(?<![\w.+-])(\d+)\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\+[a-z0-9.]+)?(?![\w+]|\.\d)")
# A pin of the host or of one of our distributions to a version, with or without extras: data-designer[slurm]==X.
# A placeholder (``==VERSION``, as the troubleshooting page writes it) is not a version and is not matched.
_PIN = re.compile(r"\bdata-designer(?:-slurm(?:-[a-z]+)?)?(?:\[[a-z,]+\])?==(\d(?:[A-Za-z0-9.+!_-]*[A-Za-z0-9])?)")


def _stem(name: str, version: str) -> str:
    return f"{name.replace('-', '_')}-{version}"


def _wheel_record(wheel: Path, name: str, version: str) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return sorted(archive.read(f"{_stem(name, version)}.dist-info/RECORD").decode("utf-8").splitlines())


def _sdist_metadata(sdist: Path, stem: str) -> Message:
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"{stem}/PKG-INFO")
        assert member is not None, f"{sdist.name} has no {stem}/PKG-INFO"
        return Parser().parsestr(member.read().decode("utf-8"))


@pytest.fixture(scope="module")
def rebuilt(dist_dir: Path, version: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The wheel that ``uv build --wheel`` makes from each sdist in dist/, unpacked alone in a temporary directory."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not on PATH: release_check rebuilds each wheel from its sdist with `uv build`")
    wheels: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in wheels:
            stem = _stem(name, version)
            scratch = tmp_path_factory.mktemp(f"rebuild-{name}")
            with tarfile.open(dist_dir / f"{stem}.tar.gz") as archive:
                archive.extractall(scratch / "src", filter="data")
            out = scratch / "out"
            done = subprocess.run(
                [uv, "build", "--wheel", str(scratch / "src" / stem), "--out-dir", str(out)],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"uv build --wheel from {stem}.tar.gz failed:\n{done.stdout}\n{done.stderr}"
            (wheel,) = out.glob("*.whl")
            wheels[name] = wheel
        return wheels[name]

    return build


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_wheel_rebuilt_from_the_sdist_has_the_same_record(
    name: str, rebuilt: Callable[[str], Path], wheel_path: Callable[[str], Path], version: str
) -> None:
    wheel = rebuilt(name)
    assert wheel.name == wheel_path(name).name
    assert _wheel_record(wheel, name, version) == _wheel_record(wheel_path(name), name, version)


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_sdist_metadata_is_the_wheel_metadata_and_pins_siblings_exactly(
    name: str, dist_dir: Path, wheel_metadata: Callable[[str], Message], version: str
) -> None:
    wheel = wheel_metadata(name)
    sdist = _sdist_metadata(dist_dir / f"{_stem(name, version)}.tar.gz", _stem(name, version))
    assert {field: sdist[field] for field in SHARED_FIELDS} == {field: wheel[field] for field in SHARED_FIELDS}
    for field in SHARED_LISTS:
        assert sorted(sdist.get_all(field) or []) == sorted(wheel.get_all(field) or []), field
    assert sdist["Version"] == version
    siblings = [r for r in sdist.get_all("Requires-Dist") or [] if r.startswith("data-designer-slurm")]
    assert all(r.endswith(f"=={version}") and r.count("=") == 2 for r in siblings), siblings


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_the_readme_renders_as_the_index_page(name: str, wheel_metadata: Callable[[str], Message]) -> None:
    metadata = wheel_metadata(name)
    content_type = metadata["Description-Content-Type"]
    assert content_type is not None
    assert content_type.split(";")[0].strip() == "text/markdown", content_type
    variant = re.search(r"variant=([\w-]+)", content_type)
    description = metadata.get_payload()
    assert isinstance(description, str)
    assert description.strip(), f"{name}: the wheel's long description (its README) is empty"
    html = render(description, variant=variant.group(1) if variant else "GFM")
    assert html is not None, f"{name}: readme_renderer could not render the README (is readme-renderer[md] installed?)"
    assert re.sub(r"<[^>]+>", "", html).strip(), f"{name}: the README renders to no text"
    assert f">{name}<" in html, f"{name}: the rendered README does not name the distribution:\n{html[:500]}"


def version_problems(text: str, where: str, version: str) -> list[str]:
    """Every version of ours in ``text`` that is not this release: ``where:line: found ..., write ...``."""
    public = version.split("+", 1)[0]
    major = public.split(".", 1)[0]
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _FULL_VERSION.finditer(line):
            found = match.group(0)
            if "+" not in found and match.group(1) != major:
                continue  # another project's version
            want = version if "+" in found else public
            if found != want:
                problems.append(f"{where}:{number}: {found!r} is not this release: write {want!r}")
        for match in _PIN.finditer(line):
            found = match.group(1)
            if found not in (public, version):
                problems.append(f"{where}:{number}: {match.group(0)!r} pins another release: write =={public}")
    return problems


def test_the_version_check_flags_other_releases() -> None:
    version = "1.0.0rc1+ddslurm"
    good = (
        'pip install --pre "data-designer[slurm]==1.0.0rc1" gives `1.0.0rc1+ddslurm` (Python 3.11, typer 0.29, '
        "vLLM 0.33.0rc1 or 0.8.5), data-designer-slurm==VERSION"
    )
    assert version_problems(good, "page.mdx", version) == []
    bad = "data-designer[slurm]==1.0.0rc2, the 1.0.0rc1+other build, 1.0.0 final, data-designer-slurm-planner==0.9.7"
    assert version_problems(bad, "page.mdx", version) == [
        "page.mdx:1: '1.0.0rc2' is not this release: write '1.0.0rc1'",
        "page.mdx:1: '1.0.0rc1+other' is not this release: write '1.0.0rc1+ddslurm'",
        "page.mdx:1: '1.0.0' is not this release: write '1.0.0rc1'",
        "page.mdx:1: 'data-designer[slurm]==1.0.0rc2' pins another release: write ==1.0.0rc1",
        "page.mdx:1: 'data-designer-slurm-planner==0.9.7' pins another release: write ==1.0.0rc1",
    ]


def test_the_docs_name_this_release_only(version: str) -> None:
    texts: Mapping[Path, str] = {path: path.read_text(encoding="utf-8") for path in DOCS}
    problems = [p for path, text in texts.items() for p in version_problems(text, str(path.relative_to(REPO)), version)]
    assert problems == []
    public = version.split("+", 1)[0]
    for page in (REPO / "README.md", REPO / "fern" / "pages" / "installation.mdx"):
        # Not vacuous: the install instructions exist and spell this release.
        assert f'"data-designer[slurm]=={public}"' in texts[page], page
