"""Every run tag that one part of gpubench writes and another reads, named once.

Writers: the job (src/run/job.py), the sweep (src/run/sweep.py), the importer
(src/import_results.py), compare's report and anomaly tags; readers: compare, the sweep summary,
resume, the spool. docs/metrics.md lists them for users. The measured settings' tags (`compile`,
...) are declared with their config keys in src/config/points.py.
"""

from __future__ import annotations

from src.config import points

# what a run measured: compare's point reads these
GPU = "gpu"  # the gpu profile
GPU_NAME = "gpu_name"  # the device name as detected (or published)
GPU_COUNT = "gpu_count"  # GPUs in the job, all nodes
NNODES = "nnodes"
GPUS_PER_NODE = "gpus_per_node"
MODEL = "model"
CATEGORY = "category"  # vision | language
PRECISION = "precision"
UNIT = "unit"  # of throughput: images/s, tokens/s, ...
BENCHMARK = "benchmark"  # the benchmark group's name: default, smoke
SOURCE = "source"  # who measured it: absent on this project's own runs, the publisher on imported ones
SETTINGS = tuple(e.tag for e in points.KEYS.values() if e.tag)  # compile, channels_last, ...
MATH_PREFIX = "math_"  # math_<what>: the math that ran (math_matmul_tf32, math_autocast_dtype, ...)
MATH_MATMUL_TF32 = MATH_PREFIX + "matmul_tf32"
VERSION_SUFFIX = "_version"  # <package>_version: the software the run ran with
DRIVER_VERSION = "driver" + VERSION_SUFFIX
CPU_MODEL = points.CARD["cpu"]  # a CPU job's processor, its card
CPU_THREADS = points.CPU_THREADS  # a CPU job's intra-op threads per rank, as they ran
POWER_LIMIT = "power_limit_w"  # the card's enforced power limit as NVML read it, per GPU ("300" or "300/350")
HOST = "host"
GPU_FOREIGN_PROCESSES = "gpu_foreign_processes"  # other programs on the job's GPUs: pid, name, memory, when

# how the run ended
CONFIG_HASH = "config_hash"  # resume: src/run/resume.py
STOP_REASON = "stop_reason"  # ci | max_steps | time_limit
DIVERGED = "diverged"  # "true": a non-finite loss in the window
ERROR = "error"  # why a run FAILED or was KILLED

# a sweep's parent run
SWEEP = "sweep"  # "true"
OVERRIDES = "overrides"
SWEEP_DIR = "sweep_dir"
SKIPPED_PREFIX = "skipped."  # skipped.<config_hash> = the id of the FINISHED run that did the point
UNAVAILABLE_PREFIX = "unavailable."  # unavailable.<num> = "<run name>: needs ..."
FAILED_JOB_PREFIX = "failed_job."  # failed_job.<num> = why that point failed
NO_RUN_JOB_PREFIX = "no_run_job."  # no_run_job.<num> = true: that point failed before opening a run

# who runs it: a RUNNING run whose process is gone is closed (src/run/owner.py)
OWNER_HOST, OWNER_PID, OWNER_STARTED = "owner.host", "owner.pid", "owner.started"
IDEMPOTENCY_KEY = "gpubench.key"  # one per job, set when its run is created (src/tracking/spool.py)

# imported published results (src/import_results.py)
IMPORT_KEY = "import_key"
PUBLISHED_SYSTEM, PUBLISHED_TASK = "published_system", "published_task"
PUBLISHED_PRECISION, PUBLISHED_FILE = "published_precision", "published_file"

# compare
ANOMALY = "anomaly"  # on a run behind a flagged figure: what was flagged
REPORT = "report"  # "true" on compare's report run
BASELINE, ANOMALIES, ANOMALY_KINDS = "baseline", "anomalies", "anomaly_kinds"
