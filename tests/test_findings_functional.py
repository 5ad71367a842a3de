"""docs/findings.md's N* section (attnlimits_workflow.assemble.findings_functional) on hand-made
N* tables: the shape of N* against L, the correlation with the critical N, and the page block."""

import polars as pl
import pytest

from attnlimits_workflow.assemble import findings_functional

pytestmark = pytest.mark.unit


def n_star_table(n_stars, variant="attention-delete", lengths=(256, 512, 1024), censored=()):
    rows = []
    for length, n in zip(lengths, n_stars, strict=True):
        cut = length in censored
        rows.append(
            {
                "length": length,
                "variant": variant,
                "n_star": None if cut else n,
                "censored": cut,
                "lower_bound": n + 1 if cut else None,
                "n_star_low": None if cut else n - 1.0,
                "n_star_high": None if cut else n + 2.0,
                "n_star_over_length": None if cut else n / length,
                "dnll_at_n_star": None if cut else 0.049,
                "chunks": 8,
                "N_crit_over_L_monte_carlo": 0.88,
                "N_crit_censored_monte_carlo": length == 1024,
            }
        )
    return pl.DataFrame(
        rows,
        schema_overrides={
            "n_star": pl.Int64,
            "lower_bound": pl.Int64,
            "n_star_low": pl.Float64,
            "n_star_high": pl.Float64,
            "n_star_over_length": pl.Float64,
            "dnll_at_n_star": pl.Float64,
        },
    )


def one_length_correlations() -> pl.DataFrame:
    """A correlation table with one shared length: rho not defined."""
    return pl.DataFrame(
        {"variant": ["attention-delete"], "expectation": ["closed_form"], "lengths": [1]},
    ).with_columns(spearman_rho=pl.lit(None, pl.Float64))


def critical_table(n_crit, **columns) -> pl.DataFrame:
    """A two-length critical-N table (L = 128, 256) under the closed form, non_selected."""
    return pl.DataFrame(
        {
            "L": [128, 256],
            "masked": ["non_selected"] * 2,
            "expectation": ["closed_form"] * 2,
            "N_crit": n_crit,
            **columns,
        }
    )


def test_the_shape_counts_the_steps_where_n_star_grows_and_its_share_falls():
    said = findings_functional.shape_sentence(n_star_table([61, 116, 215]))
    assert "N* (attention-delete) grows at every step (61 -> 116 -> 215)" in said
    assert "N*/L falls at every step (0.238 -> 0.227 -> 0.21)" in said
    assert "where N* did not grow" not in said
    # 100 -> 300 doubles L but triples N*: N*/L rises on that step
    said = findings_functional.shape_sentence(n_star_table([100, 90, 300]))
    assert "grows at 1 of 2 steps" in said and "N*/L falls at 1 of 2 steps" in said
    # review 30: a constant N* makes N*/L fall with L whatever the model does, and a share of
    # 1/1024 is not 0.000
    flat = findings_functional.shape_sentence(n_star_table([1, 1, 1]))
    assert "grows at 0 of 2 steps" in flat and "(0.00391 -> 0.00195 -> 0.000977)" in flat
    assert "2 of them where N* did not grow, which L's growth alone gives" in flat
    one = findings_functional.shape_sentence(n_star_table([61, 116, 215], censored=(256, 512)))
    assert one.startswith("Fewer than two lengths")


def test_the_correlation_sentence_says_when_it_is_not_defined():
    correlations = pl.DataFrame(
        {
            "variant": ["attention-delete", "attention-delete"],
            "expectation": ["monte_carlo", "closed_form"],
            "lengths": [3, 4],
            "spearman_rho": [None, -0.8],
        }
    )
    said = findings_functional.correlation_sentence(correlations)
    assert "(monte_carlo): not defined: 3 lengths with both uncensored, 4 needed" in said
    assert "(closed_form): Spearman rho -0.80 over 4 lengths" in said
    # review 26: four lengths and rho undefined is a tie (one value at every length), not a
    # shortage of lengths
    tied = correlations.with_columns(pl.Series("lengths", [4, 4]))
    said_tied = findings_functional.correlation_sentence(tied)
    assert (
        "(monte_carlo): not defined: over 4 lengths with both uncensored, N*/L takes one value "
        in (said_tied)
    )
    assert "takes one value at every length" in said_tied
    assert "a description, not a test" in said
    assert "No random-delete N*" in findings_functional.correlation_sentence(
        correlations, "random-delete"
    )


