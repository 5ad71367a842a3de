"""The analyses, one module per analysis: each takes a sample pack (or its already-read inputs)
and its typed settings and returns the table its rule writes, one function per protocol (the
last-row protocol, one row per sample; the all-rows protocol, one row per (layer, head)). The
rule scripts in workflow/scripts are adapters: read the inputs, call, write.

Shared pieces sit in :mod:`.common`; the per-head verdict of a check under the all-rows protocol
is :func:`attnlimits.checks.head_outcomes`, the one helper every analysis uses."""
