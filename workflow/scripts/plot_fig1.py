"""Fig. 1 drawn from data: embeddings on a circle, scaled by their attention weights, and the
ball B_r(s) of Theorem 2 (attnlimits_workflow.assemble.fig1)."""

from attnlimits_workflow.assemble.fig1 import fig1
from attnlimits_workflow.jobs import job_logger
from attnlimits_workflow.plotting import save, use_style
from attnlimits_workflow.streams import Stream, stream_rng

log = job_logger(snakemake, "fig1")
use_style(snakemake.input.style)
fig, caption, ratio = fig1(stream_rng(snakemake.params.seed, Stream.FIG1_ILLUSTRATION))
save(fig, snakemake.output.pdf, snakemake.output.png, caption, caption_y=-0.2)
log.info("fig1: N_s/N = %.2f", ratio)
