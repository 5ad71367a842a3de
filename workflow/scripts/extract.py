"""The only model pass: per-layer Parquet dumps of Q/K/V and the analysed attention rows."""

import numpy as np
import torch

from attnlimits.extraction import model_shape
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.dumps.write import write_batch
from attnlimits_workflow.jobs import job_logger, job_threads, read_tokens, tokens_metadata
from attnlimits_workflow.loading import load_model
from attnlimits_workflow.models import read_manifest

log = job_logger(snakemake, "extract")
cfg = snakemake.params.extraction
lengths = sorted(int(L) for L in snakemake.params.lengths)
batch = int(snakemake.wildcards.batch)
torch.set_num_threads(job_threads(snakemake.threads, log))

tokens_meta = tokens_metadata(snakemake.input.tokens)
table = read_tokens(snakemake.input.tokens)
chunk_ids = np.unique(table["chunk"].to_numpy())
token_matrix = table["token_id"].to_numpy().reshape(chunk_ids.size, -1)
per = snakemake.params.chunks_per_batch
mine = range(batch * per, min((batch + 1) * per, chunk_ids.size))
if not mine:
    raise SystemExit(f"batch {batch} has no chunks (only {chunk_ids.size} chunks)")

device = cfg["device"]
if device.startswith("cuda") and not torch.cuda.is_available():
    log.error(
        "extraction.device=%s but torch sees no CUDA device; set extraction.device: cpu", device
    )
    raise SystemExit(1)
manifest = read_manifest(snakemake.input.model)
model = load_model(snakemake.input.model, device)
shape = model_shape(model)
if max(lengths) > shape.max_positions or token_matrix.shape[1] > shape.max_positions:
    log.error(
        "analysis.lengths / chunking.chunk_length exceed the model's %d positions",
        shape.max_positions,
    )
    raise SystemExit(1)
log.info(
    "batch %d: chunks %s on %s with %d threads, lengths %s",
    batch,
    [int(c) for c in chunk_ids[mine]],
    device,
    torch.get_num_threads(),
    lengths,
)

done = []


def progress(chunk: int, seconds: float) -> None:
    done.append(chunk)
    log.info(
        "chunk %d (%d/%d of batch %d): %.2fs, %.0f tokens/s",
        chunk,
        len(done),
        len(mine),
        batch,
        seconds,
        token_matrix.shape[1] / seconds,
    )


with atomic_path(snakemake.output[0]) as tmp:
    tmp.mkdir()
    write_batch(
        tmp,
        model,
        {int(chunk_ids[i]): token_matrix[i] for i in mine},
        lengths,
        query_row=cfg["query_row"],
        store_hidden=bool(snakemake.params.store_hidden),
        store_attention_input=bool(snakemake.params.store_attention_input),
        closing_tokens=tuple(tokens_meta.get("closing_tokens", ())),
        provenance={
            "weights_sha256": manifest["weights_sha256"],
            "tokens_fingerprint": tokens_meta["fingerprint"],
        },
        extra_metadata={
            "model": manifest["name"],
            "model_type": manifest["model_type"],
            "corpus_sha256": tokens_meta["corpus_sha256"],
        },
        vectors=tuple(cfg["vectors"]),
        vector_dtype=cfg["vector_dtype"],
        compression=None if cfg["compression"] == "none" else cfg["compression"],
        compression_level=cfg["compression_level"],
        progress=progress,
    )
log.info("wrote %d layer files to %s", shape.n_layers, snakemake.output[0])
