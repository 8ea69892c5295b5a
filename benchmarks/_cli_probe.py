"""Run the host CLI once and record what it imported: ``python -I _cli_probe.py OUT.json [ARG ...]``.

It does what the ``data-designer`` console script does (``data_designer.cli.main.main()`` with
``sys.argv`` set), then, however the CLI exits, writes to OUT.json the exit code, the names in
``sys.modules`` (taken before this probe imports anything for its own bookkeeping) and the peak
resident set size. Standard library only: it also runs in a virtual environment that holds just
the host package.
"""

# No ``from __future__`` import: the probe itself imports nothing but ``sys`` before the CLI runs.
import sys


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def probe(out: str, args: list[str]) -> int:
    sys.argv = ["data-designer", *args]
    code = 1
    try:
        from data_designer.cli.main import main

        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    finally:
        modules = sorted(sys.modules)
        import json
        import resource

        record = {
            "exit_code": code,
            "modules": modules,
            "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
    return code


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1], sys.argv[2:]))
