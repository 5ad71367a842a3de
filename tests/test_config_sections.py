"""The cross-key rules of one model's config, one check per section (attnlimits_workflow.config's
SECTION_CHECKS): each on the shipped defaults with one or two keys changed, against the exact
lines a user reads."""

import copy

import pytest
import yaml
from project import REPO

from attnlimits_workflow import config, config_schema, registry
from attnlimits_workflow import config_sections as checks

pytestmark = pytest.mark.unit

DEFAULTS = yaml.safe_load((REPO / "config/config.yaml").read_text())


def changed(**keys):
    """The defaults with dotted keys (``analysis__lengths`` for analysis.lengths) set."""
    cfg = copy.deepcopy(DEFAULTS)
    for dotted, value in keys.items():
        *head, last = dotted.split("__")
        node = cfg
        for key in head:
            node = node[key]
        node[last] = value
    return cfg


PURE_CHECKS = [c for c in checks.SECTION_CHECKS if c is not checks.model_config_errors]


@pytest.mark.parametrize("check", PURE_CHECKS, ids=lambda c: c.__name__)
def test_the_defaults_pass_every_section_check(check):
    assert check(copy.deepcopy(DEFAULTS)) == []


def test_extraction_refuses_more_than_2000_batches():
    assert checks.extraction_errors(
        changed(chunking__n_chunks=4001, extraction__chunks_per_batch=2)
    ) == [
        "extraction.chunks_per_batch: 4001 chunks in batches of 2 make 2001 extraction jobs "
        "(at most 2000); raise chunks_per_batch to 3 or more"
    ]
    # 4000 chunks in batches of 2 are 2000 jobs: the limit itself is allowed
    assert (
        checks.extraction_errors(changed(chunking__n_chunks=4000, extraction__chunks_per_batch=2))
        == []
    )


def test_lengths_are_at_least_two_and_within_a_chunk():
    cfg = changed(analysis__lengths=[1, 64, 128], chunking__chunk_length=64)
    assert checks.lengths_errors(cfg) == [
        "analysis.lengths[0]: L=1; every L must be >= 2",
        "analysis.lengths[2]: L=128 exceeds chunking.chunk_length=64",
    ]


def test_distance_scans_at_a_dumped_length_with_n_below_it():
    cfg = changed(
        analysis__lengths=[64, 32],
        analysis__distance={"n_fixed": 32, "length_fixed": 48, "n_grid": [1, 48, 50]},
    )
    assert registry.distance_config_errors(cfg) == [
        "analysis.distance.n_fixed: N=32 must be < every L in analysis.lengths (smallest 32)",
        "analysis.distance.length_fixed: L=48 is not in analysis.lengths [32, 64]",
        "analysis.distance.n_grid[1]: N=48 must be < L=48 (allowed: 1..47)",
        "analysis.distance.n_grid[2]: N=50 must be < L=48 (allowed: 1..47)",
    ]


def test_separability_scans_at_a_dumped_length_with_n_below_it():
    cfg = changed(analysis__separability={"length": 100, "n_grid": [99, 100]})
    assert registry.separability_config_errors(cfg) == [
        "analysis.separability.length: L=100 is not in analysis.lengths "
        "[32, 64, 128, 256, 512, 1024]",
        "analysis.separability.n_grid[1]: N=100 must be < L=100 (allowed: 1..99)",
    ]


def test_gradient_temperatures_name_different_jobs():
    cfg = changed(
        analysis__gradient={"length": 1024, "temperatures": [0.1, 2.0, 0.1000001, 2.000001]}
    )
    # 0.1000001 prints as 0.1 (6 significant digits): the same job; 2.000001 as 2, too
    assert registry.gradient_config_errors(cfg) == [
        "analysis.gradient.temperatures[2]: 0.1000001 and 0.1 name the same job T0.1 "
        "(temperatures must differ in their first 6 significant digits)",
        "analysis.gradient.temperatures[3]: 2.000001 and 2.0 name the same job T2 "
        "(temperatures must differ in their first 6 significant digits)",
    ]
    assert registry.gradient_config_errors(
        changed(analysis__gradient={"length": 5, "temperatures": [1.0]})
    ) == ["analysis.gradient.length: L=5 is not in analysis.lengths [32, 64, 128, 256, 512, 1024]"]


def test_beyond_names_known_normalizers_and_their_parameters():
    cfg = changed(
        beyond__n=3,
        beyond__normalizers={
            "soft": {"kind": "softermax", "s": 1.0},
            "sparse": {"kind": "sparsemax", "s": 0.5, "a": 1.0},
            "sa": {"kind": "self_adjust_softmax", "temperature": 2.0},
            "ok": {"kind": "scalable_softmax", "s": 0.4},
        },
    )
    errors = checks.beyond_errors(cfg)
    assert (
        errors[0]
        == "beyond.n: N=3 is not in analysis.separability.n_grid [1, 2, 4, 8, 16, 32, 64, 128]"
    )
    assert errors[1].startswith("beyond.normalizers.soft.kind: 'softermax' is not one of [")
    assert errors[2:] == [
        "beyond.normalizers.sparse.a: not a parameter of sparsemax; allowed: temperature",
        "beyond.normalizers.sparse.s: not a parameter of sparsemax; allowed: temperature",
        "beyond.normalizers.sa.temperature: not a parameter of self_adjust_softmax; allowed: none",
    ]


