"""Compare's reading of a point (src/config/points.py's one key): repeats are runs of one point, a
flag belongs to the run that earned it, and every pairing takes its two sides from the same point
but for the compared key, the same stack first, flagging what differs.

The runs are one real CPU run and its record logged again with one thing changed, as another
thread count, node layout, install, cap or repeat would have logged it.
"""

from __future__ import annotations

import pytest
from conftest import logged_copy, read_runs, store_copy

from src.compare import analysis, anomalies, axis, capacity
from src.compare.runs import aggregate, to_record
from src.config import points
from src.results import recorded, run_result


@pytest.fixture(scope="module")
def real_run(tiny_runs):
    return tiny_runs[1]  # conftest's clean run of a real CPU job


@pytest.fixture
def store(tmp_path, empty_store):
    return store_copy(empty_store, tmp_path / "mlruns")


def measurements(uri: str):
    records = [r for r in (to_record(run_result.read(run)) for run in read_runs(uri)) if r is not None]
    return aggregate(records)


def test_runs_of_other_threads_or_nodes_are_points_of_their_own_and_a_run_without_the_nodes_tag_is_one_node(
    real_run, store
):
    logged_copy(real_run, store)
    logged_copy(real_run, store, dropped=(recorded.NNODES,))  # logged before the tag: one node
    logged_copy(real_run, store, {points.CPU_THREADS: "1"})
    logged_copy(real_run, store, {recorded.NNODES: "2", recorded.GPUS_PER_NODE: "1"})
    found = {m.variant: m.n_runs for m in measurements(store)}
    threads = real_run.data.tags[points.CPU_THREADS]
    assert found == {
        f"cpu_threads={threads}": 2,
        "cpu_threads=1": 1,
        f"cpu_threads={threads}, nnodes=2": 1,
    }


def repeat(run, uri: str, n: int, tags: dict | None = None, params: dict | None = None) -> str:
    """Repeat n of the run's point: its own config, so its own resume hash."""
    hashed = {recorded.CONFIG_HASH: f"{run.data.tags[recorded.CONFIG_HASH]}-{n}"}
    return logged_copy(run, uri, hashed | (tags or {}), {"benchmark.repeat": str(n)} | (params or {}))


def test_repeats_measured_another_way_are_said_naming_only_those_runs(real_run, store):
    repeats = [repeat(real_run, store, n) for n in range(3)]
    odd = repeat(real_run, store, 3, params={"benchmark.max_steps": "20"})
    [m] = measurements(store)
    assert m.n_runs == 4 and {r.run_id for r in m.runs} == {*repeats, odd}
    [found] = anomalies.procedure_anomalies([m])
    assert found.detail == "repeats measured with different max_steps 20/400: 1 of 4"
    assert found.run_ids == (odd,)


def test_a_flag_belongs_to_the_run_that_earned_it(real_run, store):
    busy = "pid 4242 notebook (gpu0, 0.50 GB) in the window"
    clean = [repeat(real_run, store, n) for n in range(3)]
    shared = repeat(real_run, store, 3, {recorded.GPU_FOREIGN_PROCESSES: busy})
    [m] = measurements(store)
    [found] = anomalies.flawed_runs([m], anomalies.GPU_SHARED)
    assert found.detail == f"1 of 4 run(s) shared a GPU: {busy}"
    [row] = anomalies.section([found]).tables[0].rows
    assert row["run_ids"] == shared
    assert anomalies.tag_runs(store, [m], [], {}, [found]) == 1  # a point on one GPU: no scaling
    tagged = {r.info.run_id for r in read_runs(store) if recorded.ANOMALY in r.data.tags}
    assert tagged == {shared} and not tagged & set(clean)


