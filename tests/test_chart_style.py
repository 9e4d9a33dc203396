"""How every chart looks (src/compare/style.py): a gpu keeps its colour in every comparison, tall
grids become pages, and a bar too short or too long to draw still says its value."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

from src.compare import style


def test_profiles_keep_their_own_distinct_colours():
    colours = [style.gpu_colour(gpu) for gpu in ("rtx3090", "a6000", "a100", "h100", "h200", "cpu")]
    assert len(set(colours)) == len(colours)
    assert style.gpu_colour("rtx3090") == style.PROFILE_COLOURS["rtx3090"]


def test_any_other_gpu_has_the_same_colour_in_every_process():
    """Not Python's salted hash(): a fresh process (another compare) gives the same colour."""
    code = "from src.compare import style; print(style.gpu_colour('lambdacloud_h100_80gb_pcie_gen5'))"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={"PYTHONHASHSEED": seed},
        ).stdout  # fmt: skip
        for seed in ("1", "2")
    }
    assert len(seen) == 1
    assert style.gpu_colour("rtx_4090") not in style.PROFILE_COLOURS.values()


def test_a_tall_grid_is_split_into_pages_within_the_budget(tmp_path):
    pages = style.pages([5.6] * 10, budget_in=18)
    assert [list(p) for p in pages] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert style.pages([30.0, 1.0], budget_in=18) == [range(0, 1), range(1, 2)]  # a tall row alone
    assert style.save(style.figure(2, 2), tmp_path / "scaling", "one page").name == "scaling.png"
    assert style.save(style.figure(2, 2), tmp_path / "scaling", "paged", page=(2, 3)).name == "scaling_p2.png"


def test_a_flagged_outlier_does_not_squash_the_axis():
    assert style.axis_end([1.0, 1.2, 157.0], [False, False, True]) == 1.2 * 1.18


def test_values_too_short_or_too_long_to_draw_are_written():
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    style.hbars(ax, [0.0002, 1.0, 150.0], ["0.000200x", "1.00x", "150x"], end=2.0)
    drawn = ax.patches
    texts = [t.get_text() for t in ax.texts]
    assert "0.000200x (too short to draw)" in texts and "1.00x" in texts
    assert any(t.startswith("150x (beyond the axis)") for t in texts)
    assert drawn[2].get_width() == 2.0  # cut at the axis' edge


def test_no_two_gpus_of_a_comparison_share_a_colour_and_the_same_gpus_keep_theirs():
    # Lambda's systems whose hashes pick the same colour of the palette
    gpus = ["rtx3090", "a6000", "h100", *[f"lambda_system_{i}" for i in range(25)]]
    style.use_colours(gpus)
    first = {gpu: style.gpu_colour(gpu) for gpu in gpus}
    assert len(set(map(str, first.values()))) == len(gpus)
    assert first["a6000"] == style.PROFILE_COLOURS["a6000"]
    style.use_colours(list(reversed(gpus)))  # another compare of the same gpus
    assert {gpu: style.gpu_colour(gpu) for gpu in gpus} == first


def test_a_label_that_would_leave_its_panel_is_written_inside_its_bar():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.2, 2), layout="constrained")
    ax = fig.subplots()
    style.hbars(ax, [0.3, 1.9], ["0.300x", "1.90x  ! outside_spec scaling_above_100"], end=2.0)
    style.keep_labels_inside(fig)
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    for label in ax.texts:
        extent = label.get_window_extent(renderer)
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 + 0.5, label.get_text()
    assert ax.texts[1].get_horizontalalignment() == "right"  # moved: it ends at its bar's end
    assert ax.texts[0].get_horizontalalignment() == "left"  # room beside its bar: left there


def test_the_relative_chart_shows_each_ratio_as_a_bar_in_its_gpus_colour_with_its_label(tmp_path, drawn):
    from matplotlib.container import BarContainer

    from src.compare.charts import Bar, relative_bars

    style.use_colours(["a6000", "h100", "rtx3090"])
    given = [  # in no order: the chart sorts them
        Bar("h100", "amp", "lambda", 3.4),
        Bar("a6000", "tf32", "measured", 1.25, interval=(1.2, 1.3)),
        Bar("a6000", "amp", "measured", 1.02, interval=(0.98, 1.06)),
    ]
    items = [("vision, 1 GPU", bar) for bar in given]
    (png,) = relative_bars(items, "rtx3090", "per category", tmp_path / "relative_by_category")
    (fig,) = drawn
    assert png.name == "relative_by_category.png" and png.read_bytes().startswith(b"\x89PNG")
    fp32, mixed = fig.axes[:2]
    assert fp32.get_title(loc="left") == "vision, 1 GPU · fp32, tf32"
    assert mixed.get_title(loc="left") == "vision, 1 GPU · amp, bf16"
    assert mixed.get_xlabel() == "training throughput relative to rtx3090 (= 1.0)"
    assert [t.get_text() for t in mixed.get_yticklabels()] == ["a6000 amp", "h100 amp [lambda]"]
    (bars,) = [c for c in mixed.containers if isinstance(c, BarContainer)]
    assert [p.get_width() for p in bars] == [1.02, 3.4]
    assert [p.get_facecolor() for p in bars] == [
        matplotlib.colors.to_rgba(style.gpu_colour(g)) for g in ("a6000", "h100")
    ]
    assert [p.get_hatch() or "" for p in bars] == ["", style.PUBLISHED_HATCH]  # a published figure is hatched
    written = [t.get_text() for t in mixed.texts]
    assert any(t.startswith("1.02") and "~1" in t for t in written)  # its interval holds 1.0
    assert any(t.startswith("3.40") for t in written)


def test_a_title_longer_than_a_narrow_chart_is_wrapped_inside_it(tmp_path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = style.figure(4.0, 3.0)
    fig.add_subplot().barh([0], [1.0])
    detail = "bars from 0 on one scale; whiskers: 95% interval, ~1: it holds 1.0 (no measurable difference)"
    what = "Training throughput relative to rtx3090, per model on 1 GPU"
    style.save(fig, tmp_path / "relative", what, detail)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    drawn = fig._suptitle.get_window_extent(canvas.get_renderer())
    assert drawn.x1 <= fig.bbox.x1
    assert "holds 1.0" in fig._suptitle.get_text().replace("\n", " ")


def test_a_step_breakdown_panel_title_is_wrapped_within_its_panel():
    import textwrap

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from src.compare.explain_charts import PANEL_W_IN, TITLE_CHARS

    fig = Figure(figsize=(PANEL_W_IN * 2, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2, sharey=True)
    title = "txl_large [batch_size=8, gpu=h200, memory_limit_gb=48.0, gpu_name=NVIDIA H200, power_limit=700.0] amp x1"
    for ax in (left, right):
        ax.set_title(textwrap.fill(title, TITLE_CHARS), fontsize="small", loc="left")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    assert left._left_title.get_window_extent(renderer).x1 < right.get_window_extent(renderer).x0
