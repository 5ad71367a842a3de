"""A registered analysis's figure (attnlimits_workflow.analyses.generic.draw_figure): the
generic rule's adapter, so a new analysis needs no script of its own."""

from attnlimits_workflow.analyses.generic import draw_figure

draw_figure(snakemake)
