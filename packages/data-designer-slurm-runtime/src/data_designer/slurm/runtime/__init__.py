"""The imperative shell of data-designer-slurm: files, scheduler adapter, state store, supervisor.

The root re-exports nothing: each room has one door, its subpackage's face: ``scheduler`` (the command runner,
the parsers, ``SlurmScheduler``), ``store`` (the run directory's one writer and one reader), ``status``
(observation and classification), ``probe``, ``facts``, ``jobs``, ``images``, ``merge``, ``analysis``,
``supervisor``, ``worker`` and ``testing`` (fakes and the conformance suite).
"""
