"""Feed argvs through one vLLM's real ``vllm serve`` parse path, on the CPU (standard library + vLLM only).

    VLLM_TARGET_DEVICE=cpu python tests/vllm_parser/check.py --cases CASES.json --version 0.33.0 [--report OUT.json]

Runs inside a venv holding that vLLM and none of our packages (the ``vllm_parser`` nox session makes it);
``CASES.json`` comes from ``tests/vllm_parser/cases.py``. For each check of ``--version`` it does what ``vllm serve``
does, up to the point where it would bind a socket or load a model:

1. builds the parser as ``vllm/entrypoints/cli/main.py`` does: ``FlexibleArgumentParser``, its ``-v`` option, the
   subcommand parsers with ``serve``'s from ``ServeSubcommand.subparser_init`` (``make_arg_parser``), after
   ``cli_env_setup()``; then ``parse_args`` of the argv without its leading ``vllm``;
2. ``configure_logging_from_args`` and ``ServeSubcommand.validate`` (``validate_parsed_serve_args``), as main does;
3. ``ServeSubcommand.cmd`` itself, with the four launchers it may dispatch to (``run_server``, ``run_headless``,
   ``run_multi_api_server``, ``run_dp_supervisor``) replaced by recorders: which one it picks is checked. The
   ``run_server`` recorder runs vLLM's real ``setup_server`` (logging, parser plugins, ``validate_api_server_args``)
   with the socket creation replaced by a recorder of the address it would bind; nothing listens, nothing connects;
4. ``AsyncEngineArgs.from_cli_args`` and ``propagate_flash_late_interaction``, as both launchers do first.

``create_engine_config`` is not called: it loads the model's config (a download, or the model's files). Then every
expected value is compared with the parsed namespace (and with the engine args, for their fields). The exit status is
0 only when every check passed; the last line is ``vllm VERSION: N passed, M failed``. A check with ``must_fail``
(a control) passes only when it fails at that stage (``parse``, ``validate``, ``serve``, ``engine args`` or
``wrong``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import importlib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

LAUNCHERS = ("run_server", "run_headless", "run_multi_api_server", "run_dp_supervisor")
LAUNCH_NAMES = {"run_server": "api_server", "run_headless": "headless"}
CLI_ENV_MODULES = ("vllm.entrypoints.common.startup", "vllm.entrypoints.serve.utils.api_utils")
"""Where ``cli_env_setup`` lives (0.33, 0.32): main.py imports it from the one its release has."""
PSEUDO_KEYS = frozenset({"launch", "listen"})
_MISSING = object()


class CheckFailed(Exception):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage


def _cli_env_setup() -> Callable[[], None]:
    for name in CLI_ENV_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise  # the module is there but needs something this venv lacks
            continue
        found = getattr(module, "cli_env_setup", None)
        if callable(found):
            return found  # type: ignore[no-any-return]
    raise RuntimeError(f"no cli_env_setup in any of {', '.join(CLI_ENV_MODULES)}: vllm's main.py moved it")


class Recorder:
    """Stands in for the launchers and for the server socket; remembers what ``vllm serve`` asked of them."""

    def __init__(self, serve: ModuleType) -> None:
        self.serve = serve
        self.launch: str | None = None
        self.listen: tuple[Any, ...] | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        setup_server = self.serve.setup_server
        launcher = sys.modules[setup_server.__module__]
        replaced: list[tuple[ModuleType, str, object]] = []

        def replace(module: ModuleType, name: str, value: object) -> None:
            replaced.append((module, name, getattr(module, name, _MISSING)))
            setattr(module, name, value)

        def fake_socket(address: tuple[Any, ...], **_kwargs: object) -> object:
            self.listen = tuple(address)
            return object()

        def fake_unix_socket(path: str, **_kwargs: object) -> object:
            self.listen = ("unix", path)
            return object()

        async def run_server(args: argparse.Namespace, **_kwargs: object) -> None:
            self.launch = "api_server"
            setup_server(args, reuse_port=False)

        def recorder(name: str) -> Callable[..., None]:
            def launched(args: argparse.Namespace, *_rest: object, **_kwargs: object) -> None:
                self.launch = LAUNCH_NAMES.get(name, name)

            return launched

        replace(self.serve, "run_server", run_server)
        for name in LAUNCHERS[1:]:
            replace(self.serve, name, recorder(name))
        replace(launcher, "create_server_socket", fake_socket)
        replace(launcher, "create_server_unix_socket", fake_unix_socket)
        try:
            yield
        finally:
            for module, name, old in reversed(replaced):
                if old is _MISSING:
                    delattr(module, name)
                else:
                    setattr(module, name, old)


def build_parser(serve: ModuleType, epilog: str) -> tuple[Any, Any]:
    """The ``vllm`` parser with its ``serve`` subcommand, as main.py builds it; returns (parser, serve command)."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]

    # prog: what argparse takes from sys.argv[0] when the `vllm` console script runs main().
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI", epilog=epilog.format(subcmd="[subcommand]"))
    parser.add_argument("-v", "--version", action="version", version=_vllm_version())
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    command = serve.ServeSubcommand()
    command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
    return parser, command


def _vllm_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("vllm")