def test_a_flawed_run_its_point_measured_again_clean_is_left_out_of_the_figure(real_run, store):
    """What resume does after a busy GPU: the same config (its hash) measured again, clean."""
    busy = "pid 4242 notebook (gpu0, 0.50 GB) before start and in the window"
    flawed = repeat(real_run, store, 0, {recorded.GPU_FOREIGN_PROCESSES: busy})
    again = repeat(real_run, store, 0)
    other = repeat(real_run, store, 1, {recorded.GPU_FOREIGN_PROCESSES: busy})  # no clean run of its config
    [m] = measurements(store)
    assert {r.run_id for r in m.runs} == {again, other} and [r.run_id for r in m.superseded] == [flawed]
    [shared] = anomalies.flawed_runs([m], anomalies.GPU_SHARED)
    assert shared.run_ids == (other,)


def gpu_copy(run, uri: str, gpu: str, dropped: tuple = (), **tags) -> str:
    return logged_copy(run, uri, {recorded.GPU: gpu} | tags, dropped=dropped)


def test_a_ratio_takes_no_baseline_measured_with_another_setting(real_run, store):
    gpu_copy(real_run, store, "cpu_b", dropped=(points.CPU_THREADS,))  # logged before the threads were
    gpu_copy(real_run, store, "cpu", cpu_threads="1")
    rows = analysis.relative_table(measurements(store), "cpu_b")
    [row] = [r for r in rows if r.measurement.gpu == "cpu"]
    assert row.baseline is None and row.ratio is None  # not a ratio of 1 thread over 2
    gpu_copy(real_run, store, "cpu_b", cpu_threads="1")
    [row] = [r for r in analysis.relative_table(measurements(store), "cpu_b") if r.measurement.gpu == "cpu"]
    assert dict(row.baseline.config)["tag:cpu_threads"] == "1" and not row.flags


def capped(run, uri: str, cap: int, batch: int, torch: str) -> str:
    params = {"gpu.memory_limit_gb": str(cap), points.RAN_BATCH: str(batch)}
    return logged_copy(run, uri, {"torch_version": torch}, params)


def test_the_capacity_split_pairs_the_same_stack_where_it_exists_and_flags_it_where_not(real_run, store):
    capped(real_run, store, 48, 8, "2.14.1")
    capped(real_run, store, 48, 16, "2.14.1")
    capped(real_run, store, 24, 8, "2.13.0")  # the smaller card measured on another install first
    [row], _ = capacity.split(measurements(store), ["cpu@48", "cpu@24"])
    assert row["iso_ratio"].stack_differs == "torch 2.14.1 vs 2.13.0"
    assert row["stack_differs"] == "torch 2.14.1 vs 2.13.0"

    capped(real_run, store, 24, 8, "2.14.1")  # ...and then on the same one: the split takes it
    [row], _ = capacity.split(measurements(store), ["cpu@48", "cpu@24"])
    iso = row["iso_ratio"]
    assert not iso.flags and {dict(p.software)["torch"] for p in iso.points()} == {"2.14.1"}
    assert row["stack_differs"] == ""


def records_of(uri: str):
    return [r for r in (to_record(run_result.read(run)) for run in read_runs(uri)) if r is not None]


def test_by_pairs_the_same_point_but_for_the_compared_key(real_run, store):
    logged_copy(real_run, store, {"torch_version": "2.13.0", points.CPU_THREADS: "1"})
    logged_copy(real_run, store, dropped=(points.CPU_THREADS,))  # 2.14.1, before the threads were logged
    kept, _ = axis.along(records_of(store), "torch")
    rows = analysis.relative_table(aggregate(kept), "torch=2.13.0", by="torch")
    [newer] = [r for r in rows if r.measurement.side == "torch=2.14.1"]
    assert newer.measurement.gpu == "cpu"  # the compared key is an axis of its own: gpu stays the card
    assert newer.baseline is None  # not 2.14.1 at the shared threads over 2.13.0 at one thread
    logged_copy(real_run, store, {"torch_version": "2.13.0"}, dropped=(points.CPU_THREADS,))
    kept, _ = axis.along(records_of(store), "torch")
    rows = analysis.relative_table(aggregate(kept), "torch=2.13.0", by="torch")
    [newer] = [r for r in rows if r.measurement.side == "torch=2.14.1"]
    assert newer.baseline is not None and "tag:cpu_threads" not in dict(newer.baseline.config)
