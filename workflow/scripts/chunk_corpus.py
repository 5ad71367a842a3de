"""Tokenize the corpus with the model's own tokenizer and cut consecutive fixed-length chunks."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from attnlimits.corpus import chunk_tokens, chunks_that_fit, wrap_chunks
from attnlimits.families import family
from attnlimits_workflow.atomic import atomic_path
from attnlimits_workflow.corpus_io import leading_tokens, text_sha256
from attnlimits_workflow.dumps.schema import fingerprint
from attnlimits_workflow.jobs import TOKENS_META_KEY, job_logger
from attnlimits_workflow.models import CorpusTokenizer, read_manifest

log = job_logger(snakemake, "chunk_corpus")
cfg = snakemake.params.chunking
tokenizer = CorpusTokenizer(snakemake.input.model)
model_type = json.loads((Path(snakemake.input.model) / "config.json").read_text())["model_type"]
# An encoder sees each chunk as it saw a sequence in training, between its special tokens
# (chunking.special_tokens: auto); a causal LM's chunk from mid-book gets none.
opening, closing = [], []
if cfg["special_tokens"] == "auto" and not family(model_type).causal:
    opening, closing = tokenizer.special_tokens()
    log.info("special tokens around each chunk: %s ... %s", opening, closing)
content_length = cfg["chunk_length"] - len(opening) - len(closing)
auto = cfg["n_chunks"] == "auto"
most = cfg["max_chunks"] if auto else cfg["n_chunks"]
# Only as much of the text as the requested chunks need is read and encoded.
wanted = (cfg["first_chunk"] + most) * content_length
ids = np.asarray(leading_tokens(snakemake.input.corpus, tokenizer.encode, wanted), dtype=np.int64)
log.info("%d tokens of the corpus encoded (%s)", ids.size, tokenizer.backend)
try:
    if auto:
        least = cfg["least_chunks"]
        n_chunks = chunks_that_fit(ids.size, content_length, cfg["first_chunk"], most, least)
        log.info("chunking.n_chunks: auto takes %d chunks (at most %d)", n_chunks, most)
    else:
        n_chunks = cfg["n_chunks"]
    chunks = chunk_tokens(ids, content_length, n_chunks, cfg["first_chunk"])
except ValueError as exc:
    log.error("chunking: %s", exc)
    raise SystemExit(1) from None
chunks = wrap_chunks(chunks, opening, closing)

n, length = chunks.shape
chunk_index = np.arange(cfg["first_chunk"], cfg["first_chunk"] + n, dtype=np.int32)
meta = {
    "corpus_sha256": text_sha256(snakemake.input.corpus),
    "tokenizer": read_manifest(snakemake.input.model)["name"],
    **cfg,
    "n_chunks": n_chunks,  # the chunks cut (chunking.n_chunks: auto records its count)
    "opening_tokens": [int(t) for t in opening],
    "closing_tokens": [int(t) for t in closing],
}
meta["fingerprint"] = fingerprint(
    {**meta, "token_sha256": hashlib.sha256(chunks.tobytes()).hexdigest()}
)
table = pa.table(
    {
        "chunk": np.repeat(chunk_index, length),
        "position": np.tile(np.arange(length, dtype=np.int32), n),
        "token_id": chunks.reshape(-1).astype(np.int32),
    }
).replace_schema_metadata({TOKENS_META_KEY: json.dumps(meta)})
with atomic_path(snakemake.output.tokens) as tmp:
    pq.write_table(table, tmp, compression="zstd")
with atomic_path(snakemake.output.text) as tmp, open(tmp, "w", encoding="utf-8") as fh:
    for c, row in zip(chunk_index, chunks, strict=True):
        fh.write(f"===== chunk {c} ({length} tokens) =====\n{tokenizer.decode(row.tolist())}\n\n")
log.info("wrote %d chunks of %d tokens", n, length)
