"""Run and benchmark files: strict loading, and resolving the documents they point at (pure).

The planner never reads files. A caller loads the run text, asks :func:`config_path` which file
(if any) holds the Data Designer config, reads it, and passes its text to
:func:`resolve_config`. Benchmarks work the same way for their base run (:func:`base_run_path`,
:func:`load_base_run`).
"""

from __future__ import annotations

from data_designer.slurm.contracts import BenchmarkSpec, InvalidInputError, RunSpec
from data_designer.slurm.planner._document import Document, parse_document
from data_designer.slurm.planner._sbatch_options import canonical_sbatch_options, validate_with_sbatch_options
from data_designer.slurm.planner._validation import validate_document

INLINE_CONFIG_FILE = "<inline>"
"""The file name problems in an inline Data Designer config are reported under."""


def load_run(text: str, *, file: str) -> RunSpec:
    """Parse and validate a run file; every problem is reported at once with file, line and key path.

    ``submission.sbatch_options`` come back canonical (``--long-name=value``), as sbatch will read them.
    """
    document = parse_document(text, file=file)
    run = validate_with_sbatch_options(
        lambda: validate_document(RunSpec, document, operation="run.load"),
        document,
        [("submission", "sbatch_options")],
        operation="run.load",
    )
    options = canonical_sbatch_options(run.submission.sbatch_options)
    return run.model_copy(update={"submission": run.submission.model_copy(update={"sbatch_options": options})})


def load_benchmark(text: str, *, file: str) -> BenchmarkSpec:
    """Parse and validate a benchmark file; every problem is reported at once with file, line and key path."""
    return validate_document(BenchmarkSpec, parse_document(text, file=file), operation="benchmark.load")


def config_path(run: RunSpec) -> str | None:
    """The file holding the run's Data Designer config, or None when the config is inline."""
    return run.data_designer.config


def resolve_config(run: RunSpec, text: str | None = None) -> Document:
    """The Data Designer config of ``run`` as a document: the inline one, or ``text`` read from :func:`config_path`."""
    path = run.data_designer.config
    if path is None:
        assert run.data_designer.inline is not None
        return Document(file=INLINE_CONFIG_FILE, data=dict(run.data_designer.inline))
    if text is None:
        raise InvalidInputError(
            f"the config file {path!r} was not given to the planner",
            code="config_text_missing",
            operation="run.config",
            key_path=("data_designer", "config"),
            hint="read the file named by data_designer.config and pass its text",
        )
    return parse_document(text, file=path)


def base_run_path(benchmark: BenchmarkSpec) -> str | None:
    """The run file a benchmark starts from, or None when its base run is inline."""
    return benchmark.base.run


def load_base_run(
    benchmark: BenchmarkSpec, text: str | None = None, *, file: str, source: Document | None = None
) -> RunSpec:
    """The base run of ``benchmark`` (``file`` names the benchmark): the inline one, or ``text`` of its run file.

    ``source`` is the benchmark's document: with it, problems of an inline base run carry their lines."""
    path = benchmark.base.run
    if path is not None:
        if text is None:
            raise InvalidInputError(
                f"the base run file {path!r} was not given to the planner",
                code="base_run_text_missing",
                operation="benchmark.base",
                file=file,
                key_path=("base", "run"),
                hint="read the file named by base.run and pass its text",
            )
        return load_run(text, file=path)
    assert benchmark.base.inline is not None
    try:
        lines = {} if source is None else source.under(("base", "inline")).lines
        inline = Document(file=file, data=benchmark.base.inline, lines=lines)
        return validate_document(RunSpec, inline, operation="benchmark.base")
    except InvalidInputError as exc:
        problems = [p.model_copy(update={"key_path": ("base", "inline", *(p.key_path or ()))}) for p in exc.problems]
        raise InvalidInputError.from_problems(problems, operation="benchmark.base", file=file) from exc