def test_beyond_refuses_a_name_snakemake_cannot_plan():
    cfg = changed(beyond__normalizers={"ab" * 20: {"kind": "softmax"}})
    assert checks.beyond_errors(cfg) == [
        f"beyond.normalizers: {'ab' * 20!r} ends in 'ab' repeated 20 times, which Snakemake "
        "refuses as a wildcard value (at most 19 repeats)"
    ]


def test_auto_chunking_is_bounded_by_its_cap():
    cfg = changed(chunking__n_chunks="auto", chunking__max_chunks=8)
    assert checks.most_chunks(cfg["chunking"]) == 8
    assert checks.protocol_errors(cfg) == []
    cfg["analysis"]["all_rows"]["chunks"] = 9
    assert checks.protocol_errors(cfg) == [
        "analysis.all_rows.chunks: 9 exceeds chunking.max_chunks (n_chunks: auto) 8"
    ]
    cfg = changed(chunking__n_chunks="auto", chunking__max_chunks=4001)
    cfg["extraction"]["chunks_per_batch"] = 2
    assert checks.extraction_errors(cfg)[0].startswith("extraction.chunks_per_batch: 4001 chunks")
    # an explicit number reads no cap
    assert (
        checks.most_chunks(changed(chunking__n_chunks=5, chunking__max_chunks=2)["chunking"]) == 5
    )


def test_the_protocol_and_embedding_need_their_chunks_and_vectors():
    cfg = changed(extraction__vectors=["v"], analysis__embedding="key")
    cfg["analysis"]["all_rows"]["chunks"] = 17
    cfg["analysis"]["separability"]["delta_over"] = "selected"
    assert checks.protocol_errors(cfg) == [
        "analysis.all_rows.chunks: 17 exceeds chunking.n_chunks 16",
        "analysis.separability.delta_over: the all_rows protocol uses the head's context delta "
        "for every row; allowed with it: context",
        "extraction.vectors: analysis.protocol all_rows recomputes every row from q and k, which "
        "['v'] leaves out of the dumps; add them or use protocol last_row",
        "extraction.vectors: analysis.embedding 'key' reads k, which ['v'] leaves out of the "
        "dumps; add 'k'",
    ]
    # last_row reads the analysed rows the dumps store; hidden is stored apart from the vectors
    cfg = changed(
        extraction__vectors=[], analysis__protocol="last_row", analysis__embedding="hidden"
    )
    cfg["analysis"]["separability"]["delta_over"] = "selected"
    assert checks.protocol_errors(cfg) == []


def test_corpus_needs_a_known_encoding_and_a_text_file(tmp_path):
    text, binary = tmp_path / "book.txt", tmp_path / "book.bin"
    text.write_bytes(b"Chapter 1\n\tIt was\x0c a dark night.\r\n")
    binary.write_bytes(b"ab\x00\x01" * 50)
    assert checks.corpus_errors(changed(corpus__path=str(text))) == []
    assert checks.corpus_errors(changed(corpus__path=str(binary), corpus__encoding="utf-99")) == [
        "corpus.encoding: 'utf-99' is not an encoding Python knows (e.g. utf-8, latin-1)",
        f"corpus.path: {binary} is not text: 50% of its first 200 bytes are NULs or control "
        "characters",
    ]
    assert checks.corpus_errors(changed(corpus__path=str(tmp_path))) == [
        f"corpus.path: {tmp_path} does not exist or is not a file"
    ]


def test_figures_style_is_a_file(tmp_path):
    style = tmp_path / "my.mplstyle"
    style.write_text("lines.linewidth: 2\n")
    assert checks.figures_errors(changed(figures__style=str(style))) == []
    assert checks.figures_errors(changed(figures__style=str(tmp_path / "no.mplstyle"))) == [
        f"figures.style: {tmp_path / 'no.mplstyle'} does not exist or is not a file"
    ]


def test_model_needs_a_source_that_is_there(tmp_path):
    none = {"hf_id": None, "path": None, "package": None, "gguf_file": None}
    assert checks.model_source_errors(changed(model={**DEFAULTS["model"], **none})) == [
        "model: no source; set one of model.gguf_file, model.package, model.path, model.hf_id"
    ]
    # a trained model (the study's) has its folder from the train_model job
    trained = {**DEFAULTS["model"], **none, "trained": "softmax"}
    assert checks.model_source_errors(changed(model=trained)) == []
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    pretrained = {**DEFAULTS["model"], "path": str(folder), "config_overrides": {"n_layer": 2}}
    assert checks.model_source_errors(changed(model=pretrained)) == [
        f"model.path: {folder} has no weights (*.safetensors / *.bin); set model.random_init: "
        "true to use its architecture with random weights",
        "model.config_overrides: only allowed with model.random_init: true (pretrained weights "
        "fix the architecture)",
    ]
    assert checks.model_source_errors(changed(model={**pretrained, "random_init": True})) == []
    assert checks.model_source_errors(
        changed(model={**DEFAULTS["model"], "path": str(tmp_path / "x")})
    ) == [f"model.path: {tmp_path / 'x'} is not a model folder (no config.json)"]


