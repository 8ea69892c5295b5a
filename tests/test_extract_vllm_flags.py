"""scripts/extract-vllm-flags: what each ``vllm serve`` option takes, read from a wheel's source by AST.

Most tests pack a small vLLM-shaped source tree into a wheel in tmp_path: a config dataclass with one field per
branch of vLLM's ``_compute_kwargs``, edits of its kwargs as ``EngineArgs.add_cli_args`` makes them, and stand-ins
for the mirrored functions (whose digests the tests record in place of vLLM's). The last test regenerates the
planner's data file from the real wheels when ``DDSLURM_VLLM_WHEELS`` (folders, ``:``-separated, as for the
``vllm_parser`` nox session) holds them.
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import textwrap
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "packages/data-designer-slurm-planner/src/data_designer/slurm/planner/data/vllm_serve_flags.json"


@functools.cache
def _script() -> ModuleType:
    """scripts/extract-vllm-flags (standard library only), loaded as a module."""
    name = "scripts_extract_vllm_flags"
    loader = importlib.machinery.SourceFileLoader(name, str(ROOT / "scripts" / "extract-vllm-flags"))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses resolve their annotations through sys.modules
    loader.exec_module(module)
    return module


CONFIG = """
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict

Mode = Literal["b", "a"]
Level = Literal[1, 2, 3]
Both = Literal["x", Mode]


def config(cls=None, **kwargs):
    return cls


@dataclass
class Inner:
    x: int = 0


@config
class Tuned:
    level: int = 0
    name: str = ""
    hidden: int = field(default=0, init=False)
    seed: InitVar[int] = 0


@config(config=ConfigDict(extra="allow"))
class Loose:
    a: int = 0


class Modalities(dict[str, int]):
    pass


@dataclass
class DemoConfig:
    flag: bool = False
    enable_thing: bool | None = None
    opt: bool | str | None = None
    mode: Mode = "a"
    mode_or_text: Mode | str = "a"
    both: Both | None = None
    level: Level = 1
    sizes: list[int] | None = None
    pair: tuple[int, int] = (1, 2)
    many: tuple[str, ...] = ()
    traces: list[Literal["y", "x"]] | None = None
    tokens: int = 0
    max_model_len: int = 0
    ratio: float | None = None
    inner: Inner = field(default_factory=Inner)
    tuned: Tuned = field(default_factory=Tuned)
    loose: Loose | None = None
    mapping: dict[str, int] = field(default_factory=dict)
    modalities: Modalities = field(default_factory=Modalities)
    hook: dict[str, Any] | Callable[[int], int] = field(default_factory=dict)
    shaped: list[str] = field(default_factory=list)
    name: str = ""
    anything: Any = None
"""

ARG_UTILS = """
import argparse
import json
from dataclasses import dataclass

from vllm.config.demo import DemoConfig
from vllm.utils.argparse_utils import human_readable_int


def parse_type(f):
    return f


def optional_type(f):
    return f


def union_dict_and_str(v):
    return v


def is_type(a, b):
    return a is b


def is_dict_subclass(a):
    return False


def literal_to_kwargs(h):
    return {}


def collection_to_kwargs(h, t):
    return {}


def is_not_builtin(h):
    return True


def get_type_hints(h):
    return {h}


def _expand_json_human_readable_numbers(v):
    return v


def _compute_kwargs(cls):
    human_readable_int_args = {"tokens"}
    return {}


def get_kwargs(cls):
    return _compute_kwargs(cls)


