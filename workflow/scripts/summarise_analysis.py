"""A registered analysis's summary and bound-check counts (attnlimits_workflow.analyses.generic.summarise_analysis): the
generic rule's adapter, so a new analysis needs no script of its own."""

from attnlimits_workflow.analyses.generic import summarise_analysis

summarise_analysis(snakemake)
