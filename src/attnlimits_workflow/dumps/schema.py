"""The dumps' Arrow schema, from dump_schema.json, and the fingerprint tying a dump to its inputs."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import pyarrow as pa

SCHEMA_SPEC: dict[str, Any] = json.loads(
    resources.files("attnlimits_workflow").joinpath("dump_schema.json").read_text()
)
META_KEY = SCHEMA_SPEC["metadata_key"].encode()
ROW_GROUP_POSITIONS = 128  # positions per row group: lets position < L filters skip row groups


VECTOR_DTYPES = {"float32": pa.float32(), "float16": pa.float16()}
VECTOR_COLUMNS = ("q", "k", "v")
# d_model-wide columns, one vector per (position, layer) on the head-0 rows, each stored only when
# analysis.embedding names it: column -> the metadata flag that says it was stored
LAYER_COLUMNS = {"hidden": "store_hidden", "attention_input": "store_attention_input"}


def arrow_schema(head_dim: int, d_model: int, vector_dtype: str = "float32") -> pa.Schema:
    """The concrete Arrow schema of a dump, built from dump_schema.json."""
    sizes = {"head_dim": head_dim, "d_model": d_model}
    fields = []
    for col in SCHEMA_SPEC["columns"]:
        fields.append(
            pa.field(
                col["name"],
                _arrow_type(col["type"], sizes, VECTOR_DTYPES[vector_dtype]),
                nullable=col["nullable"],
            )
        )
    return pa.schema(fields)


def _arrow_type(spec: str, sizes: dict[str, int], vector: pa.DataType) -> pa.DataType:
    if spec.startswith("fixed_size_list<"):
        element = spec.split("<")[1].split(">")[0]
        dtype = vector if element == "vector" else pa.float32()
        return pa.list_(dtype, sizes[spec.split("[")[1].rstrip("]")])
    if spec == "list<float32>":
        return pa.list_(pa.float32())
    return {"int16": pa.int16(), "int32": pa.int32(), "float32": pa.float32()}[spec]


def fingerprint(parts: dict[str, Any]) -> str:
    """Stable short hash of everything a dump depends on (model, corpus, chunking, extraction)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