def parse(parser: Any, argv: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args``; argparse's own refusal (it prints and exits 2) becomes a CheckFailed with its text."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return parser.parse_args(list(argv))  # type: ignore[no-any-return]
    except SystemExit as exc:
        text = stderr.getvalue().strip().splitlines()
        raise CheckFailed("parse", f"exit {exc.code}: {text[-1] if text else '(no message)'}") from None
    except Exception as exc:
        raise CheckFailed("parse", f"{type(exc).__name__}: {exc}") from exc


def plain(value: Any) -> Any:
    """A parsed value in JSON terms: enums by value, tuples as lists, paths as text."""
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def resolve(root: Any, path: str) -> Any:
    value = root
    for part in path.split("."):
        value = value.get(part, _MISSING) if isinstance(value, Mapping) else getattr(value, part, _MISSING)
        if value is _MISSING:
            return _MISSING
    return value


def compare(where: str, root: Any, expect: Mapping[str, Any], *, only: frozenset[str] | None = None) -> list[str]:
    wrong = []
    for path, want in expect.items():
        if path in PSEUDO_KEYS or (only is not None and path.split(".", 1)[0] not in only):
            continue
        got = resolve(root, path)
        if got is _MISSING:
            wrong.append(f"{where}.{path} is missing (expected {want!r})")
        elif plain(got) != want or (isinstance(want, bool) != isinstance(plain(got), bool)):
            wrong.append(f"{where}.{path} == {plain(got)!r}, expected {want!r}")
    return wrong


def check_one(check: Mapping[str, Any], serve: ModuleType, epilog: str) -> list[str]:
    """Run one argv through the serve path; the list of wrong values (empty: passed). Raises CheckFailed."""
    import vllm  # type: ignore[import-not-found]
    from vllm.logger import configure_logging_from_args  # type: ignore[import-not-found]

    argv = list(check["argv"])
    if argv[:2] != ["vllm", "serve"]:
        raise CheckFailed("argv", f"does not start with 'vllm serve': {argv[:2]!r}")
    sys.argv = argv  # what the `vllm` console script sees; vLLM looks at it in places (main.py: --omni)
    parser, command = build_parser(serve, epilog)
    args = parse(parser, argv[1:])
    if getattr(args, "subparser", None) != "serve":
        raise CheckFailed("parse", f"subcommand is {getattr(args, 'subparser', None)!r}, not 'serve'")
    stage = "validate"
    recorder = Recorder(serve)
    try:
        configure_logging_from_args(args)
        command.validate(args)
        stage = "serve"
        with recorder.installed():
            args.dispatch_function(args)
        stage = "engine args"
        engine_args = vllm.AsyncEngineArgs.from_cli_args(args)
        propagate = getattr(serve, "propagate_flash_late_interaction", None)
        if propagate is not None:
            propagate(args, engine_args)
    except CheckFailed:
        raise
    except (Exception, SystemExit) as exc:
        raise CheckFailed(stage, f"{type(exc).__name__}: {exc}") from exc
    expect = check["expect"]
    wrong = compare("args", args, expect)
    fields = frozenset(f.name for f in dataclasses.fields(engine_args))
    wrong += compare("engine_args", engine_args, expect, only=fields)
    if "launch" in expect and recorder.launch != expect["launch"]:
        wrong.append(f"vllm serve launched {recorder.launch!r}, expected {expect['launch']!r}")
    if "listen" in expect and list(recorder.listen or ()) != list(expect["listen"]):
        wrong.append(f"the API server would bind {recorder.listen!r}, expected {tuple(expect['listen'])!r}")
    return wrong


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cases", type=Path, required=True, help="the JSON tests/vllm_parser/cases.py wrote")
    parser.add_argument("--version", required=True, help="the vLLM version installed here (checked)")
    parser.add_argument("--report", type=Path, help="write the results here (JSON)")
    args = parser.parse_args(argv)

    installed = _vllm_version()
    if installed != args.version:
        print(f"vllm {installed} is installed here, not {args.version}", file=sys.stderr)
        return 2
    data = json.loads(args.cases.read_text(encoding="utf-8"))
    checks = [c for c in data["checks"] if c["version"] == args.version]
    if not checks:
        print(f"{args.cases}: no checks for vllm {args.version}", file=sys.stderr)
        return 2

    try:
        _cli_env_setup()()
        serve = importlib.import_module("vllm.entrypoints.cli.serve")
    except ImportError as exc:
        print(
            f"vllm {args.version}'s serve path imports {exc.name or exc}, which this venv lacks: add its distribution "
            "to VLLM_PARSE_REQUIREMENTS in noxfile.py",
            file=sys.stderr,
        )
        return 3
    epilog = serve.VLLM_SUBCMD_PARSER_EPILOG
    results = []
    for check in checks:
        try:
            wrong = check_one(check, serve, epilog)
            status, detail, stage = ("ok", "", None) if not wrong else ("wrong", "; ".join(wrong), "wrong")
        except CheckFailed as exc:
            status, detail, stage = "rejected", str(exc), exc.stage
            if os.environ.get("VLLM_PARSER_CHECK_TRACEBACK") and exc.__cause__ is not None:
                traceback.print_exception(exc.__cause__)
        must_fail = check.get("must_fail")
        if must_fail is not None:
            # A control passes only by failing where it should.
            if stage == must_fail:
                status, detail = "ok", f"failed as it must ({detail})"
            else:
                status, detail = "control", f"must fail at {must_fail!r}, but: {status} {detail}".rstrip()
        results.append({"id": check["id"], "status": status, "detail": detail, "argv": check["argv"]})
        line = f"{status:<8} {check['id']}" + (f"\n         {detail}" if detail else "")
        print(line if status == "ok" else f"{line}\n         argv: {json.dumps(check['argv'], ensure_ascii=False)}")
        sys.stdout.flush()
    passed = sum(1 for r in results if r["status"] == "ok")
    if args.report:
        args.report.write_text(json.dumps({"version": args.version, "results": results}, indent=1) + "\n")
    print(f"vllm {args.version}: {passed} passed, {len(results) - passed} failed")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
