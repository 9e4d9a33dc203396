"""A plain PyTorch training loop, written without any of the suite's code: the yardstick that the
suite's own numbers are checked against (same model, batch and precision).

    python benchmarks/plain_loop.py --model resnet50 --precision amp --batch 256 --channels-last
    python benchmarks/plain_loop.py --model gpt2 --precision bf16 --batch 16

Prints one JSON line: {"model", "precision", "batch", "items_per_s", "unit", "steps"}.
"""

from __future__ import annotations

import argparse
import contextlib
import json

import torch
import torch.nn.functional as F


def build(model_name: str, batch: int, channels_last: bool):
    if model_name == "resnet50":
        from torchvision.models import resnet50

        model = resnet50(weights=None).cuda()
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (batch,), device="cuda")
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, fused=True)
        for p in model.parameters():  # fused SGD leaves lazy buffers unset if GradScaler skips step 1
            opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
        return model, opt, (lambda: F.cross_entropy(model(x), y)), batch, "images/s"
    if model_name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel

        model = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa")).cuda()
        tokens = torch.randint(0, 50257, (batch, 1024), device="cuda")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
        return model, opt, (lambda: model(input_ids=tokens, labels=tokens).loss), batch * 1024, "tokens/s"
    raise SystemExit(f"--model {model_name}: must be resnet50 or gpt2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--precision", default="amp", choices=["fp32", "tf32", "amp", "bf16"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dtype = {"amp": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    model, opt, loss_fn, items, unit = build(args.model, args.batch, args.channels_last)
    if args.compile:
        model.forward = torch.compile(model.forward)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "amp")

    def step():
        with torch.autocast("cuda", dtype=dtype) if dtype else contextlib.nullcontext():
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(args.steps):
        step()
    end.record()
    end.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    print(
        json.dumps(
            {
                "model": args.model,
                "precision": args.precision,
                "batch": args.batch,
                "items_per_s": items * args.steps / seconds,
                "unit": unit,
                "steps": args.steps,
            }
        )
    )


if __name__ == "__main__":
    main()