@dataclass
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        demo_kwargs = get_kwargs(DemoConfig)
        demo_kwargs["level"]["choices"].remove(3)
        demo_kwargs["shaped"]["type"] = json.loads
        del demo_kwargs["shaped"]["nargs"]
        group = parser.add_argument_group("Demo")
        group.add_argument("--flag", "-f", **demo_kwargs["flag"])
        group.add_argument("--enable-thing", **demo_kwargs["enable_thing"])
        group.add_argument("--opt", **demo_kwargs["opt"])
        group.add_argument("--mode", **demo_kwargs["mode"])
        group.add_argument("--mode-or-text", **demo_kwargs["mode_or_text"])
        group.add_argument("--both", **demo_kwargs["both"])
        group.add_argument("--level", **demo_kwargs["level"])
        group.add_argument("--sizes", **demo_kwargs["sizes"])
        group.add_argument("--pair", **demo_kwargs["pair"])
        group.add_argument("--many", **demo_kwargs["many"])
        group.add_argument("--traces", **demo_kwargs["traces"])
        group.add_argument("--tokens", **{**demo_kwargs["tokens"], "default": None})
        group.add_argument("--max-model-len", **demo_kwargs["max_model_len"])
        group.add_argument("--ratio", "--fraction", dest="ratio", **demo_kwargs["ratio"])
        group.add_argument("--inner", **demo_kwargs["inner"])
        group.add_argument("--tuned", **demo_kwargs["tuned"])
        group.add_argument("--loose", **demo_kwargs["loose"])
        group.add_argument("--mapping", **demo_kwargs["mapping"])
        group.add_argument("--modalities", **demo_kwargs["modalities"])
        group.add_argument("--hook", **demo_kwargs["hook"])
        group.add_argument("--shaped", **demo_kwargs["shaped"])
        group.add_argument("--name", **{**demo_kwargs["name"], "type": lambda s: s.lower()})
        group.add_argument("--anything", **demo_kwargs["anything"])
        parser.add_argument("--pick", choices=["p", "q"])
        parser.add_argument("--picked-late", choices=["p"] + sorted(set()))
        parser.add_argument("--times", action="append", type=int)
        return parser


@dataclass
class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
        return parser
"""

ARGPARSE_UTILS = """
from argparse import ArgumentParser, BooleanOptionalAction


def human_readable_int(value):
    return int(value)


def human_readable_int_or_auto(value):
    return int(value)


class EnableDisableAction(BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}


