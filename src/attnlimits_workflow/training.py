"""The normalizer study's training stage: a BPE tokenizer trained on the corpus, small Llama
models identical but for their attention normalizer (attnlimits.attention_rules), a seeded
training loop, held-out evaluation, and model folders the rest of the workflow reads like any
other (config.json names the rule; a rule's learned parameters, Scalable-Softmax's s, and gated
attention's output gate are weights like the others)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .models import MANIFEST, sha256_files

TOKENIZER_FILE = "tokenizer.json"
LEARNED_FILE = "learned.json"  # a rule's learned parameters (Scalable-Softmax's s) per layer, head


def train_tokenizer(text: str, vocab_size: int, min_frequency: int):
    """Byte-level BPE trained on ``text`` (the tokenizers library): byte-level, so every text
    encodes; deterministic for a given text and settings."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
        show_progress=False,
    )
    tok.train_from_iterator([text], trainer=trainer)
    return tok


def split_tokens(ids: np.ndarray, validation_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(validation, training): the validation part is the corpus's *first* tokens, so the chunks
    the diagnostics analyse (chunking starts at the first token) are held out from training."""
    n_val = int(round(ids.size * validation_fraction))
    return ids[:n_val], ids[n_val:]


def build_model(
    architecture: dict[str, Any], rule: dict[str, Any], vocab_size: int, seed: int, context: int
):
    """A Llama-architecture causal LM whose every attention layer normalizes with ``rule``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from attnlimits import rules
    from attnlimits.rule_attention import RULE_KEY, add_output_gates, register_rule_attention

    params = rules.trained_settings(rule)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=architecture["hidden_size"],
        intermediate_size=architecture["intermediate_size"],
        num_hidden_layers=architecture["layers"],
        num_attention_heads=architecture["heads"],
        num_key_value_heads=architecture["kv_heads"],
        max_position_embeddings=architecture["max_positions"],
        rope_theta=architecture["rope_theta"],
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    setattr(config, RULE_KEY, dict(rule))
    config._attn_implementation = register_rule_attention()
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    for p in rules.get(rule["kind"]).learned:
        init = float(params.get(p.init_setting, p.init_default(context)))
        for layer in model.model.layers:
            layer.self_attn.register_parameter(
                p.attribute, torch.nn.Parameter(torch.full((architecture["heads"],), init))
            )
    if rules.get(rule["kind"]).output_gate:  # drawn after the model's weights: theirs unchanged
        add_output_gates(
            model, config.num_attention_heads, config.head_dim, config.initializer_range
        )
    return model


def learned_parameters(model) -> dict[str, Any]:
    """Per layer and head, the rule's learned parameters by name (Scalable-Softmax's s), else {}."""
    from attnlimits import rules
    from attnlimits.rule_attention import RULE_KEY

    rule = getattr(model.config, RULE_KEY, None)
    found = {}
    for p in rules.get(rule["kind"]).learned if rule else ():
        values = [getattr(layer.self_attn, p.attribute, None) for layer in _decoder(model).layers]
        if all(v is not None for v in values):
            found[p.name] = [[float(x) for x in v.detach().cpu()] for v in values]
    return found


def read_learned(model_dir: str | Path | None) -> dict[str, Any]:
    """A trained model folder's learned parameters (learned.json); {} for no folder."""
    if not model_dir:
        return {}
    from .models import ModelSourceError, json_problem, one_line

    path = Path(model_dir) / LEARNED_FILE
    if path.is_file() and (why := json_problem(path)):
        raise ModelSourceError(
            f"{path}: damaged ({one_line(why)}); delete {model_dir} and rerun to train it again"
        )
    return json.loads(path.read_text())


def normalizer_arguments(
    entry: dict[str, Any], learned: dict[str, Any], layer: np.ndarray, head: np.ndarray
) -> dict[str, Any]:
    """The keyword arguments of a beyond.normalizers entry's normalizer (attnlimits.normalizers)
    for samples of the given (layer, head): its settings, and for a model trained with the rule
    each learned parameter (attnlimits.rules) of each sample's head, shape (samples, 1)."""
    from attnlimits import rules

    arguments = {k: v for k, v in entry.items() if k != "kind"}
    for p in rules.get(entry["kind"]).learned:
        if p.name in learned:
            table = np.asarray(learned[p.name], dtype=np.float64)  # (layers, heads)
            arguments[p.name] = table[np.asarray(layer), np.asarray(head)][:, None]
    return arguments


def _decoder(model):
    return model.model if hasattr(model, "model") else model


def random_windows(
    ids: np.ndarray, context: int, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """``batch_size`` windows of context + 1 tokens (inputs and next-token targets) at uniform
    random offsets."""
    starts = rng.integers(0, ids.size - context - 1, size=batch_size)
    return np.stack([ids[s : s + context + 1] for s in starts])


def learning_rate(step: int, settings: dict[str, Any]) -> float:
    """Linear warm-up to ``learning_rate``, then cosine decay to a tenth of it at the last step."""
    peak, warmup, steps = settings["learning_rate"], settings["warmup_steps"], settings["steps"]
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def training_device(name: str = "cpu"):
    """The torch device ``study.training.device`` names: cpu, or cuda (an error when torch sees
    no GPU, rather than a silent CPU run)."""
    import torch

    if name not in ("cpu", "cuda"):
        raise ValueError(f"study.training.device: {name!r} is not cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("study.training.device is cuda, but torch sees no GPU")
    return torch.device(name)


def train(
    model,
    train_ids: np.ndarray,
    settings: dict[str, Any],
    seed: int,
    log: Callable[[str], None] = print,
) -> list[dict[str, float]]:
    """AdamW on next-token cross-entropy on ``settings["device"]`` (cpu when unset: the model is
    moved there, and back to the CPU at the end); returns the history (one entry per logged
    step). The batches come from a numpy generator, the same on every device."""
    import torch

    context, batch = settings["context"], settings["batch_size"]
    if train_ids.size <= context + 1:
        raise ValueError(f"{train_ids.size} training tokens cannot fill one window of {context}")
    device = training_device(settings.get("device", "cpu"))
    model.to(device)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=settings["learning_rate"],
        betas=(0.9, 0.95),
        weight_decay=settings["weight_decay"],
    )
    model.train()
    history = []
    start = time.perf_counter()
    window_loss, window_steps = 0.0, 0
    for step in range(settings["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, settings)
        data = torch.from_numpy(random_windows(train_ids, context, batch, rng)).to(device)
        out = model(input_ids=data[:, :-1], use_cache=False)
        loss = torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, out.logits.shape[-1]), data[:, 1:].reshape(-1)
        )
        if not torch.isfinite(loss):
            raise FloatingPointError(f"step {step}: loss is {loss.item()}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings["grad_clip"])
        optimizer.step()
        window_loss += loss.item()
        window_steps += 1
        if (step + 1) % settings["log_every"] == 0 or step + 1 == settings["steps"]:
            seconds = time.perf_counter() - start
            tokens = (step + 1) * batch * context
            entry = {
                "step": step + 1,
                "loss": window_loss / window_steps,
                "learning_rate": learning_rate(step, settings),
                "tokens": tokens,
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
            }
            history.append(entry)
            log(
                f"step {step + 1}/{settings['steps']}: loss {entry['loss']:.4f}, "
                f"{entry['tokens_per_s']:.0f} tokens/s"
            )
            window_loss, window_steps = 0.0, 0
    model.eval()
    model.to("cpu")
    return history


def evaluate(
    model, ids: np.ndarray, context: int, max_windows: int, tail_fraction: float
) -> dict[str, float]:
    """Next-token loss on the first ``max_windows`` non-overlapping windows of ``context`` held-out
    tokens: over every position (``loss``, ``perplexity``) and over each window's last
    ``tail_fraction`` of positions (``tail_loss``, ``tail_perplexity``). The tail compares contexts
    fairly: every position in it has at least (1 - tail_fraction) x context tokens before it,
    while a whole window's mean also counts its first, nearly context-free positions."""
    import torch

    n = min(max_windows, (ids.size - 1) // context)
    if n < 1:
        raise ValueError(f"{ids.size} held-out tokens cannot fill one window of {context}")
    tail = max(1, int(round(context * tail_fraction)))
    total = tail_total = 0.0
    with torch.inference_mode():
        for w in range(n):
            chunk = torch.from_numpy(ids[w * context : (w + 1) * context + 1])[None]
            logits = model(input_ids=chunk[:, :-1], use_cache=False).logits
            losses = torch.nn.functional.cross_entropy(
                logits[0].double(), chunk[0, 1:], reduction="none"
            )
            total += losses.sum().item()
            tail_total += losses[-tail:].sum().item()
    loss, tail_loss = total / (n * context), tail_total / (n * tail)
    return {
        "context": context,
        "windows": n,
        "tail_positions": tail,
        "loss": loss,
        "perplexity": math.exp(loss),
        "tail_loss": tail_loss,
        "tail_perplexity": math.exp(tail_loss),
    }


def save_trained(model, tokenizer_file: Path, out_dir: Path, manifest: dict[str, Any]) -> None:
    """A model folder like fetch_model's: weights (with any learned rule parameters), config.json
    naming the rule, the tokenizer, learned.json and the manifest."""
    from transformers import PreTrainedTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file)).save_pretrained(out_dir)
    (out_dir / LEARNED_FILE).write_text(
        json.dumps(learned_parameters(model), indent=2, sort_keys=True)
    )
    weights = sorted(out_dir.glob("*.safetensors"))
    cfg = json.loads((out_dir / "config.json").read_text())
    full = {
        **manifest,
        "source": "trained",
        "model_type": cfg["model_type"],
        "weights_sha256": sha256_files(weights),
    }
    (out_dir / MANIFEST).write_text(json.dumps(full, indent=2, sort_keys=True))


def load_trained(model_dir: str | Path, attn_implementation: str, causal_lm: bool = False):
    """A trained model folder, rebuilt from its config and every saved weight (strictly: the
    learned parameters too, which from_pretrained would drop), attention as
    ``attn_implementation``."""
    import torch
    from huggingface_hub.errors import StrictDataclassError
    from safetensors.torch import load_file
    from transformers import AutoConfig, LlamaForCausalLM

    from attnlimits import rules
    from attnlimits.rule_attention import RULE_KEY, add_output_gates

    from .models import ModelSourceError, check_model_folder, one_line

    check_model_folder(model_dir, f"delete {model_dir} and rerun to train it again")
    try:
        config = AutoConfig.from_pretrained(model_dir)
        rule = getattr(config, RULE_KEY)
        config._attn_implementation = attn_implementation
        model = LlamaForCausalLM(config)
        for p in rules.get(rule["kind"]).learned:
            for layer in model.model.layers:
                layer.self_attn.register_parameter(
                    p.attribute, torch.nn.Parameter(torch.zeros(config.num_attention_heads))
                )
        if rules.get(rule["kind"]).output_gate:
            add_output_gates(model, config.num_attention_heads, config.head_dim, 0.0)
        state = {}
        for path in sorted(Path(model_dir).glob("*.safetensors")):
            state.update(load_file(path))
        if "lm_head.weight" not in state and config.tie_word_embeddings:
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        model.load_state_dict(state, strict=True)
    except (
        OSError,
        RuntimeError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        StrictDataclassError,  # transformers' config checks a value's range (initializer_range)
    ) as exc:
        # each file reads, yet they disagree (a hand edit, a flipped digit in config.json)
        raise ModelSourceError(
            f"{Path(model_dir) / 'config.json'}: the trained model's config.json and weights do "
            f"not fit ({one_line(exc)}); delete {model_dir} and rerun to train it again"
        ) from None
    model = model.float().eval()
    return model if causal_lm else model.model
