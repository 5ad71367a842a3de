"""Figure helpers: axis labels a reader can read."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from attnlimits_workflow.plotting import log_axis  # noqa: E402

pytestmark = pytest.mark.unit


def labels(axis) -> list[str]:
    formatter = axis.get_major_formatter()
    return [formatter(v, i) for i, v in enumerate(axis.get_majorticklocs())]


def test_log_axis_labels_each_tick_in_plain_numbers():
    fig, ax = plt.subplots()
    temperatures = [0.001, 0.00316, 0.01, 1.0, 31.6, 100.0]
    ax.plot(temperatures, [1e-5, 1e-3, 0.1, 1, 10, 20])
    log_axis(ax, "x", temperatures)
    log_axis(ax, "y")
    fig.canvas.draw()
    # a ScalarFormatter wrote 0.001 and 0.00316 both as "0.00"
    assert labels(ax.xaxis) == ["0.001", "0.00316", "0.01", "1", "31.6", "100"]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert {"1e-05", "0.001", "0.1", "10"} <= set(labels(ax.yaxis))
    # minor ticks carry no labels (matplotlib's "3x10^1 4x10^1" ran into each other)
    minor = ax.xaxis.get_minor_formatter()
    assert all(minor(v, i) == "" for i, v in enumerate(ax.xaxis.get_minorticklocs()))
    plt.close(fig)
