"""Accepted sbatch options leave the plan's resources alone, as the real sbatch 22.05 resolves them.

The planner's batch script and bound arguments are given to ``sbatch --test-only`` twice, with and without
authored options that the planner accepts (written abbreviated and with separate values, so they pass through the
canonicaliser); what sbatch says it would allocate (processors, nodes, partition) must be the same. A control
shows the comparison can fail: ``-N3``, an override sbatch honours, changes the answer, and the canonicaliser
refuses that spelling. ``--test-only`` submits nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from data_designer.slurm.contracts import InvalidInputError
from data_designer.slurm.planner import ScriptRequest, canonical_sbatch_options, render_script

pytestmark = [pytest.mark.cluster]

_WOULD_START = re.compile(r"using (?P<cpus>\d+) processors on nodes (?P<nodes>\S+) in partition (?P<partition>\S+)")
ACCEPTED = ["--comment", "ddslurm sbatch options", "--mail-t=NONE", "--nice=10", "-k", "--beg", "now"]


def _would_allocate(env: Mapping[str, str], args: Sequence[str], script: Path) -> tuple[str, str, str]:
    done = subprocess.run(
        ["sbatch", "--test-only", *args, str(script)], capture_output=True, text=True, timeout=30, env=env, check=False
    )
    match = _WOULD_START.search(done.stderr)
    assert done.returncode == 0, done.stderr
    assert match is not None, done.stderr
    return match["cpus"], match["nodes"], match["partition"]


def test_accepted_options_do_not_change_what_the_plan_allocates(local_slurm: dict[str, str], tmp_path: Path) -> None:
    env = {**os.environ, **local_slurm}
    rendered = render_script(
        ScriptRequest(
            nodes=2,
            cpus_per_node=2,
            memory_mb_per_node=1000,
            gres_gpus_per_node=1,
            exclusive=False,
            time_limit="00:05:00",
            partition="gpu",
            account=None,
            warning_lead_s=60,
            requeue=False,
            launcher=("/usr/bin/python3",),
        )
    )
    script = tmp_path / "allocation.sbatch"
    script.write_text(rendered.script, encoding="utf-8")
    logs = f"{tmp_path}/slurm-%x_%a"
    # The order bind_submission gives: authored options first, then what the planner binds.
    planned = [*rendered.sbatch_args, f"--chdir={tmp_path}", f"--output={logs}.out", f"--error={logs}.err"]
    authored = canonical_sbatch_options(ACCEPTED)
    assert authored == (
        "--comment=ddslurm sbatch options",
        "--mail-type=NONE",
        "--nice=10",
        "--no-kill",
        "--begin=now",
    )

    alone = _would_allocate(env, ["--job-name=ddct-opts", "--array=0-1", *planned], script)
    with_authored = _would_allocate(env, ["--job-name=ddct-opts", "--array=0-1", *authored, *planned], script)

    assert alone == with_authored
    assert (alone[0], alone[2]) == ("4", "gpu")  # 2 nodes x 2 CPUs on the plan's partition

    # The control: an override sbatch would have honoured changes the answer, and its abbreviation is refused.
    overridden = _would_allocate(env, ["--job-name=ddct-opts", "-N3", *planned], script)
    assert overridden != alone
    with pytest.raises(InvalidInputError) as caught:
        canonical_sbatch_options(["-N3"])
    assert caught.value.problems[0].message.startswith("sbatch option --nodes (written '-N') is reserved")
