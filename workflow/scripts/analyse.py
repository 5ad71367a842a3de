"""Any registered analysis at one L (attnlimits_workflow.analyses.generic.run_analysis): the
generic rule's adapter, so a new analysis needs no script of its own."""

from attnlimits_workflow.analyses.generic import run_analysis

run_analysis(snakemake)
