"""What a figure caption needs to say about the run: model, corpus, chunks, layers, heads."""

import json

from attnlimits_workflow.dumps.read import layer_files, read_metadata
from attnlimits_workflow.jobs import chunk_ids, job_logger, provenance
from attnlimits_workflow.models import read_manifest

log = job_logger(snakemake, "describe_run")
expected = provenance(snakemake.input.model, snakemake.input.tokens)
layers = layer_files(snakemake.input.dumps, expected, chunk_ids(snakemake.input.tokens))
metas = [read_metadata(f, expected) for files in layers.values() for f in files]
chunks = sorted({c for m in metas for c in m["chunks"]})
manifest = read_manifest(snakemake.input.model)
description = {
    "model": snakemake.params.model,
    "model_type": manifest["model_type"],
    "weights": manifest["source"],
    "corpus": snakemake.params.corpus,
    "chunks": len(chunks),
    "chunk_length": metas[0]["chunk_length"],
    "layers": len(layers),
    "heads": metas[0]["n_heads"],
    "kv_heads": metas[0]["n_kv_heads"],
    "softcap": metas[0]["softcap"],
    "sliding_windows": sorted({m["sliding_window"] for m in metas if m["sliding_window"]}),
    "samples_per_L": len(chunks) * len(layers) * metas[0]["n_heads"],
    "causal": metas[0]["causal"],
    "embedding": snakemake.params.embedding,
    "query_row": snakemake.params.query_row,
    "protocol": snakemake.params.protocol,
    "masked": snakemake.params.masked,
    "all_rows_chunks": min(snakemake.params.all_rows_chunks, len(chunks)),
    "all_rows_rows": snakemake.params.all_rows_rows,
    "heads_per_L": len(layers) * metas[0]["n_heads"],
}
with open(snakemake.output[0], "w") as fh:
    json.dump(description, fh, indent=2)
log.info("%s", description)
