"""docs/extending.md's recipe for a normalizer, applied in a fresh copy of the repository: a toy
rule (softplus_norm, w = log(1 + e^(beta z)) normalized) is three hand-edited files -- its numpy
functions and record, its torch forward, its published formula and hand case -- and one generator
command, which writes it into config/README.md and docs/normalizers.md. The table-wide tests then
hold for it with no further edit, and a config naming it plans its normalizer job."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml
from test_generic_analysis import copy_of_repository, git

from attnlimits import rules
from attnlimits_workflow.runner import snakemake_command

KIND = "softplus_norm"

# 1. src/attnlimits/normalizers.py: the numpy functions and the record, listed in the table
NUMPY_RULE = '''
def softplus_norm_weights(logits, length, beta=1.0):
    """log(1 + e^(beta z)) / sum_j log(1 + e^(beta z_j)): a toy rule."""
    s = np.logaddexp(0.0, beta * np.asarray(logits, dtype=np.float64))
    return s / s.sum(axis=1, keepdims=True)


def softplus_norm_jacobian_norm(logits, length, beta=1.0):
    """||(diag(d) - w d^T) / S||_2 per row, d = beta sigma(beta z), S the softplus sum (dense)."""
    z = beta * np.asarray(logits, dtype=np.float64)
    s = np.logaddexp(0.0, z)
    total = s.sum(axis=1, keepdims=True)
    d = beta * np.exp(-np.logaddexp(0.0, -z))
    jac = (d[:, None, :] * np.eye(z.shape[1]) - (s / total)[:, :, None] * d[:, None, :]) / total[
        :, :, None
    ]
    return np.linalg.svd(jac, compute_uv=False)[:, 0]


SOFTPLUS_NORM = Rule(
    "softplus_norm",
    softplus_norm_weights,
    softplus_norm_jacobian_norm,
    (VANISHING,),
    lemma1="none: F = log(1 + e^(beta l)), smooth, positive, the same at every L",
    formula="log(1 + e^(beta l)) / sum log(1 + e^(beta l)), a toy rule",
    jacobian_text="largest singular value of (diag(d) - w d^T) / S, d = beta sigma(beta l); dense",
    summary="a toy: setting `beta`, default 1",
)


'''

# 2. src/attnlimits/attention_rules.py: the torch forward
TORCH_RULE = """def _softplus_norm(scores, visible, beta=1.0):
    s = torch.nn.functional.softplus(float(beta) * scores.masked_fill(~visible, 0.0))
    s = s.masked_fill(~visible, 0.0)
    return s / s.sum(dim=-1, keepdim=True)


"""

# 3. tests/test_normalizers.py: the published formula and a hand case
PUBLISHED_ENTRY = (
    '    "softplus_norm": lambda z, beta=1.0: torch.log1p(torch.exp(beta * z))'
    " / torch.log1p(torch.exp(beta * z)).sum(),\n"
)
HAND_CASE = """

def test_softplus_norm_hand_case():
    # softplus(log(e - 1)) = 1, softplus(0) = log 2
    w = nz.softplus_norm_weights(np.array([[math.log(math.e - 1.0), 0.0]]), 2)[0]
    np.testing.assert_allclose(w, [1 / (1 + math.log(2)), math.log(2) / (1 + math.log(2))])
    # at z = 0: J = (I / 2 - 11^T / 4) / (2 log 2), norm 1 / (4 log 2)
    norm = nz.softplus_norm_jacobian_norm(np.zeros((1, 2)), 2)[0]
    assert norm == pytest.approx(1 / (4 * math.log(2)))
"""


def insert(path, anchor: str, text: str, *, before: bool = False) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, (path, anchor)
    path.write_text(source.replace(anchor, text + anchor if before else anchor + text))


def apply_recipe(root) -> None:
    normalizers = root / "src/attnlimits/normalizers.py"
    insert(normalizers, "# " + "-" * 85 + " the table\n", NUMPY_RULE.lstrip("\n"), before=True)
    insert(normalizers, "        GATED_SOFTMAX,\n", "        SOFTPLUS_NORM,\n")
    forwards = root / "src/attnlimits/attention_rules.py"
    insert(forwards, "# forward(scores, visible, **settings, **learned)", TORCH_RULE, before=True)
    insert(
        forwards, '    "gated_softmax": _softmax,', f'    "{KIND}": _softplus_norm,\n', before=True
    )
    tests = root / "tests/test_normalizers.py"
    insert(tests, '    "gated_softmax": lambda z,', PUBLISHED_ENTRY, before=True)
    tests.write_text(tests.read_text() + HAND_CASE)


def run(root, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=root, capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.workflow
def test_the_normalizer_recipe_is_three_files_and_one_command(tmp_path):
    assert KIND not in rules.RULES  # else pick another toy
    copy = copy_of_repository(tmp_path)
    apply_recipe(copy)
    proc = run(copy, "-m", "attnlimits_workflow.config_docs", "--check")  # the lists drifted
    assert proc.returncode == 1 and "config_docs --write" in proc.stderr, proc.stderr
    proc = run(copy, "-m", "attnlimits_workflow.config_docs", "--write")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    touched = sorted(line[3:] for line in git(copy, "status", "--porcelain", "-uall").splitlines())
    assert touched == [
        "config/README.md",
        "docs/normalizers.md",
        "src/attnlimits/attention_rules.py",
        "src/attnlimits/normalizers.py",
        "tests/test_normalizers.py",
    ]
    # the generated lists name it (so the copy's own src was imported), after the last rule
    readme = (copy / "config/README.md").read_text()
    assert "`gated_softmax` (gated attention," in readme
    assert f"by construction), `{KIND}` (a toy: setting `beta`, default 1)." in readme
    page = (copy / "docs/normalizers.md").read_text()
    assert f"| `{KIND}` (`beta` 1) | log(1 + e^(beta l)) / sum log(1 + e^(beta l))" in page

    # the table-wide tests, each parametrised by kind, and the hand case, for the toy rule
    selection = f"{KIND} or every_rule"
    proc = run(
        copy,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_normalizers.py",
        "tests/test_rules.py",
        "tests/test_study.py",
        "-k",
        selection,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", proc.stdout).group(1))
    # normalizers: the autograd property, the hand case, the published-formula check; rules: both
    # sides, the forward against the what-if; study: the reference on causal rows, its property,
    # the finite gradients
    assert passed >= 8, proc.stdout[-2000:]

    # a config naming it in beyond.normalizers plans its normalizer job; an unknown setting is
    # refused by the config check
    for settings, ok in (({"beta": 2.0}, True), ({"gamma": 2.0}, False)):
        overlay = tmp_path / "overlay.yaml"
        entry = {"kind": KIND, **settings}
        overlay.write_text(yaml.safe_dump({"beyond": {"normalizers": {"softplus": entry}}}))
        cmd = snakemake_command(
            copy / "Snakefile",
            copy / ".test",
            copy / ".test/config/config.yaml",
            "-n",
            "--forceall",
            "all",
        )
        proc = run(copy, *cmd[1:], str(overlay))
        out = proc.stdout + proc.stderr
        if ok:
            assert proc.returncode == 0, out[-4000:]
            assert "normalizers/softplus/samples.parquet" in out, out[-4000:]
        else:
            assert proc.returncode != 0, out[-4000:]
            assert f"softplus.gamma: not a parameter of {KIND}; allowed: beta" in out, out[-4000:]
