"""Authored sbatch options resolved as sbatch's getopt resolves them, against the committed option table.

The spellings of reserved options are derived from the table itself: every unique prefix of a long name, the short
letter, and both ways of giving a value, so a new option in a future table changes what is tested with it.
"""

from __future__ import annotations

import json

import pytest

from data_designer.slurm.contracts import InvalidInputError, Problem
from data_designer.slurm.planner import (
    RESERVED_SBATCH_OPTIONS,
    SbatchOptionSpec,
    canonical_sbatch_options,
    load_profile,
    load_run,
    resolve_sbatch_options,
    sbatch_option_table,
)
from data_designer.slurm.planner._sbatch_options import sbatch_version

TABLE = sbatch_option_table()


def _problems(items: list[str]) -> list[Problem]:
    resolved = resolve_sbatch_options(items)
    assert resolved.problems, f"{items!r} was accepted as {resolved.options!r}"
    return list(resolved.problems)


def _unique_prefixes(name: str) -> list[str]:
    """Every spelling getopt resolves to ``--name``: the name, and each prefix no other long name starts with."""
    return [
        name[:end]
        for end in range(1, len(name) + 1)
        if name[:end] == name or [n for n in TABLE if n.startswith(name[:end])] == [name]
    ]


def _spellings(spec: SbatchOptionSpec) -> list[list[str]]:
    """Every way of writing ``spec`` that sbatch reads as that option, each as a list of argv items."""
    forms: list[list[str]] = []
    for prefix in _unique_prefixes(spec.name):
        if spec.argument == "none":
            forms.append([f"--{prefix}"])
        elif spec.argument == "optional":
            forms += [[f"--{prefix}"], [f"--{prefix}=v"]]
        else:
            forms += [[f"--{prefix}=v"], [f"--{prefix}", "v"]]
    if spec.short is not None:
        if spec.argument == "none":
            forms.append([f"-{spec.short}"])
        elif spec.argument == "optional":
            forms += [[f"-{spec.short}"], [f"-{spec.short}v"]]
        else:
            forms += [[f"-{spec.short}v"], [f"-{spec.short}", "v"]]
    return forms


# ---- the table ---------------------------------------------------------------------------------------------------


def test_the_table_is_slurm_22_05_with_its_origin() -> None:
    from importlib import resources

    text = resources.files("data_designer.slurm.planner").joinpath("data", "sbatch_options.json").read_text()
    origin = json.loads(text)["origin"]
    assert origin["sbatch_version"] == sbatch_version() == "slurm-wlm 22.05.8"
    assert origin["extracted_by"] == "scripts/extract-sbatch-options"
    assert "sbatch --help" in origin["commands"]
    assert origin["captured"]


@pytest.mark.parametrize(
    ("name", "short", "argument"),
    [
        ("partition", "p", "required"),
        ("account", "A", "required"),
        ("chdir", "D", "required"),
        ("nodes", "N", "required"),
        ("gres", None, "required"),
        ("comment", None, "required"),
        ("export", None, "required"),  # --help writes --export[=names]; the binary requires the argument
        ("wrap", None, "required"),  # --help writes --wrap[=command string]
        ("hold", "H", "none"),
        ("no-requeue", None, "none"),
        ("test-only", None, "none"),  # only in the man page
        ("nice", None, "optional"),
        ("exclusive", None, "optional"),
        ("no-kill", "k", "optional"),
        ("quiet", "Q", "none"),
    ],
)
def test_known_options_have_their_short_letter_and_argument(name: str, short: str | None, argument: str) -> None:
    assert TABLE[name] == SbatchOptionSpec(name=name, short=short, argument=argument)  # type: ignore[arg-type]


def test_the_table_has_the_shape_getopt_needs() -> None:
    assert len(TABLE) > 90
    shorts = [spec.short for spec in TABLE.values() if spec.short is not None]
    assert len(shorts) == len(set(shorts)), "a short letter names two options"
    assert all(len(letter) == 1 for letter in shorts)
    assert {spec.argument for spec in TABLE.values()} == {"required", "optional", "none"}


def test_every_reserved_option_is_a_real_option_with_a_reason() -> None:
    assert set(RESERVED_SBATCH_OPTIONS) <= set(TABLE), set(RESERVED_SBATCH_OPTIONS) - set(TABLE)
    assert all(RESERVED_SBATCH_OPTIONS.values())
    planned = {"job-name", "array", "output", "error", "signal", "requeue", "no-requeue", "export", "export-file"}
    planned |= {"chdir", "parsable", "wrap", "dependency", "nodes", "ntasks", "cpus-per-task", "cpus-per-gpu", "mem"}
    planned |= {"mem-per-cpu", "mem-per-gpu", "gres", "gpus", "exclusive", "time", "partition", "account", "hold"}
    planned |= {"clusters", "help", "usage", "version", "wait", "test-only", "input"}
    planned |= {n for n in TABLE if n.startswith(("ntasks-per-", "gpus-per-"))}
    assert planned <= set(RESERVED_SBATCH_OPTIONS), planned - set(RESERVED_SBATCH_OPTIONS)


