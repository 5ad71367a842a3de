"""Per-layer Parquet dumps of one extraction batch: <dump_dir>/layer<NN>.parquet.

The schema lives in dump_schema.json (documented in docs/dumps.md) and every reader checks it.

- :mod:`.schema`: the Arrow schema and the dump fingerprint;
- :mod:`.write`: the model pass that writes a batch (the extraction job);
- :mod:`.read`: finding, opening and checking a batch's files, and decoding one L's samples;
- :mod:`.pack`: one L's samples decoded straight into a sample pack (the pack job), which the
  analysis jobs map through :mod:`attnlimits_workflow.packs` without importing pyarrow.
"""
