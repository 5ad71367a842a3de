"""The run's assembly: summary tables from the analyses' samples, Tables 1 and 2, the scorecard,
the findings and study pages, and the figures; table in, table (or figure) out, no file I/O.
The rule scripts in workflow/scripts read the inputs, call these and write the outputs."""