class FlexibleArgumentParser(ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", BooleanOptionalAction, EnableDisableAction)

    def parse_args(self, args=None, namespace=None):
        return super().parse_args(args, namespace)
"""

CLI_ARGS = """
from vllm.engine.arg_utils import AsyncEngineArgs


def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser.add_argument("--count", "-c", type=int)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
"""

SERVE = """
from vllm.entrypoints.common.cli_args import make_arg_parser


def cmd_init(subparsers):
    return make_arg_parser(subparsers.add_parser("serve"))
"""

SOURCES = {
    "vllm/__init__.py": "",
    "vllm/config/__init__.py": "",
    "vllm/config/demo.py": CONFIG,
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": ARG_UTILS,
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": ARGPARSE_UTILS,
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": SERVE,
    "vllm/entrypoints/common/__init__.py": "",
    "vllm/entrypoints/common/cli_args.py": CLI_ARGS,
}


def _wheel(tmp_path: Path, changes: dict[str, tuple[str, str]] | None = None) -> Path:
    path = tmp_path / "vllm-9.9.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in SOURCES.items():
            if name in (changes or {}):
                old, new = (changes or {})[name]
                assert old in text, old
                text = text.replace(old, new)
            wheel.writestr(name, textwrap.dedent(text))
        wheel.writestr("vllm-9.9.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.0\n")
    return path


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """MIRRORED holds the digests of the stand-ins instead of vLLM's."""
    script = _script()
    folder = tmp_path / "stand-ins"
    folder.mkdir()
    wheel = script.Wheel(_wheel(folder))
    resolver = script.Resolver(wheel)
    digests = {}
    for module, qualname in script.MIRRORED:
        owner, _, method = qualname.partition(".")
        symbol = resolver.resolve(module, owner)
        node = resolver.method(symbol, method).node if method else symbol.node
        digests[(module, qualname)] = frozenset({script._fingerprint(node)})
    monkeypatch.setattr(script, "MIRRORED", digests)


def _extract(tmp_path: Path, changes: dict[str, tuple[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    _, actions = _script().extract(_wheel(tmp_path, changes))
    return {a["options"][0]: a for a in actions}


@pytest.mark.usefixtures("stand_ins")
def test_each_branch_of_compute_kwargs_gives_what_argparse_gets(tmp_path: Path) -> None:
    found = _extract(tmp_path)

    def spec(flag: str) -> dict[str, Any]:
        return {k: v for k, v in found[flag].items() if k != "options"}

    assert list(found) == sorted(found)
    assert spec("--flag") == {"kind": "switch", "negative": ["--no-flag"]}
    assert found["--flag"]["options"] == ["--flag", "--no-flag", "-f"]  # single-dash aliases get no negation
    # the registered EnableDisableAction adds the inverse prefix as one more negative
    assert found["--enable-thing"] == {
        "options": ["--enable-thing", "--no-enable-thing", "--disable-thing"],
        "kind": "switch",
        "negative": ["--no-enable-thing", "--disable-thing"],
    }
    assert spec("--opt") == {"kind": "optional_value", "type": "str"}  # bool | str | None: nargs="?"
    assert spec("--mode") == {"kind": "value", "type": "str", "choices": ["a", "b"]}  # sorted, as vLLM sorts them
    assert spec("--mode-or-text") == {"kind": "value", "type": "str"}  # Literal | str: a metavar, not choices
    assert spec("--both") == {"kind": "value", "type": "str", "nullable": True, "choices": ["a", "b", "x", None]}
    assert spec("--level") == {"kind": "value", "type": "int", "choices": [1, 2]}  # choices.remove(3)
    assert spec("--sizes") == {"kind": "multi_value", "nargs": "+", "type": "int", "nullable": True}
    assert spec("--pair") == {"kind": "multi_value", "nargs": 2, "type": "int"}
    assert spec("--many") == {"kind": "multi_value", "nargs": "+", "type": "str"}
    assert spec("--traces") == {
        "kind": "multi_value",
        "nargs": "+",
        "type": "str",
        "nullable": True,
        "choices": ["x", "y", None],
    }
    assert spec("--tokens") == {"kind": "value", "type": "int_with_suffix"}  # in human_readable_int_args
    assert spec("--max-model-len") == {"kind": "value", "type": "int_with_suffix_or_auto"}
    assert found["--ratio"]["options"] == ["--ratio", "--fraction"]
    assert spec("--ratio") == {"kind": "value", "type": "float", "nullable": True}
    assert spec("--inner") == {"kind": "value", "type": "json_config", "dotted": True}  # @dataclass: no field list
    # @config forbids extra keys: the constructor's keywords (fields, not init=False ones, and InitVars)
    assert spec("--tuned") == {
        "kind": "value",
        "type": "json_config",
        "dotted": True,
        "fields": ["level", "name", "seed"],
    }
    assert spec("--loose") == {"kind": "value", "type": "json_config", "nullable": True, "dotted": True}  # extra set
    assert spec("--mapping") == {"kind": "value", "type": "json", "dotted": True}
    assert spec("--modalities") == {"kind": "value", "type": "json", "dotted": True}  # a dict subclass is a dict
    assert spec("--hook") == {"kind": "value", "type": "str_or_json", "dotted": True}
    assert spec("--shaped") == {"kind": "value", "type": "json"}  # type edited, nargs deleted; a list: no fields
    assert spec("--name") == {"kind": "value", "type": "any"}  # a lambda is not mirrored
    assert spec("--anything") == {"kind": "value", "type": "str"}  # typing.Any is not a builtin: str
    assert spec("--pick") == {"kind": "value", "type": "str", "choices": ["p", "q"]}
    assert spec("--picked-late") == {"kind": "value", "type": "str", "choices_unchecked": True}
    assert spec("--times") == {"kind": "value", "type": "int"}  # append: one value per occurrence
    assert spec("--headless") == {"kind": "switch"}
    assert found["--count"]["options"] == ["--count", "-c"]
    assert found["-h"] == {"options": ["-h", "--help"], "kind": "switch"}
    assert "--enable-log-requests" in found


@pytest.mark.usefixtures("stand_ins")
@pytest.mark.parametrize(
    ("file", "old", "new", "words"),
    [
        ("vllm/engine/arg_utils.py", 'int_args = {"tokens"}', 'int_args = {"tokens", "ratio"}', "changed (digest"),
        ("vllm/engine/arg_utils.py", '["choices"].remove(3)', '["choices"].sort()', "unsupported edit"),
        ("vllm/engine/arg_utils.py", 'add_argument("--pick"', "add_argument(PICK", "option string is not a literal"),
        ("vllm/engine/arg_utils.py", '**demo_kwargs["anything"]', "**ANYTHING", "cannot trace **ANYTHING"),
        ("vllm/config/demo.py", '    name: str = ""', '    name: Unresolved = ""', "cannot resolve the type"),
        ("vllm/config/demo.py", "    mode: Mode = ", "    mode: Mode | Level = ", "two Literal members"),
        ("vllm/config/demo.py", "    many: tuple[str, ...]", "    many: list", "bare list"),
    ],
)
def test_what_the_walk_does_not_understand_is_an_error(
    tmp_path: Path, file: str, old: str, new: str, words: str
) -> None:
    with pytest.raises(_script().ExtractionError, match=re.escape(words)):
        _extract(tmp_path, {file: (old, new)})


@pytest.mark.usefixtures("stand_ins")
def test_the_script_writes_the_same_bytes_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    wheel = _wheel(tmp_path)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert script.main([str(wheel), "--output", str(first)]) == 0
    assert script.main([str(wheel), "--output", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    document = json.loads(first.read_text("utf-8"))
    assert document["schema_version"] == 2
    [origin] = document["origin"]
    assert origin["version"] == "9.9.0"
    assert "vllm/config/demo.py" in origin["files"]
    assert list(document["versions"]) == ["9.9.0"]
    assert "kinds {" in capsys.readouterr().out


def test_the_fingerprint_ignores_docstrings_and_not_code() -> None:
    script = _script()

    def first(text: str) -> ast.AST:
        return ast.parse(textwrap.dedent(text)).body[0]

    plain = first("def f(x):\n    return x + 1\n")
    documented = first('def f(x):\n    """Add one."""\n    return x + 1\n')
    changed = first("def f(x):\n    return x + 2\n")
    assert script._fingerprint(plain) == script._fingerprint(documented)
    assert script._fingerprint(plain) != script._fingerprint(changed)


@pytest.mark.vllm_wheels
def test_the_real_wheels_give_the_data_file_byte_for_byte(tmp_path: Path) -> None:
    # The vllm_parser nox session's variable: folders, os.pathsep-separated.
    folders = [Path(f) for f in os.environ.get("DDSLURM_VLLM_WHEELS", "").split(os.pathsep) if f]
    data = json.loads(DATA.read_text("utf-8"))
    found = {
        o["wheel"]: next((f / o["wheel"] for f in folders if (f / o["wheel"]).is_file()), None) for o in data["origin"]
    }
    wheels = [w for w in found.values() if w is not None]
    missing = sorted(name for name, wheel in found.items() if wheel is None)
    assert not missing, f"DDSLURM_VLLM_WHEELS={os.environ.get('DDSLURM_VLLM_WHEELS')!r} lacks {missing}"
    out = tmp_path / "flags.json"
    assert _script().main([*map(str, wheels), "--output", str(out)]) == 0
    assert out.read_text("utf-8") == DATA.read_text("utf-8")