def test_a_gguf_file_brings_its_weights(tmp_path):
    model = {**DEFAULTS["model"], "gguf_file": str(tmp_path / "m.gguf"), "random_init": True}
    assert checks.model_source_errors(changed(model=model)) == [
        f"model.gguf_file: {tmp_path / 'm.gguf'} does not exist",
        "model.gguf_file: a GGUF file brings its weights; random_init must be false",
    ]


def test_model_config_checks_apply_when_its_config_json_is_at_hand(tmp_path):
    import json

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 64}))
    model = {**DEFAULTS["model"], "path": str(folder), "random_init": True}
    cfg = changed(model=model, chunking__chunk_length=64, analysis__lengths=[32, 64])
    assert checks.model_config_errors(cfg) == []
    cfg = changed(model=model, chunking__chunk_length=128, analysis__lengths=[32, 64])
    assert checks.model_config_errors(cfg) == [
        "chunking.chunk_length: 128 exceeds the model's 64 positions"
    ]
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": "x"}))
    assert checks.model_config_errors(cfg)[0].startswith(
        "model: its config.json has a setting of an unexpected kind ("
    )
    (folder / "config.json").write_text("{not json")
    assert checks.model_config_errors(cfg)[0].startswith(
        f"model.path: {folder}/config.json is damaged ("
    )


def test_semantic_errors_lists_the_sections_in_order(tmp_path):
    """One problem in each of five sections, listed extraction, analysis, beyond, protocol,
    corpus, figures (the order users have always read them in)."""
    cfg = changed(
        chunking__n_chunks=4001,
        extraction__chunks_per_batch=2,
        beyond__n=3,
        corpus__encoding="utf-99",
        figures__style=str(tmp_path / "no.mplstyle"),
    )
    cfg["analysis"]["distance"]["length_fixed"] = 48
    cfg["analysis"]["all_rows"]["chunks"] = 5000
    assert [line.split(":", 1)[0] for line in checks.semantic_errors(cfg)] == [
        "extraction.chunks_per_batch",
        "analysis.distance.length_fixed",
        "analysis.distance.n_grid[4]",
        "beyond.n",
        "analysis.all_rows.chunks",
        "corpus.encoding",
        "figures.style",
    ]


def test_names_the_paths_are_made_of_are_checked_once_per_run():
    """name_errors, run on the whole config before each model's checks."""
    cfg = changed(corpus__name="x" * 20)
    cfg["study"]["normalizers"] = {"ab" * 20: {"kind": "softmax"}}
    runs = {"compare": {"model": {"trained": None}}, "gpt2": {"model": {"trained": "softmax"}}}
    assert config.name_errors(cfg, runs) == [
        "model.name: 'compare' is a folder the workflow's shared outputs use; choose another "
        "name (reserved: compare, study, default_model, figures, download_corpus)",
        "corpus.name: 'xxxxxxxxxxxxxxxxxxxx' ends in 'x' repeated 20 times, which Snakemake "
        "refuses as a wildcard value (at most 19 repeats)",
        f"study.normalizers: {'ab' * 20!r} ends in 'ab' repeated 20 times, which Snakemake "
        "refuses as a wildcard value (at most 19 repeats)",
        "model.trained: set by the workflow for the study's models only; remove it (a model to "
        "train is an entry of study.normalizers)",
    ]
    cfg["models"] = {"compare": None}
    assert config.name_errors(cfg, runs)[0].startswith("models: 'compare' is a folder")
    assert config.name_errors(cfg, runs)[-1].startswith("models.gpt2 -> model.trained: set by")


def test_corpus_bundled_names_a_text_python_ships():
    schema = config_schema.read_schema(REPO / "workflow/schemas/config.schema.yaml")
    assert config_schema.schema_errors(changed(corpus__bundled="python_docs"), schema) == []
    (line,) = config_schema.schema_errors(changed(corpus__bundled="gutenberg"), schema)
    assert line.startswith("corpus.bundled:") and "python_docs" in line


def test_all_rows_needs_two_draws_to_know_the_error_of_e():
    schema = config_schema.read_schema(REPO / "workflow/schemas/config.schema.yaml")
    assert config_schema.schema_errors(changed(analysis__all_rows__mc_draws=2), schema) == []
    (line,) = config_schema.schema_errors(changed(analysis__all_rows__mc_draws=1), schema)
    assert line.startswith("analysis.all_rows.mc_draws:")