# ---- reserved options, however spelled ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RESERVED_SBATCH_OPTIONS))
def test_every_spelling_of_a_reserved_option_is_refused_by_its_canonical_name(name: str) -> None:
    spec = TABLE[name]
    spellings = _spellings(spec)
    assert len(spellings) >= 2
    for items in spellings:
        problems = _problems(["--comment=before", *items, "--comment=after"])
        assert [(p.code, p.key_path) for p in problems] == [("reserved_sbatch_option", ("sbatch_options", 1))], items
        assert problems[0].message.startswith(f"sbatch option --{name}"), problems[0].message
        written = items[0].partition("=")[0] if items[0].startswith("--") else items[0][:2]
        if written != f"--{name}":
            assert f"(written {written!r})" in problems[0].message, problems[0].message
        assert problems[0].hint == f"remove it: {RESERVED_SBATCH_OPTIONS[name]}"


@pytest.mark.parametrize(
    ("items", "canonical"),
    [
        (["--wra=sh -c evil"], "wrap"),
        (["--part=gpu"], "partition"),
        (["--accou=a"], "account"),
        (["--sig=B:USR1@600"], "signal"),
        (["--no-req"], "no-requeue"),
        (["--dep=afterok:1"], "dependency"),
        (["--out=/tmp/x"], "output"),
        (["--chd=/tmp"], "chdir"),
        (["--nodes=8"], "nodes"),
        (["--gres=gpu:8"], "gres"),
        (["--ntasks-per-node=8"], "ntasks-per-node"),
        (["--clusters=other"], "clusters"),
        (["--hold"], "hold"),
        (["-N", "8"], "nodes"),
        (["-Hv"], "hold"),
        (["-vpgpu"], "partition"),
    ],
)
def test_the_abbreviations_that_overrode_the_plan_are_refused(items: list[str], canonical: str) -> None:
    problems = [p for p in _problems(items) if p.code == "reserved_sbatch_option"]
    assert len(problems) == 1
    assert problems[0].message.startswith(f"sbatch option --{canonical}")


def test_a_reserved_option_at_the_end_is_refused_as_reserved_not_as_missing_a_value() -> None:
    (problem,) = _problems(["--qos=high", "--part"])
    assert (problem.code, problem.key_path) == ("reserved_sbatch_option", ("sbatch_options", 1))


# ---- what sbatch could not read as one option ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "candidates"),
    [
        ("--gpu=1", ["gpu-bind", "gpu-freq", "gpus", "gpus-per-node", "gpus-per-socket", "gpus-per-task"]),
        ("--mem-per=1G", ["mem-per-cpu", "mem-per-gpu"]),
        ("--exp=ALL", ["export", "export-file"]),
        ("--con=a100", ["constraint", "container", "contiguous"]),
        ("--cluster=x", ["cluster-constraint", "clusters"]),
    ],
)
def test_an_ambiguous_prefix_is_refused_listing_its_candidates(item: str, candidates: list[str]) -> None:
    (problem,) = _problems([item])
    assert problem.code == "ambiguous_sbatch_option"
    assert problem.message.endswith("abbreviates " + ", ".join(f"--{c}" for c in candidates))


@pytest.mark.parametrize("items", [["--bogus"], ["--bogus=1"], ["--constrain-me=x"], ["-Z"], ["-QZ"], ["--=x"]])
def test_an_unknown_option_is_refused(items: list[str]) -> None:
    (problem,) = _problems(items)
    assert problem.code == "unknown_sbatch_option"
    assert "22.05" in problem.message
    assert problem.hint


def test_an_unknown_option_s_separate_value_is_not_reported_twice() -> None:
    assert [p.code for p in _problems(["--bogus", "value", "--qos=high"])] == ["unknown_sbatch_option"]


def test_an_unknown_option_close_to_a_real_one_suggests_it() -> None:
    (problem,) = _problems(["--constriant=a100"])
    assert problem.hint == "did you mean '--constraint'?"


@pytest.mark.parametrize(
    ("items", "at"), [(["--comment"], 0), (["--qos=high", "--comment"], 1), (["-C"], 0), (["-Qq"], 0)]
)
def test_a_value_taking_option_without_a_value_is_refused(items: list[str], at: int) -> None:
    (problem,) = _problems(items)
    assert (problem.code, problem.key_path) == ("sbatch_option_value", ("sbatch_options", at))
    assert "needs a value" in problem.message


def test_a_bare_value_taking_option_takes_the_next_item_as_sbatch_does() -> None:
    # sbatch would read the planner's --chdir as the comment; the canonical form makes that visible in the plan.
    assert canonical_sbatch_options(["--comment", "--chdir=/x"]) == ("--comment=--chdir=/x",)


