"""Lemma 2 on a study model's own rule: the exact ||d rule(z / T) / d z||_2 at every temperature T
of analysis.gradient.temperatures, on the analysed rows at analysis.gradient.length (the same
seeded samples as its normalizer job), with the rule's known bound per row and its check."""

import numpy as np
import polars as pl

from attnlimits import normalizers as nz
from attnlimits.checks import NOT_TESTABLE, RTOL_FLOAT64, VIOLATED, check_bound
from attnlimits.rules import jacobian_bound
from attnlimits_workflow.jobs import Timer, job_logger, sample_keys, write_table
from attnlimits_workflow.packs import read_pack
from attnlimits_workflow.streams import Stream, stream_rng
from attnlimits_workflow.training import normalizer_arguments, read_learned

log = job_logger(snakemake, "study_gradient")
timer = Timer()
p = snakemake.params
rule = dict(p.rule)
entry = dict(p.entry)
normalizer = nz.get(entry["kind"])
pack = read_pack(snakemake.input.pack)
L, S = pack.length, pack.weights.shape[0]
rng = stream_rng(p.seed, Stream.NORMALIZER_SAMPLES, L)  # the normalizer job's subset at this L
keep = np.sort(rng.choice(S, size=min(S, p.max_samples), replace=False))
keys = {k: v[keep] for k, v in sample_keys(pack).items()}
logits = np.asarray(pack.logits[keep], dtype=np.float64)
arguments = normalizer_arguments(
    entry, read_learned(snakemake.input.model), keys["layer"], keys["head"]
)
missing = [q.name for q in normalizer.learned if q.name not in arguments]
if missing:
    raise SystemExit(f"{snakemake.input.model}: no learned {rule['kind']} {missing} (learned.json)")
log.info("rule %s, L=%d, %d rows, %d temperatures", rule, L, len(keep), len(p.temperatures))

frames = []
for T in sorted(float(t) for t in p.temperatures):
    # chain rule: d rule(z/T)/dz = J_rule(z/T) / T
    norm = normalizer.jacobian_norm(logits / T, L, **arguments) / T
    bound = jacobian_bound(entry["kind"], T, L, arguments)  # every key of a row is visible: n = L
    bound_rows = np.broadcast_to(np.nan if bound is None else bound, norm.shape).astype(np.float64)
    check = check_bound(norm, bound_rows, upper=True, rtol=RTOL_FLOAT64)
    violated = check == VIOLATED
    frames.append(
        pl.DataFrame(
            {
                **keys,
                "L": np.full(len(keep), L, dtype=np.int32),
                "T": np.full(len(keep), T),
                "jacobian_norm": norm,
                "bound": bound_rows,
                "violated": violated,
                "not_testable": check == NOT_TESTABLE,
            }
        )
    )
    log.info(
        "T=%g: median ||J|| %.4g, max %.4g, bound %s, %d violations (%s)",
        T,
        np.median(norm),
        norm.max(),
        "none known" if bound is None else f"max {np.max(bound_rows):.4g}",
        int(violated.sum()),
        timer,
    )
write_table(pl.concat(frames), snakemake.output[0])
log.info("done in %s", timer)