def test_the_page_block_and_the_run_without_n_star():
    table = pl.concat(
        [
            n_star_table([61, 116, 215]),
            n_star_table([198, 427, 902], "random-delete", censored=(1024,)),
        ]
    )
    correlations = pl.DataFrame(
        {"variant": ["attention-delete"], "expectation": ["monte_carlo"], "lengths": [3]},
        schema_overrides={"lengths": pl.Int64},
    ).with_columns(spearman_rho=pl.lit(None, pl.Float64))
    block = findings_functional.functional_section(
        {"smol": table}, {"smol": correlations}, {"smol": 0.05}
    )
    lines = block.splitlines()
    assert lines[0] == "### smol"
    assert lines[2] == (
        "| variant | L | N*_0.05 [interval] | N*/L | dNLL_rel at N* | chunks | N_crit/L (monte_carlo) |"
    )
    assert "| attention-delete | 256 | 61 [60, 63] | 0.238 | 0.049 | 8 | 0.88 |" in lines
    assert "| random-delete | 1024 | > 902 (censored) | n/a | n/a | 8 | >= 0.88 |" in lines
    assert "![N* of smol](findings/smol.effective_set.png)" in lines
    assert findings_functional.functional_section({}, {}, {}).startswith("No model entry")


def test_the_entry_table_carries_the_critical_n_and_whether_it_is_censored():
    from attnlimits_workflow.assemble.effective_set_report import effective_set_table

    summary = pl.DataFrame({"length": [256, 512], "variant": ["attention-delete"] * 2})
    critical = pl.DataFrame(
        {
            "length": [256, 512, 256],
            "expectation": ["monte_carlo", "monte_carlo", "closed_form"],
            "N_crit_over_length": [0.5, 0.75, 0.25],
            "N_crit_censored": [False, True, False],
        }
    )
    table = effective_set_table(summary, critical)
    assert table["N_crit_over_L_monte_carlo"].to_list() == [0.5, 0.75]
    assert table["N_crit_censored_monte_carlo"].to_list() == [False, True]
    assert table["N_crit_over_L_closed_form"].to_list() == [0.25, None]


def test_a_censored_critical_n_prints_as_its_lower_bound():
    """Review 10: a length whose critical-N search never passed has no N_crit; the page printed
    ">= n/a". It prints N_crit / L >= its top N tried / L, and the figure marks it open."""
    from attnlimits_workflow.assemble.effective_set_report import (
        critical_by_length,
        effective_set_figure,
        effective_set_table,
    )

    critical = critical_table([16.0, float("nan")], censored=[False, True], top_N=[16, 255])
    by_length = critical_by_length(critical, "non_selected")
    assert by_length["N_crit_over_length"].to_list() == [0.125, 1.0]  # N_crit > 255
    summary = n_star_table([61, 116], lengths=(128, 256)).drop(
        "N_crit_over_L_monte_carlo", "N_crit_censored_monte_carlo"
    )
    table = effective_set_table(summary, by_length)
    correlations = one_length_correlations()
    block = findings_functional.entry_block("smol", table, correlations, 0.05)
    assert ">= n/a" not in block and ">= 1" in block
    effective_set_figure(table, by_length, 0.05)


def test_an_unrefined_n_star_prints_its_cell():
    table = n_star_table([61, 116, 215]).with_columns(
        pl.Series("n_star_floor", [61, 65, 215], dtype=pl.Int64)
    )
    correlations = one_length_correlations()
    block = findings_functional.entry_block("smol", table, correlations, 0.05)
    assert "| 65-116 (grid cell) [115, 118] | 0.127-0.227 | 0.049 (at 116) |" in block
    assert "| 61 [60, 63] | 0.238 | 0.049 |" in block
    # review 32: cells' tops are no steps along L
    assert "known to power-of-two cells at some L (effective_set.refine false)" in block
    assert "grows" not in findings_functional.shape_sentence(table)


def test_the_critical_n_beside_n_star_prints_its_grid_cell():
    """Review 30: under Algorithm 3's list N_crit is known to its cell (the N tried before the
    first pass, N_crit]; the table printed the cell's top as a point."""
    from attnlimits_workflow.assemble.effective_set_report import (
        critical_by_length,
        effective_set_table,
    )

    critical = critical_table(
        [16.0, 64.0], N_crit_low=[13, 64], censored=[False, False], top_N=[16, 64]
    )
    by_length = critical_by_length(critical, "non_selected")
    assert by_length["N_crit_cell_low"].to_list() == [12 / 128, None]
    summary = n_star_table([61, 116], lengths=(128, 256)).drop(
        "N_crit_over_L_monte_carlo", "N_crit_censored_monte_carlo"
    )
    table = effective_set_table(summary, by_length)
    correlations = one_length_correlations()
    block = findings_functional.entry_block("smol", table, correlations, 0.05)
    assert "| (0.0938, 0.125] |" in block and "| 0.25 |" in block


