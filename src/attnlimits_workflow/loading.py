"""Loading a model folder for inference: a fetched model, or one the normalizer study trained.

Apart from attnlimits_workflow.models (fetching and checking folders), which the training
module imports: loading reads both, and neither imports this module.
"""

from __future__ import annotations

import json
from pathlib import Path

from .models import ModelSourceError, check_model_folder, one_line
from .training import load_trained


def load_model(model_dir: str | Path, device: str = "cpu"):
    """Load a fetched model folder for inference, its attention routed through the capture
    (which delegates to the model's fast SDPA attention), in float32."""
    import torch
    from transformers import AutoModel

    from attnlimits.attention_capture import register_capture
    from attnlimits.families import family

    # A folder damaged after its fetch (disk, a copy by hand) is named here, file by file.
    check_model_folder(model_dir, f"delete {model_dir} and rerun to fetch (or train) it again")
    settings = json.loads((Path(model_dir) / "config.json").read_text())
    family(settings.get("model_type"))  # refuses an unsupported family before loading its weights
    if settings.get("attnlimits_attention"):  # trained by the study with another normalizer
        return load_trained(model_dir, register_capture()).to(device)
    try:
        model = AutoModel.from_pretrained(
            model_dir, attn_implementation=register_capture(), dtype=torch.float32
        )
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # each file reads, yet they disagree (a hand edit, a flipped digit in config.json)
        raise ModelSourceError(
            f"{Path(model_dir) / 'config.json'}: the model's config.json and weights do not fit "
            f"({one_line(exc)}); delete {model_dir} and rerun to fetch it again"
        ) from None
    return model.to(device).eval()
