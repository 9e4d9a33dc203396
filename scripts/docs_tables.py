"""The tables in docs/ that restate conf/ (per-GPU batch sizes, GPU spec sheets), generated from it.

`python scripts/docs_tables.py` rewrites each block between `<!-- conf:NAME -->` and
`<!-- /conf:NAME -->` in the docs; `--check` only says which are stale (exit 1), as the test does.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
DOCS = [ROOT / "docs" / "models-and-hardware.md"]
CUDA_PROFILES = ("a6000", "rtx3090", "a100", "h100", "h200")  # in the order the docs list them
MODEL_ORDER = (
    "resnet50",
    "ssd300",
    "maskrcnn",
    "vit_b16",
    "txl_base",
    "txl_large",
    "bert_large",
    "gpt2",
    "llama",
)
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
PEAK_KEYS = ("fp32", "tf32", "fp16", "bf16")
BLOCK = re.compile(r"(<!-- conf:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /conf:(?P=name) -->)", re.S)


def _load(group: str, name: str) -> dict:
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text())


def _number(value: float) -> str:
    return f"{value:,}" if value % 1 else f"{int(value):,}"  # as written in conf: 4,437.5, 2,750


def _batches(table: dict) -> str:
    """fp32/tf32 - amp/bf16 as `128 - 256` where each pair agrees, else all four."""
    sizes = [table[p] for p in PRECISIONS]
    if sizes[0] == sizes[1] and sizes[2] == sizes[3]:
        return f"{sizes[0]} - {sizes[2]}"
    return " / ".join(str(s) for s in sizes)


def batch_table() -> str:
    # the models table's order; a model missing here is an error, not a silently short table
    # model=ceilings measures the card and trains nothing: it has no batch
    found = [p.stem for p in (CONF / "model").glob("*.yaml") if p.stem != "ceilings"]
    models = sorted(found, key=lambda m: MODEL_ORDER.index(m))
    profiles = {name: _load("gpu", name).get("batch_sizes", {}) for name in CUDA_PROFILES}
    lines = [
        "| model | default (24 GB) | " + " | ".join(CUDA_PROFILES) + " |",
        "|---" * (len(CUDA_PROFILES) + 2) + "|",
    ]
    for model in models:
        default = _load("model", model)["batch_sizes"]
        cells = [_batches({**default, **profiles[p].get(model, {})}) for p in CUDA_PROFILES]
        lines.append(f"| `{model}` | {_batches(default)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def cards() -> list[str]:
    """Every card profile (a `match` rule): the study's and the H200 first, then the rest by name."""
    found = sorted(p.stem for p in (CONF / "gpu").glob("*.yaml") if _load("gpu", p.stem).get("match"))
    return [*CUDA_PROFILES, *(name for name in found if name not in CUDA_PROFILES)]


def spec_table() -> str:
    lines = [
        "| profile | NVML name contains | memory | peak TFLOP/s fp32 / tf32 / fp16 / bf16 (dense) | bandwidth "
        "| TDP | SMs x boost | L2 | host / GPU link | price |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in cards():
        gpu = _load("gpu", name)
        matched = " or ".join(f"`{m}`" for m in gpu["match"])
        if gpu.get("exclude"):
            matched += " (not " + ", ".join(f"`{e}`" for e in gpu["exclude"]) + ")"
        peaks = " / ".join(_number(gpu["peak_tflops"][k]) if k in gpu["peak_tflops"] else "-" for k in PEAK_KEYS)
        price = "none published" if gpu.get("price_usd") is None else f"{_number(gpu['price_usd'])} USD"
        lines.append(
            f"| `{name}` | {matched} | {_number(gpu['memory_gb'])} GB | {peaks} | "
            f"{_number(gpu['memory_bandwidth_gbs'])} GB/s | {_number(gpu['tdp_w'])} W | "
            f"{gpu['sm_count']} x {_number(gpu['boost_clock_mhz'])} MHz | {_number(gpu['l2_cache_mb'])} MB | "
            f"{_number(gpu['host_link_gbs'])} / {_number(gpu['gpu_link_gbs'])} GB/s | {price} |"
        )
    return "\n".join(lines) + "\n"


TABLES = {"batch-sizes": batch_table, "gpu-specs": spec_table}


def render(text: str) -> str:
    """The document with every conf block regenerated."""
    return BLOCK.sub(lambda m: m.group(1) + TABLES[m.group("name")]() + m.group(4), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say which docs are stale; write nothing")
    args = parser.parse_args()
    stale = []
    for doc in DOCS:
        text = doc.read_text()
        fresh = render(text)
        if fresh != text:
            stale.append(doc)
            if not args.check:
                doc.write_text(fresh)
    for doc in stale:
        print(f"{doc.relative_to(ROOT)}: {'stale' if args.check else 'regenerated'} from conf/")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
