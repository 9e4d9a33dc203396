"""How every chart looks (src/compare/charts.py): a gpu keeps its colour in every comparison, tall
charts become pages, a title is one line, the baseline is the line at 1.0, and each bar's label sits
inside its panel, clear of its whisker."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

from src.compare import charts
from src.compare.ratio import Ratio, Spread
from tests.test_capacity import assert_labels_inside_and_past_the_bars

PROFILES = ("rtx3090", "a6000", "a100", "h100", "h200", "cpu")


def test_profiles_keep_their_own_distinct_colours():
    colours = charts.colours(PROFILES)
    assert len({str(c) for c in colours.values()}) == len(PROFILES)
    assert colours["rtx3090"] == charts.PROFILE_COLOURS["rtx3090"]


def test_any_other_gpu_has_the_same_colour_in_every_process():
    """Not Python's salted hash(): a fresh process (another compare) gives the same colour."""
    code = "from src.compare import charts; print(charts.colours(['lambdacloud_h100_80gb_pcie_gen5']))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(seen) == 1
    assert charts.colours(["rtx_4090"])["rtx_4090"] not in charts.PROFILE_COLOURS.values()


def test_no_two_gpus_of_a_comparison_share_a_colour_and_the_same_gpus_keep_theirs():
    # Lambda's systems whose hashes pick the same colour of the palette
    gpus = ["rtx3090", "a6000", "h100", *[f"lambda_system_{i}" for i in range(25)]]
    first = charts.colours(gpus)
    assert len({str(c) for c in first.values()}) == len(gpus)
    assert first["a6000"] == charts.PROFILE_COLOURS["a6000"]
    assert charts.colours(list(reversed(gpus))) == first  # another compare of the same gpus


def test_a_tall_chart_is_split_into_pages_within_the_budget():
    assert [list(p) for p in charts.pages([5.6] * 10, budget_in=18)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert charts.pages([30.0, 1.0], budget_in=18) == [range(0, 1), range(1, 2)]  # a tall panel alone


def test_the_relative_chart_shows_each_ratio_as_a_bar_against_the_baseline_line(tmp_path, drawn):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.container import BarContainer

    given = [  # the blocks in name order, each block's bars as given
        ("vision, 1 GPU", charts.Bar("a6000", "tf32", "measured", Ratio(1.25, Spread(0.02, 4, "repeats")))),
        ("vision, 1 GPU", charts.Bar("h100", "amp", "lambda", Ratio(3.4, None), stated=3.1)),
        ("language, 1 GPU", charts.Bar("a6000", "amp", "measured", Ratio(1.02, Spread(0.02, 4, "repeats")))),
    ]
    title = "Training throughput relative to rtx3090, mean over the models each gpu and rtx3090 both have"
    (png,) = charts.relative(given, "rtx3090", title, "relative_by_category", lambda name: tmp_path / name)
    (fig,) = drawn
    assert png.name == "relative_by_category.png" and png.read_bytes().startswith(b"\x89PNG")
    assert fig.texts[0].get_text() == title  # one line, sized to the figure
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    assert fig.texts[0].get_window_extent(canvas.get_renderer()).x1 <= fig.bbox.x1
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["", "a6000 amp", "", "a6000 tf32", "h100 amp [lambda]"]
    headings = [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]
    assert headings == ["language, 1 GPU", "vision, 1 GPU"]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [p.get_width() for p in bars] == [1.02, 1.25, 3.4]  # no bar of 1.00x for the baseline
    assert ax.get_xlim()[1] > 3.4  # every bar on one scale, from 0
    colours = charts.colours(["a6000", "h100"])
    expected = [matplotlib.colors.to_rgba(colours[g]) for g in ("a6000", "a6000", "h100")]
    assert [p.get_facecolor() for p in bars] == expected
    assert [p.get_hatch() or "" for p in bars] == ["", "", "///"]  # a published figure is hatched
    labels = [t.get_text() for t in ax.texts if t.get_fontweight() != "bold"]
    assert labels == ["1.02x [0.96-1.08] ~1", "1.25x [1.18-1.32]", "3.40x, stated 3.10x"]
    [stated] = [line for line in ax.lines if line.get_marker() == "D"]
    assert list(stated.get_xdata()[2:]) == [3.1]  # the publication's figure marked on its bar
    [legend] = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["lambda figure", "stated by the publication"]
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "-"] == [1.0]
    assert_labels_inside_and_past_the_bars(fig, ax)


def test_a_title_too_long_for_its_figure_is_set_smaller_on_one_line(tmp_path):
    fig, ax = charts.figure(["a6000 fp32"], 2, width_in=2.5)
    ax.barh([0], [1.0])
    title = "Training throughput relative to rtx3090, per model on 1 GPU, page 1 of 2"
    charts.save(fig, tmp_path / "narrow.png", title, [])
    assert fig.texts[0].get_fontsize() < 12 and "\n" not in fig.texts[0].get_text()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    assert fig.texts[0].get_window_extent(canvas.get_renderer()).x1 <= fig.bbox.x1


def test_the_per_model_chart_leaves_the_baseline_out(tmp_path, drawn):
    """Its own ratio of 1.0 by definition is the line, not a bar."""
    from src.compare.analysis import relative_table
    from tests.test_compare import measurement

    points = [measurement("rtx3090", "resnet50", 100.0), measurement("a6000", "resnet50", 90.0)]
    rows = relative_table(points, "rtx3090")
    (png,) = charts.per_model(rows, "rtx3090", {}, lambda name: tmp_path / name)
    assert png.name == "relative_by_model_x1.png"
    [ax] = drawn[0].axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["", "a6000 fp32"]  # under its model, resnet50


def test_the_step_time_chart_names_each_point_whole(tmp_path, drawn):
    """A point's name (its sizes and cap spelt out) fits left of the bars, inside the figure."""
    from types import SimpleNamespace

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from src.results.recorded import SHARES

    workload = "txl_large [batch_size=8, memory_limit_gb=48.0]"
    point = SimpleNamespace(side="h200", gpu_count=1, workload=workload, precision="amp")
    point.shares, point.achieved_tflops_per_gpu = dict.fromkeys(SHARES, 0.2), 18.2
    placed = SimpleNamespace(point=point, share_of_ceiling=0.03, math="fp16")
    (png,) = charts.breakdown([placed], lambda name: tmp_path / name)
    assert png.name == "ceilings_and_step_time.png"
    [ax] = drawn[0].axes
    renderer = FigureCanvasAgg(drawn[0]).get_renderer()
    drawn[0].draw_without_rendering()
    [label] = ax.get_yticklabels()
    assert label.get_text() == f"h200 x1 {workload} amp"
    assert label.get_window_extent(renderer).x0 >= 0