@pytest.mark.parametrize("items", [["--quiet=x"], ["--contiguous=yes"]])
def test_an_option_without_an_argument_refuses_a_value(items: list[str]) -> None:
    (problem,) = _problems(items)
    assert problem.code == "sbatch_option_value"


def test_an_optional_argument_takes_a_value_only_after_an_equals_sign() -> None:
    (problem,) = _problems(["--nice", "10"])
    assert (problem.code, problem.key_path) == ("sbatch_option_form", ("sbatch_options", 1))
    assert problem.hint == "write '--nice=VALUE' as one item"
    assert canonical_sbatch_options(["--nice=10", "--nice"]) == ("--nice=10", "--nice")


@pytest.mark.parametrize("item", ["", "10", ":", "--", "-", "constraint=a100"])
def test_an_item_that_is_no_option_is_refused(item: str) -> None:
    (problem,) = _problems(["--qos=high", item])
    assert (problem.code, problem.key_path) == ("sbatch_option_form", ("sbatch_options", 1))


# ---- accepted options ---------------------------------------------------------------------------------------------


def test_accepted_options_are_canonicalised() -> None:
    items = ["--constr", "a100&ib", "-q", "high", "-Qv", "--mail-t=NONE", "--nice=10", "--comment", "a b"]
    items += ["-kx", "--exclude=n1", "-Cgpu", "--begin=now+1hour"]
    assert canonical_sbatch_options(items) == (
        "--constraint=a100&ib",
        "--qos=high",
        "--quiet",
        "--verbose",
        "--mail-type=NONE",
        "--nice=10",
        "--comment=a b",
        "--no-kill=x",
        "--exclude=n1",
        "--constraint=gpu",
        "--begin=now+1hour",
    )


def test_canonical_options_resolve_to_themselves() -> None:
    for spec in TABLE.values():
        if spec.name in RESERVED_SBATCH_OPTIONS:
            continue
        forms = [f"--{spec.name}=a=b c"] if spec.argument != "none" else [f"--{spec.name}"]
        forms += [f"--{spec.name}"] if spec.argument == "optional" else []
        for form in forms:
            assert canonical_sbatch_options([form]) == (form,)


def test_canonical_raises_one_error_with_every_problem() -> None:
    with pytest.raises(InvalidInputError) as caught:
        canonical_sbatch_options(["--part=gpu", "--bogus=1", "--nice", "5"], path=("submission", "sbatch_options"))
    assert caught.value.exit_code == 2
    assert [(p.code, p.key_path) for p in caught.value.problems] == [
        ("reserved_sbatch_option", ("submission", "sbatch_options", 0)),
        ("unknown_sbatch_option", ("submission", "sbatch_options", 1)),
        ("sbatch_option_form", ("submission", "sbatch_options", 3)),
    ]


# ---- loaders: problems with file, line and key path; canonical options in the result ------------------------------

PROFILE = """\
schema_version: 1
clusters:
  a:
    workspace_root: /ws
    partitions: {gpu: g, cpu: c}
    compute_python: {interpreter: /usr/bin/python3}
    sbatch_options:
      - --qos=high
      - -C
      - a100
      - --part=gpu
      - "--comment=x\\ny"
"""


def test_a_profile_refuses_a_reserved_abbreviation_naming_the_file_line_key_and_fix() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_profile(PROFILE, file="p.yaml")
    assert caught.value.exit_code == 2
    assert [(p.code, p.key_path, p.line) for p in caught.value.problems] == [
        ("reserved_sbatch_option", ("clusters", "a", "sbatch_options", 3), 11),
        ("control_character", ("clusters", "a", "sbatch_options", 4), 12),
    ]
    rendered = caught.value.problems[0].render()
    assert rendered.startswith("p.yaml:11: clusters.a.sbatch_options[3]: sbatch option --partition (written '--part')")
    assert "(fix: remove it: set 'partitions.gpu'" in rendered


def test_a_loaded_profile_holds_canonical_options() -> None:
    profile = load_profile(PROFILE.replace('      - --part=gpu\n      - "--comment=x\\ny"\n', ""), file="p.yaml")
    assert profile.clusters["a"].sbatch_options == ("--qos=high", "--constraint=a100")


RUN = """\
schema_version: 1
name: r
data_designer: {inline: {columns: []}}
records: 10
sharding: {shards: 1}
submission:
  sbatch_options: [--mail-type, END, --sign=USR1]
"""


def test_a_run_file_refuses_and_canonicalises_its_submission_options() -> None:
    with pytest.raises(InvalidInputError) as caught:
        load_run(RUN, file="run.yaml")
    (problem,) = caught.value.problems
    assert (problem.code, problem.key_path, problem.file) == (
        "reserved_sbatch_option",
        ("submission", "sbatch_options", 2),
        "run.yaml",
    )
    run = load_run(RUN.replace(", --sign=USR1", ""), file="run.yaml")
    assert run.submission.sbatch_options == ("--mail-type=END",)
