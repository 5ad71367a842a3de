"""One normalizer's diagnostics on the model's logits, for every L
(attnlimits_workflow.analyses.normalizer); input ``model``: a model the study trained with this
rule, whose learned per-head parameters it uses."""

from attnlimits import rules
from attnlimits_workflow.analyses import normalizer
from attnlimits_workflow.analyses.common import settings_from
from attnlimits_workflow.jobs import Timer, job_logger, write_table
from attnlimits_workflow.packs import read_pack
from attnlimits_workflow.training import read_learned

log = job_logger(snakemake, "normalizer")
timer = Timer()
name = snakemake.wildcards.normalizer
settings = settings_from(normalizer.Settings, snakemake.params)
entry = dict(settings.entry)
log.info("normalizer %s = %s(%s)", name, entry.pop("kind"), entry)
trained = snakemake.input.get("model")
learned = read_learned(trained if isinstance(trained, str) else (trained[0] if trained else None))
for learned_name in (
    q.name for q in rules.get(settings.entry["kind"]).learned if q.name in learned
):
    log.info(
        "%s: the trained model's learned per-head values %s", learned_name, learned[learned_name]
    )
packs = (read_pack(d) for d in snakemake.input.packs)
tables = normalizer.analyse(packs, name, settings, learned, log)
write_table(tables.samples, snakemake.output.samples)
write_table(tables.critical_n, snakemake.output.critical_n)
write_table(tables.separability, snakemake.output.separability)
log.info("done in %s", timer)
