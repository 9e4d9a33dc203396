"""compare's capacity_split=[A,B]: speed (iso-batch), speed x capacity (max-batch), the capacity
factor and their 95% intervals, the runs it lacks with their commands, the published context, and
its chart."""

from __future__ import annotations

import math

import pytest

from src.compare import capacity
from src.compare.report import cell
from src.compare.runs import aggregate, to_record
from src.results.stats import t95
from tests.conftest import read_back


def point(
    gpu,
    cap,
    model,
    precision,
    batch,
    throughput,
    source="measured",
    category="language",
    spread_d=None,
    tags=None,
    params=None,
):
    """A measurement, from runs as compare reads them; with spread_d, of three repeats at
    throughput x e^-d, x, x e^d (median x, the log's standard deviation d: standard error d / sqrt(3),
    2 degrees of freedom)."""
    params = {"batch_size": str(batch)} | (params or {}) if batch is not None else dict(params or {})
    if cap is not None:
        params["gpu.memory_limit_gb"] = f"{cap:.1f}"
    own = dict(gpu=gpu, gpu_count="1", model=model, category=category, precision=precision, unit="tokens/s")
    tags = own | ({} if source == "measured" else {"source": source}) | (tags or {})
    repeats = [throughput * math.exp(k * spread_d) for k in (-1, 0, 1)] if spread_d else [throughput]
    records = [
        to_record(read_back(tags, params, {"throughput": t}, run_id=f"{gpu}{cap}{model}{batch}{t}"))
        for t in repeats
    ]
    (m,) = aggregate(records)
    return m


def around(value, half, rel=1e-9):
    return pytest.approx((value * math.exp(-half), value * math.exp(half)), rel=rel)


PAIR = ["h200@48", "h200@24"]


def test_the_split_divides_a_ratio_into_speed_and_capacity():
    runs = [
        point("h200", 24, "txl_large", "tf32", 4, 1000.0),  # the smaller card's largest batch
        point("h200", 48, "txl_large", "tf32", 4, 1100.0),  # the larger card at that batch
        point("h200", 48, "txl_large", "tf32", 16, 1650.0),  # the larger card's largest
        point("h200", None, "txl_large", "tf32", 16, 9999.0),  # uncapped: another card, not in the pair
    ]
    (row,), missing = capacity.split(runs, PAIR)
    assert missing == []
    assert (row["iso_batch"], row["max_batch"], row["baseline_max_batch"]) == (4, 16, 4)
    assert row["iso_ratio"].value == pytest.approx(1.1)
    assert row["max_ratio"].value == pytest.approx(1.65)
    assert row["capacity_factor"].value == pytest.approx(1.5)


D = 0.01  # the log spread of every point's repeats below
HALF_ONE_PAIR = t95(4) * math.sqrt(2 / 3) * D  # two points of 3 repeats: se^2 = 2 D^2/3, Welch's dof 4


def test_each_split_ratio_carries_a_95_interval_from_the_repeats_of_the_points_it_divides():
    runs = [
        point("h200", 24, "txl_large", "tf32", 4, 1000.0, spread_d=D),  # the smaller card: iso and max
        point("h200", 48, "txl_large", "tf32", 4, 1100.0, spread_d=D),
        point("h200", 48, "txl_large", "tf32", 16, 1650.0, spread_d=D),
    ]
    (row,), _ = capacity.split(runs, PAIR)
    assert row["iso_ratio"].interval == around(1.1, HALF_ONE_PAIR)
    assert row["max_ratio"].interval == around(1.65, HALF_ONE_PAIR)
    # max / iso = (A16 / B4) / (A4 / B4) = A16 / A4: the smaller card's point cancels, it is not
    # counted twice (four points would give se^2 = 4 D^2/3 with 8 dof, a wider interval)
    assert row["capacity_factor"].interval == around(1.5, HALF_ONE_PAIR)
    assert cell(row, "capacity_factor_low") == pytest.approx(1.5 * math.exp(-HALF_ONE_PAIR))
    assert cell(row, "iso_ratio_high") == pytest.approx(1.1 * math.exp(HALF_ONE_PAIR))
    assert row["interval"] == "repeats" and row["difference"] == ""


