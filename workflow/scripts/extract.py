"""The only model pass: per-layer Parquet dumps of Q/K/V and the analysed attention rows."""

import time

import numpy as np
import pyarrow.parquet as pq
import torch

from attnlimits.extraction import adapter_for, extract_chunk
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.dumps import SCHEMA_SPEC, LayerDumpWriter, fingerprint
from attnlimits_workflow.jobs import job_logger, tokens_metadata
from attnlimits_workflow.models import load_model, read_manifest

log = job_logger(snakemake, "extract")
cfg = snakemake.params.extraction
lengths = [int(L) for L in snakemake.params.lengths]
batch = int(snakemake.wildcards.batch)
torch.set_num_threads(max(1, snakemake.threads))

tokens_meta = tokens_metadata(snakemake.input.tokens)
table = pq.read_table(snakemake.input.tokens)
chunk_ids = np.unique(table["chunk"].to_numpy())
per = snakemake.params.chunks_per_batch
mine = chunk_ids[batch * per : (batch + 1) * per]
if mine.size == 0:
    raise SystemExit(f"batch {batch} has no chunks (only {chunk_ids.size} chunks)")
token_matrix = table["token_id"].to_numpy().reshape(chunk_ids.size, -1)

device = cfg["device"]
if device.startswith("cuda") and not torch.cuda.is_available():
    log.error("extraction.device=%s but torch sees no CUDA device; set extraction.device: cpu", device)
    raise SystemExit(1)
manifest = read_manifest(snakemake.input.model)
model = load_model(snakemake.input.model, device)
adapter = adapter_for(model)
if max(lengths) > adapter.max_positions or token_matrix.shape[1] > adapter.max_positions:
    log.error("analysis.lengths / chunking.chunk_length exceed the model's %d positions", adapter.max_positions)
    raise SystemExit(1)
store_hidden = bool(snakemake.params.store_hidden)
provenance = {"weights_sha256": manifest["weights_sha256"], "tokens_fingerprint": tokens_meta["fingerprint"]}
run_fingerprint = fingerprint({**provenance, "lengths": lengths, "query_row": cfg["query_row"], "store_hidden": store_hidden})
d_model = adapter.n_heads * adapter.head_dim

with atomic_path(snakemake.output[0]) as tmp:
    tmp.mkdir()
    writers = []
    for layer in range(adapter.n_layers):
        meta = {
            "schema_version": SCHEMA_SPEC["schema_version"],
            "fingerprint": run_fingerprint,
            **provenance,
            "model": manifest["name"],
            "model_type": manifest["model_type"],
            "corpus_sha256": tokens_meta["corpus_sha256"],
            "chunk_length": int(token_matrix.shape[1]),
            "chunks": [int(c) for c in mine],
            "layer": layer,
            "score_scale": adapter.score_scale(layer),
            "lengths": lengths,
            "query_row": cfg["query_row"],
            "store_hidden": store_hidden,
            "causal": adapter.causal,
            "n_heads": adapter.n_heads,
            "head_dim": adapter.head_dim,
            "d_model": d_model,
        }
        level = cfg["compression_level"]
        compression = None if cfg["compression"] == "none" else cfg["compression"]
        writers.append(LayerDumpWriter(tmp / f"layer{layer:02d}.parquet", meta, compression, level))
    for i, chunk in enumerate(mine):
        start = time.perf_counter()
        ids = torch.tensor(token_matrix[np.searchsorted(chunk_ids, chunk)], dtype=torch.long)
        for capture in extract_chunk(adapter, ids, lengths, cfg["query_row"], store_hidden):
            writers[capture.layer].write_pass(int(chunk), ids.numpy(), capture)
        elapsed = time.perf_counter() - start
        log.info("chunk %d (%d/%d of batch %d): %.2fs, %.0f tokens/s", chunk, i + 1, mine.size, batch, elapsed, ids.numel() / elapsed)
    for w in writers:
        w.close()
log.info("wrote %d layer files to %s", adapter.n_layers, snakemake.output[0])
