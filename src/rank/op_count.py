"""Counting the ops of one training step: each op's FLOPs and the bytes it reads and writes.

A TorchDispatchMode sees every aten op a step runs (forward, backward, optimizer, gradient
scaling). FLOPs are torch's own formulas (torch.utils.flop_counter); bytes are the sizes of the
tensors an op reads and writes (an in-place op reads and writes its tensor; an op that picks rows,
an embedding, reads what it picks). Views move nothing and are not counted. The step is counted at
two small batches (COUNTED_AT) so that src/projection/counts.py can give the counts at any batch.

On a GPU the step runs as it does in the window. On a CPU (a host without a GPU counting a GPU's
workload) two things keep the count what the GPU runs: `fabricate` skips computing products,
convolutions and attention (their outputs come from their shapes alone, on the meta device), and
`as_on_gpu` puts the fused ops the GPU dispatches (dropout in one kernel, fused attention) in place
of the CPU's compositions of smaller ops.
"""

from __future__ import annotations

import contextlib
import gc

import torch
import torch.nn.functional as F
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from src.projection.counts import MATMUL, OTHER, Counted, OpCounts
from src.rank.step_profiler import category

COUNTED_AT = (2, 4)  # per-GPU batches: small enough for any card's memory, large enough for batch norm
NO_KERNEL = {
    "_local_scalar_dense",
    "_unsafe_view",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "lift_fresh",
    "_record_function_enter_new",
    "_record_function_exit",
    "set_",
    "resize_",
    "is_same_size",
    "_has_compatible_shallow_copy_type",
}
PICKS = {"embedding", "index_select", "gather", "index"}  # read the rows they pick, not the whole table
MATHS = {torch.float16: "fp16", torch.bfloat16: "bf16"}  # any other float: fp32 (tf32 where it is on)


def kind(name: str) -> str:
    """Products, convolutions and attention (the tensor cores' work) or the rest, as the breakdown
    names kernels."""
    return MATMUL if category(name) == "matmul" or "attention" in name else OTHER


def _size(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _is_view(func) -> bool:
    """An op that returns an alias of an input and writes none: a view, no kernel."""
    schema = func._schema
    writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    aliases = bool(schema.returns) and all(r.alias_info is not None for r in schema.returns)
    return aliases and not writes


def op_bytes(func, args: tuple, kwargs: dict, out) -> int:
    """Bytes the op reads (its tensor arguments) and writes (its outputs, and arguments it updates in place)."""
    schema, name = func._schema, func.overloadpacket.__name__
    values = [*args, *(kwargs.get(a.name) for a in schema.arguments[len(args) :])]
    total = 0
    for argument, value in zip(schema.arguments, values, strict=False):
        read = sum(_size(t) for t in tree_flatten(value)[0])
        if name in PICKS and argument.name in ("self", "weight"):
            read = 0  # as many bytes as it writes: counted with the output
        written = argument.alias_info is not None and argument.alias_info.is_write
        total += read * (2 if written else 1)
    if not any(r.alias_info is not None for r in schema.returns):  # a new tensor, not an argument updated
        total += sum(_size(t) for t in tree_flatten(out)[0]) * (2 if name in PICKS else 1)
    return total


def op_flops(func, args: tuple, kwargs: dict, out) -> float:
    formula = flop_counter.flop_registry.get(func.overloadpacket)
    return float(formula(*args, **kwargs, out_val=out)) if formula else 0.0


def _math(args: tuple) -> str:
    floats = [t.dtype for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
    return MATHS.get(floats[0], "fp32") if floats else "fp32"


def _to_meta(x):
    return (
        torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, torch.Tensor)
        else x
    )


def _from_meta(device):
    def zeros(x):
        if not (isinstance(x, torch.Tensor) and x.device.type == "meta"):
            return x
        return torch.zeros(x.shape, dtype=x.dtype, device=device).as_strided(x.shape, x.stride())

    return zeros


class OpCounter(TorchDispatchMode):
    """Records every op a step runs as a `Counted`; with `fabricate`, products, convolutions and
    attention are not computed: zeros of the shape and strides their meta kernels give."""

    def __init__(self, fabricate: bool = False):
        super().__init__()
        self.fabricate = fabricate
        self.ops: list[Counted] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        op_kind = kind(name)
        if self.fabricate and op_kind == MATMUL:
            device = next(t.device for t in tree_flatten(args)[0] if isinstance(t, torch.Tensor))
            out = tree_map(_from_meta(device), func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs)))
        else:
            out = func(*args, **kwargs)
        if name not in NO_KERNEL and not _is_view(func):
            counted = Counted(
                name,
                op_kind,
                _math(args),
                op_flops(func, args, kwargs, out),
                float(op_bytes(func, args, kwargs, out)),
            )
            self.ops.append(counted)
        return out


def _fused_dropout(input, p=0.5, training=True, inplace=False):
    return torch.ops.aten.native_dropout(input, p, True)[0] if training and p > 0 else input


def _fused_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **_):
    """The memory-efficient kernel a GPU runs for attention with a mask (as an additive bias)."""
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype).masked_fill(~attn_mask, float("-inf"))
    if attn_mask is not None:
        attn_mask = attn_mask.expand(*query.shape[:-1], key.shape[-2])
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    efficient = torch.ops.aten._scaled_dot_product_efficient_attention
    return efficient(query, key, value, attn_mask, grad, dropout_p, is_causal, scale=scale)[0]


@contextlib.contextmanager
def as_on_gpu():
    """Dropout and attention as a GPU dispatches them, while a CPU counts a GPU's step."""
    plain = F.dropout, F.scaled_dot_product_attention
    F.dropout, F.scaled_dot_product_attention = _fused_dropout, _fused_attention
    try:
        yield
    finally:
        F.dropout, F.scaled_dot_product_attention = plain


def count_step(step, fabricate: bool) -> list[Counted]:
    """The ops of one call of `step`, after one uncounted call (the optimizer's state is made on its first)."""
    with OpCounter(fabricate):  # counted too, not kept: fabricated products keep it cheap on a CPU
        step()
    counter = OpCounter(fabricate)
    with counter:
        step()
    return counter.ops


def counting_config(cfg: dict) -> dict:
    """The rank's config for counting: eager (a compiled step's fusions are the compiler's) and
    without autotuning (the small batches' shapes are never trained)."""
    return {**cfg, "benchmark": {**cfg["benchmark"], "compile": False, "cudnn_benchmark": False}}


def count_workload(build, device: torch.device) -> OpCounts:
    """The training step `build(batch)` makes (one process, no DDP: communication is measured, not
    counted), counted at COUNTED_AT."""
    cpu = device.type == "cpu"
    found = []
    gc.collect()  # the measured step's model and optimizer, let go of by the caller, before two more are built
    with as_on_gpu() if cpu else contextlib.nullcontext():
        for batch in COUNTED_AT:
            step = build(batch)
            step.optimizer = step.workload.make_optimizer(fused=True)  # as on a GPU, also when a CPU counts
            found.append((batch, count_step(step, fabricate=cpu)))
            del step
            gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    how = (
        f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
        if not cpu
        else f"a CPU for a GPU, torch {torch.__version__}: products, convolutions and attention from their "
        "shapes, dropout and attention as a GPU's fused kernels"
    )
    return OpCounts.fit(*found, counted=how)