def test_a_split_ratio_without_a_spread_has_no_interval_and_one_that_holds_one_says_so():
    runs = [
        point("h200", 24, "txl_large", "amp", 8, 1000.0, spread_d=0.05),
        point("h200", 48, "txl_large", "amp", 8, 1010.0, spread_d=0.05),  # the same card: speed ~1
        point("h200", 48, "txl_large", "amp", 32, 1500.0),  # a lone run that logged no step-time CI
    ]
    (row,), _ = capacity.split(runs, PAIR)
    low, high = row["iso_ratio"].interval
    assert low < 1.0 < high
    assert (row["max_ratio"].interval, row["capacity_factor"].interval) == (None, None)
    assert (cell(row, "max_ratio_low"), cell(row, "capacity_factor_high")) == (None, None)
    assert row["difference"] == "speed: no measurable difference"
    assert row["interval"] == (
        "speed: repeats; speed x capacity: none: a run without a step-time CI; "
        "capacity: none: a run without a step-time CI"
    )


def test_category_means_carry_intervals_that_count_each_point_once():
    runs = [
        point("h200", cap, model, "tf32", batch, t, spread_d=D)
        for model in ("txl_base", "txl_large")
        for cap, batch, t in ((24, 4, 1000.0), (48, 4, 1100.0), (48, 16, 1650.0))
    ]
    rows, _ = capacity.split(runs, PAIR)
    (mean,) = capacity.category_means(rows)
    # two equal ratios, each of two independent points: the mean's log has se^2 = 4 (1/2)^2 D^2/3,
    # Welch's dof 8; the factor's smaller-card points cancel as in one model's
    half = t95(8) * math.sqrt(1 / 3) * D
    assert mean["iso_ratio"].interval == around(1.1, half)
    assert mean["max_ratio"].interval == around(1.65, half)
    assert mean["capacity_factor"].interval == around(1.5, half)
    assert "1.65x [1.63-1.67] at each card's largest batch = 1.10x [1.09-1.11] speed at the same batch" in (
        capacity.sentence(mean)
    )


def test_category_means_take_the_models_with_both_ratios():
    runs = [
        point("a6000", None, "txl_base", "amp", 24, 120.0),
        point("rtx3090", None, "txl_base", "amp", 24, 100.0),
        point("a6000", None, "txl_base", "amp", 64, 150.0),
        point("a6000", None, "txl_large", "amp", 8, 60.0),
        point("rtx3090", None, "txl_large", "amp", 8, 50.0),
        point("a6000", None, "txl_large", "amp", 32, 90.0),
        point("a6000", None, "resnet50", "amp", 448, 10.0, category="vision"),  # no baseline run
    ]
    rows, missing = capacity.split(runs, ["a6000", "rtx3090"])
    (mean,) = capacity.category_means(rows)
    assert mean["iso_ratio"].value == pytest.approx(1.2)
    assert mean["max_ratio"].value == pytest.approx((1.5 + 1.8) / 2)
    assert mean["capacity_factor"].value == pytest.approx(1.65 / 1.2)
    assert mean["models"] == "txl_base txl_large"
    assert mean["iso_ratio"].interval is None  # runs without a spread: no interval is invented
    assert missing == [
        "capacity_split: rtx3090 has no resnet50 amp x1 run at batch auto (its largest batch); run: "
        "python -m src.train gpu=rtx3090 model=resnet50 precision=amp model.batch_size=auto"
    ]
    assert "1.65x at each card's largest batch = 1.20x speed at the same batch x 1.38x capacity" in (
        capacity.sentence(mean)
    )


def test_a_pair_without_a_common_batch_names_the_iso_batch_run_to_add():
    runs = [
        point("h200", 24, "txl_base", "tf32", 14, 100.0),
        point("h200", 48, "txl_base", "tf32", 40, 130.0),
    ]
    (row,), missing = capacity.split(runs, PAIR)
    assert (row["iso_ratio"], row["capacity_factor"]) == (None, None)
    assert row["max_ratio"].value == pytest.approx(1.3)
    assert missing == [
        "capacity_split: h200@48 has no txl_base tf32 x1 run at batch 14 (the iso-batch point); run: "
        "python -m src.train gpu=h200 gpu.memory_limit_gb=48 model=txl_base precision=tf32 model.batch_size=14"
    ]


