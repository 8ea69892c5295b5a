"""The Data Designer client worker of one shard attempt: ``python -m data_designer.slurm.runtime.worker``.

The worker (``_main``), its host adapter (``_host``), inputs (``_inputs``), outputs (``_output``), the local
router in front of each alias's replicas (``_router``) and the drain on a signal (``_drain``). Importing this
package imports none of them (the host and pyarrow load only when the worker runs).
"""