def test_the_n_star_figure_joins_only_found_values_by_its_line():
    """Review 30: a censored N*'s lower bound sat on the same solid line as the found values;
    it is an open marker only."""
    from attnlimits_workflow.assemble.effective_set_report import effective_set_figure

    summary = n_star_table([61, 116, 300], censored=(1024,))
    critical = pl.DataFrame(
        {"length": [256], "expectation": ["closed_form"], "N_crit_over_length": [0.5]},
        schema_overrides={"N_crit_over_length": pl.Float64},
    ).with_columns(N_crit_censored=pl.lit(False))
    figure = effective_set_figure(summary, critical, 0.05)
    (line,) = [ln for ln in figure.axes[0].get_lines() if ln.get_label().startswith("N*/L")]
    assert len(line.get_xdata()) == 2  # L = 256 and 512; 1024 is censored


def test_the_correlation_sentence_says_n_crit_is_its_lists_first_pass():
    """Review 35: N* cells are left out of the rank correlation; review 37: N_crit is known to
    its list cell, and lengths whose cells overlap tie; the sentence says how it is ranked."""
    correlations = pl.DataFrame(
        {
            "variant": ["attention-delete"],
            "expectation": ["closed_form"],
            "lengths": [4],
            "spearman_rho": [0.8],
        }
    )
    said = findings_functional.correlation_sentence(correlations)
    assert "N_crit ranked by its list cell, lengths whose cells overlap tied" in said


def test_the_n_star_figure_draws_cells_as_ranges():
    """Review 34: with effective_set.refine false the figure joined the cells' tops by its
    line, as points; a cell is drawn as the range it is, and the line joins exact values."""
    from attnlimits_workflow.assemble.effective_set_report import effective_set_figure

    summary = n_star_table([61, 116, 215]).with_columns(
        pl.Series("n_star_floor", [61, 65, 215], dtype=pl.Int64)
    )
    critical = pl.DataFrame(
        {"length": [256], "expectation": ["closed_form"], "N_crit_over_length": [0.5]},
        schema_overrides={"N_crit_over_length": pl.Float64},
    ).with_columns(N_crit_censored=pl.lit(False))
    lines = effective_set_figure(summary, critical, 0.05).axes[0].get_lines()
    (joined,) = [ln for ln in lines if ln.get_label().startswith("N*/L")]
    assert list(joined.get_xdata()) == pytest.approx([256, 1024])
    (cell,) = [ln for ln in lines if ln.get_label().startswith("N* cell")]
    assert list(cell.get_ydata()) == pytest.approx([65 / 512, 116 / 512])


def test_the_rank_correlation_reads_no_cell_tops():
    """Review 34: with effective_set.refine false the shape sentence read no step, but Spearman's
    rho still ranked the cells' tops; such lengths are left out of it."""
    from attnlimits_workflow.assemble.effective_set_report import rank_correlations

    lengths = (128, 256, 512, 1024)
    summary = n_star_table([8, 16, 16, 32], lengths=lengths)
    critical = pl.DataFrame(
        {
            "length": list(lengths),
            "expectation": ["closed_form"] * 4,
            "N_crit_over_length": [0.1, 0.2, 0.3, 0.4],
            "N_crit_censored": [False] * 4,
        }
    )
    assert rank_correlations(summary, critical)["lengths"].to_list() == [4]
    cells = summary.with_columns(pl.Series("n_star_floor", [5, 9, 9, 17], dtype=pl.Int64))
    assert rank_correlations(cells, critical)["lengths"].to_list() == [0]