def test_capped_cards_stand_for_the_profile_of_their_memory_beside_its_published_ratio():
    published = [
        point(
            gpu,
            None,
            "resnet50",
            "fp32",
            None,
            t,
            source="lambda",
            category="vision",
            tags={"published_batch_size": batch},
            params={"gpu.memory_gb": memory},
        )
        for gpu, t, batch, memory in (("a6000", 420.0, "496", "48"), ("rtx3090", 400.0, "224", "24"))
    ]
    stand_ins = [capacity.stands_for(published, card) for card in ("h200@24", "h200@48", "h100")]
    assert stand_ins == ["rtx3090", "a6000", "h100"]
    runs = [
        point("h200", 24, "resnet50", "tf32", 224, 1000.0, category="vision"),
        point("h200", 48, "resnet50", "tf32", 224, 1000.0, category="vision"),
        *published,
    ]
    (row,), _ = capacity.split(runs, PAIR)
    assert row["published_ratio"] == pytest.approx(1.05)
    assert (row["published_batch"], row["published_baseline_batch"]) == (496, 224)


CURVE_RUNS = [(24, 2, 600.0), (24, 4, 1000.0), (48, 4, 1000.0), (48, 8, 1400.0), (48, 16, 1650.0)]


def test_the_split_chart_shows_each_ratio_as_a_bar_with_its_label_inside_the_panel(tmp_path, drawn):
    from matplotlib.container import BarContainer

    from src.compare.charts import capacity as chart

    runs = [point("h200", cap, "txl_large", "tf32", b, t) for cap, b, t in CURVE_RUNS]
    rows, _ = capacity.split(runs, PAIR)
    (png,) = chart(rows, lambda name: tmp_path / name)
    (fig,) = drawn
    (ax,) = fig.axes
    assert png.read_bytes().startswith(b"\x89PNG") and png.name == "capacity_split.png"
    assert fig.texts[0].get_text() == "Speed and capacity: h200@48 against h200@24"  # one line
    assert [t.get_text() for t in ax.get_yticklabels()] == ["", "iso-batch tf32", "max-batch tf32"]
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    # iso-batch 1000 / 1000 at batch 4; max-batch 1650 (batch 16) / 1000 (batch 4); nothing published
    assert [p.get_width() for p in bars] == [pytest.approx(1.0), pytest.approx(1.65)]
    assert [t.get_text() for t in ax.texts] == [
        "txl_large, 1 GPU",
        "1.00x",
        "1.65x",
    ]  # the model, then the bars
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "-"] == [1.0]  # the baseline
    assert_labels_inside_and_past_the_bars(fig, ax)


