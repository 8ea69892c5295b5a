"""From a notebook: reviews generated on Slurm from the host's config builder, then a benchmark of the server."""

import json
import os
from typing import Any

import data_designer.config as dd

from data_designer.slurm.services import SlurmDataDesigner

builder = dd.DataDesignerConfigBuilder([dd.ModelConfig(alias="writer", model="llama-3.1-8b", provider="local")])
products = dd.CategorySamplerParams(values=["headphones", "kettle", "backpack", "desk lamp"])
builder.add_column(dd.SamplerColumnConfig(name="product", sampler_type="category", params=products))
builder.add_column(dd.LLMTextColumnConfig(name="review", model_alias="writer", prompt="Review a {{ product }}."))

slurm = SlurmDataDesigner(profile=os.environ.get("DD_SLURM_PROFILE", "profile.yaml"))
writer = {"engine": "vllm", "model": "/shared/models/llama-3.1-8b-instruct", "tensor_parallel": 2}
settings: dict[str, Any] = {"num_records": 1000, "shards": 4, "name": "reviews", "deployments": {"writer": writer}}
settings |= json.loads(os.environ.get("DD_SLURM_SETTINGS", "{}"))  # e.g. CI's test server on small nodes
if os.environ.get("DD_SLURM_PREVIEW"):  # a dry run: the plan, nothing submitted
    plan = slurm.preview(builder, **settings).plan
    print(f"{plan.shards} shards of {plan.gpus_per_allocation} GPUs, submittable: {plan.submittable}")
    raise SystemExit

run = slurm.create(builder, **settings)  # returns at once; run.run_id finds it again from any process
print(run.wait().outcome)
print(run.load_dataset().head())
print(run.load_analysis().column_statistics)  # the host's DatasetProfilerResults, computed once

axes = [{"axis": "concurrency", "alias": "writer", "values": [32, 128]}]
fixed = {"policy": "fixed", "records": 500}
sweep = {"schema_version": 1, "name": "writer-sweep", "base": run, "axes": axes, "records": fixed}
bench = slurm.benchmark(sweep)
print(bench.wait().complete)
print(bench.analyze().to_pandas()[["case", "records_per_s_mean", "gpu_hours_per_1k_mean"]])
bench.plot("writer-sweep.png")