def test_a_ks_blind_critical_n_ranks_nothing_and_is_drawn_apart():
    """Review 41: where the KS test cannot reach alpha on its sample count (its least p-value
    >= alpha), the first N of the list passes whatever the data; that N_crit entered the rank
    correlation and the figure as a measurement."""
    from attnlimits_workflow.assemble.effective_set_report import (
        critical_by_length,
        effective_set_figure,
        effective_set_table,
        rank_correlations,
    )

    lengths = (128, 256, 512, 1024)
    critical = pl.DataFrame(
        {
            "L": list(lengths),
            "masked": ["non_selected"] * 4,
            "expectation": ["closed_form"] * 4,
            "N_crit": [1.0, 40.0, 90.0, 200.0],
            "censored": [False] * 4,
            "ks_min_pvalue": [0.02, 0.001, 0.001, 0.001],  # L = 128: 3 values per side
        }
    )
    summary = n_star_table([8, 16, 40, 64], lengths=lengths)
    seen = critical_by_length(critical, "non_selected", 0.01)
    assert seen["N_crit_blind"].to_list() == [True, False, False, False]
    assert rank_correlations(summary, seen)["lengths"].to_list() == [3]
    unaware = critical_by_length(critical, "non_selected")  # no alpha: nothing is blind
    assert rank_correlations(summary, unaware)["lengths"].to_list() == [4]
    table = effective_set_table(summary.drop("N_crit_over_L_monte_carlo"), seen)
    assert table["N_crit_blind_closed_form"].to_list() == [True, False, False, False]
    block = findings_functional.entry_block("smol", table, one_length_correlations(), 0.05)
    assert "| 0.00781 (KS blind) |" in block
    lines = effective_set_figure(summary, seen, 0.05).axes[0].get_lines()
    (blind,) = [ln for ln in lines if "KS blind" in ln.get_label()]
    assert list(blind.get_xdata()) == [128]
    (measured,) = [ln for ln in lines if ln.get_label() == "N_crit/L, closed_form"]
    assert list(measured.get_xdata()) == [256, 512, 1024]


def test_the_published_numbers_are_compared_by_the_interval_at_1024():
    """Review 48: the page quoted the follow-up's N*_5 % and compared nothing; where the entry's
    N*/L at 1024 falls is now said, read by its interval (published 11 to 280 of 1024 keys)."""
    table = n_star_table([61, 116, 254])  # N* 254 [253, 256] at 1024: 0.248 [0.247, 0.25]
    said = findings_functional.published_sentence(table, 0.05)
    assert said.startswith(
        "Against the published numbers: at L = 1024 this entry's N*/L (attention-delete) is 0.248"
        " [0.247, 0.25], within the published range (0.0107 to 0.273"
    )
    above = findings_functional.published_sentence(n_star_table([61, 116, 300]), 0.05)
    assert "above every published model's" in above
    below = findings_functional.published_sentence(n_star_table([61, 116, 5]), 0.05)
    assert "below every published model's" in below
    wide = n_star_table([61, 116, 254]).with_columns(
        pl.when(pl.col("length") == 1024)
        .then(1024.0)
        .otherwise(pl.col("n_star_high"))
        .alias("n_star_high")
    )
    assert "reaching beyond the published range on one side; the point lies within it" in (
        findings_functional.published_sentence(wide, 0.05)
    )
    assert "not compared" in findings_functional.published_sentence(table, 0.1)
    cut = n_star_table([61, 116, 254], censored=(1024,))
    assert "not compared" in findings_functional.published_sentence(cut, 0.05)


def test_resolved_steps_and_the_correlation_answer():
    """Review 48: the steps of N* along L were read on point values alone, and the correlation
    had no answer; over 4 lengths even rho = 1 has a two-sided permutation p of 1/12."""
    # intervals n - 1 .. n + 2: 61 -> 116 resolved, 116 -> 118 not; N*/L: 0.238 -> 0.227 (its
    # interval [0.225, 0.23] wholly below [0.234, 0.246]) resolved, 0.227 -> 0.115 resolved
    table = n_star_table([61, 116, 118])
    assert findings_functional.resolved_steps(table) == (
        "The intervals resolve 1 of 2 steps of N* growing and 2 of 2 of N*/L falling (the next"
        " interval wholly beyond the last)."
    )
    four = pl.DataFrame(
        {"variant": ["attention-delete"], "expectation": ["closed_form"], "lengths": [4]}
    ).with_columns(spearman_rho=pl.lit(-0.32))
    assert findings_functional.correlation_answer(four) == (
        "Answer: not determinable here. Over 4 lengths even a perfect rank agreement has a"
        " two-sided permutation p of 2 / 4! = 0.0833, above 0.05."
    )
    six = four.with_columns(lengths=pl.lit(6))
    assert findings_functional.correlation_answer(six).startswith("Answer: a description only")