def assert_labels_inside_and_past_the_bars(fig, ax):
    """Every text inside the axes; each bar's label clear of its bar and whisker."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.container import BarContainer

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    panel = ax.get_window_extent(renderer)
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    whiskers = bars.errorbar.lines[2][0].get_segments() if bars.errorbar else [[(0, 0)]] * len(bars)
    ends = [
        max(bar.get_width(), *(x for x, _ in whisker)) for bar, whisker in zip(bars, whiskers, strict=True)
    ]
    labels = [t for t in ax.texts if t.get_fontweight() != "bold"]
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        assert panel.x0 <= box.x0 and box.x1 <= panel.x1, text.get_text()
    for label, end in zip(labels, ends, strict=True):
        assert label.get_window_extent(renderer).x0 > ax.transData.transform((end, 0))[0], label.get_text()


def test_compare_writes_the_split_and_names_the_runs_it_lacks(tmp_path, capsys, tracking_uri):
    """Through a real store: capped runs as a job logs them, three repeats of each txl_large point,
    compare capacity_split=[h200@48,h200@24]."""
    from mlflow.tracking import MlflowClient

    from tests.test_compare import EXPERIMENT, make_measured_run, read_csv, run

    uri = tracking_uri
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(EXPERIMENT)
    for cap, batch, throughput in [(24, 4, 1000.0), (48, 4, 1100.0), (48, 16, 1650.0)]:
        params = {"gpu.memory_limit_gb": float(cap), "model.batch_size": "auto", "batch_size": batch}
        for k in (-1, 0, 1):
            make_measured_run(
                client, experiment_id, "h200", "txl_large", throughput * math.exp(k * D), params
            )
    make_measured_run(
        client, experiment_id, "h200", "txl_base", 5000.0, {"gpu.memory_limit_gb": 24.0, "batch_size": 14}
    )
    result = run(uri, tmp_path / "out", "baseline=h200", "capacity_split=[h200@48,h200@24]")
    rows = {r["model"]: r for r in read_csv(result.out / capacity.CSV)}
    assert float(rows["txl_large"]["capacity_factor"]) == pytest.approx(1.5)
    low, high = (float(rows["txl_large"][f"capacity_factor_{end}"]) for end in ("low", "high"))
    assert (low, high) == around(1.5, HALF_ONE_PAIR, rel=1e-5)  # a CSV keeps 6 figures
    assert rows["txl_base"]["max_ratio"] == rows["txl_base"]["max_ratio_low"] == ""
    (mean,) = read_csv(result.out / capacity.MEANS_CSV)
    assert (mean["models"], mean["interval"]) == ("txl_large", "repeats")
    assert float(mean["iso_ratio_low"]) == pytest.approx(1.1 * math.exp(-HALF_ONE_PAIR), rel=1e-5)
    command = "python -m src.train gpu=h200 gpu.memory_limit_gb=48 model=txl_base precision=fp32 model.batch_size=auto"
    report = (result.out / "report.md").read_text()
    assert (
        "1.65x [1.61-1.69] at each card's largest batch = 1.10x [1.08-1.13] speed at the same batch x "
        "1.50x [1.47-1.53] capacity" in report
    )
    assert (
        "| txl_large | fp32 | 1 GPU | 4 | 16 | 4 | 1.10x [1.08-1.13] | 1.65x [1.61-1.69] | 1.50x [1.47-1.53] |"
        in report
    )
    assert f"run: {command}" in report
    printed = capsys.readouterr().out
    # on the console: one line for the runs to add, where report.md names them, then the split's tables
    assert "capacity_split: 1 run(s) to add; report.md (Speed and capacity) names each" in printed
    assert command not in printed
    lines = [line.split() for line in printed.splitlines()]
    assert ["1.10x", "[1.08-1.13]", "1.65x", "[1.61-1.69]", "1.50x", "[1.47-1.53]"] in lines
    assert ["txl_large,", "fp32,", "1", "GPU"] in lines and ["language,", "fp32,", "1", "GPU"] in lines
    assert (
        "memory_limit_gb=24.0" in (result.out / "relative_throughput.csv").read_text()
    )  # labels say the cap


def test_a_split_of_one_card_is_refused_before_any_work(tmp_path):
    from src.errors import ConfigError
    from tests.test_compare import run

    with pytest.raises(ConfigError, match=r"capacity_split=\['h200@48'\]: must be two different cards"):
        run(f"sqlite:///{tmp_path}/none.db", tmp_path / "out", "capacity_split=[h200@48]")
    for cap in ("abc", "-1", "0", "inf"):  # a memory limit must be a number of GB above 0
        with pytest.raises(
            ConfigError, match=rf"capacity_split=\['h200@{cap}', 'h200@24'\]: must be two different cards"
        ):
            run(f"sqlite:///{tmp_path}/none.db", tmp_path / "out", f"capacity_split=[h200@{cap},h200@24]")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.slow  # a real CLI scenario (processes, a store): CI's slow set (README)
def test_the_overlay_sweeps_both_caps_at_the_largest_and_the_smaller_cards_batch():
    """experiment=capacity_split: every point of its sweep composes and finalises, as its jobs will."""
    import itertools

    from hydra import compose, initialize_config_dir

    from src.config.finalise import finalize
    from src.config.schema import register_configs
    from src.run.resume import config_hash
    from tests.conftest import CONF_DIR, compose_cfg

    register_configs()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        hydra_cfg = compose("config", overrides=["experiment=capacity_split"], return_hydra_config=True)
    params = {key: str(value).split(",") for key, value in hydra_cfg.hydra.sweeper.params.items()}
    assert params["gpu.memory_limit_gb"] == ["24", "48"] and params["model.batch_size"] == ["auto", "null"]
    jobs = [dict(zip(params, values, strict=True)) for values in itertools.product(*params.values())]
    batches, hashes = {}, set()
    for job in jobs:
        cfg = finalize(compose_cfg(["experiment=capacity_split", *(f"{k}={v}" for k, v in job.items())]))
        assert cfg.gpu.name == "h200" and cfg.gpu.memory_limit_gb == float(job["gpu.memory_limit_gb"])
        batches[(cfg.model.name, cfg.precision.name, job["model.batch_size"])] = cfg.model.batch_size
        hashes.add(config_hash(cfg))
    assert len(hashes) == len(jobs) == 24
    assert batches[("txl_large", "tf32", "null")] == 4 and batches[("txl_large", "amp", "null")] == 8
    assert batches[("resnet50", "tf32", "null")] == 224 and batches[("txl_base", "amp", "auto")] == "auto"
