"""Print the figures chapter 05 measures, for one machine: mixed precision and matmul throughput.

    .venv/bin/python tools/gpu_figures.py                # on the course device (CUDA, MPS or CPU)
    .venv/bin/python tools/gpu_figures.py --json out.json
    .venv/bin/python tools/gpu_figures.py --quick        # small sizes: a smoke run on any CPU

Two tables, both measured here:

1. **Mixed precision**: one training step of the chapter's MLP (three linear layers, SGD) in
   float32, float16 (with a GradScaler) and bfloat16, where the device supports each: median
   time per step (``course_utils.bench.time_it``: timed until the measurements agree, or
   marked noisy) and the peak memory of the step (the allocator's
   statistic on CUDA, the profiler's allocation events on the CPU).
2. **Matrix-multiply throughput**: TFLOP/s of square products of growing size; the best is this
   device's *measured* peak for that dtype, and the chapter's own layer-sized product
   (batch × width × width) is reported as a share of it.

It is a benchmark, not a test: the numbers belong in notes about a machine, never in the course
text. Needs only torch and course_utils (no Jupyter), so it runs on a bare GPU machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, installed or not

from course_utils.bench import format_bytes, peak_memory, time_it  # noqa: E402
from course_utils.env import pick_device  # noqa: E402


def precisions(device: torch.device) -> dict[str, tuple[torch.dtype | None, bool]]:
    """name → (autocast dtype or None for float32, whether a GradScaler is needed)."""
    found = {"float32": (None, False)}
    if device.type in ("cuda", "cpu", "mps"):
        found["float16 + GradScaler"] = (torch.float16, True)
    bf16 = device.type == "cpu" or (device.type == "cuda" and torch.cuda.is_bf16_supported())
    if bf16:
        found["bfloat16"] = (torch.bfloat16, False)
    return found


def train_step(model, optimizer, x, y, dtype, scaler):
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()


def mixed_precision_rows(device, width, batch, min_run_time):
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    rows = []
    for name, (dtype, needs_scaler) in precisions(device).items():
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
        ).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler(device.type) if needs_scaler else None
        try:
            train_step(model, optimizer, x, y, dtype, scaler)  # warm-up, and: is it supported here?
        except (RuntimeError, ValueError) as error:
            rows.append({"precision": name, "error": f"{type(error).__name__}: {str(error).splitlines()[0]}"})
            continue
        timing = time_it(lambda: train_step(model, optimizer, x, y, dtype, scaler), min_run_time=min_run_time)
        peak = peak_memory(lambda: train_step(model, optimizer, x, y, dtype, scaler), device=device)
        rows.append({
            "precision": name,
            "median_s": timing.median,
            "iqr_s": timing.iqr,
            "steady": timing.steady,
            "peak_bytes": peak.bytes,
            "peak_method": peak.method,
        })
    return rows


def matmul_rows(device, sizes, layer_shape, min_run_time):
    dtypes = [torch.float32, torch.bfloat16] if device.type == "cpu" else [torch.float32, torch.float16, torch.bfloat16]
    rows = []
    for dtype in dtypes:
        best = 0.0
        for n in sizes:
            try:
                a = torch.randn(n, n, device=device, dtype=dtype)
                b = torch.randn(n, n, device=device, dtype=dtype)
                seconds = time_it(lambda: a @ b, min_run_time=min_run_time).median
            except (RuntimeError, TypeError) as error:  # a dtype this device lacks
                rows.append({"dtype": str(dtype), "n": n, "error": str(error).splitlines()[0]})
                break
            tflops = 2 * n**3 / seconds / 1e12
            best = max(best, tflops)
            rows.append({"dtype": str(dtype), "n": n, "tflops": tflops})
        if best == 0.0:
            continue
        m, k = layer_shape
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, k, device=device, dtype=dtype)
        seconds = time_it(lambda: a @ b, min_run_time=min_run_time).median
        tflops = 2 * m * k * k / seconds / 1e12
        rows.append({"dtype": str(dtype), "n": f"course layer {m}x{k}x{k}", "tflops": tflops,
                     "share_of_measured_peak": tflops / best})
    return rows


def peak_text(n) -> str:
    return f"{format_bytes(n):>9}" if n is not None else "  not measurable"


def describe_device(device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    return f"{device.type}, {torch.get_num_threads()} threads"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and short timings (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    device = pick_device()
    big = device.type == "cuda" and not args.quick
    width, batch = (4096, 512) if big else (256 if args.quick else 512, 64 if args.quick else 256)
    sizes = [2048, 4096, 8192] if big else ([128, 256] if args.quick else [512, 1024, 2048])
    min_run_time = 0.05 if args.quick else 0.5

    print(f"torch {torch.__version__} on {describe_device(device)}")
    print(f"\nMixed precision: one training step of a {width}-wide MLP, batch {batch}")
    amp = mixed_precision_rows(device, width, batch, min_run_time)
    base = next((r for r in amp if "median_s" in r), None)
    for row in amp:
        if "error" in row:
            print(f"  {row['precision']:22} not supported here: {row['error']}")
            continue
        ratio = row["median_s"] / base["median_s"]
        print(f"  {row['precision']:22} {row['median_s'] * 1e3:9.3f} ms/step ({ratio:4.2f}× float32)"
              f"   peak {peak_text(row['peak_bytes'])} ({row['peak_method']})"
              + ("" if row["steady"] else "   NOISY: spread above 10 %, do not quote"))

    print("\nMatrix-multiply throughput (square n×n products; the best is the measured peak)")
    mm = matmul_rows(device, sizes, (batch, width), min_run_time)
    for row in mm:
        if "error" in row:
            print(f"  {row['dtype']:15} n={row['n']}: {row['error']}")
        elif "share_of_measured_peak" in row:
            print(f"  {row['dtype']:15} {row['n']}: {row['tflops']:8.2f} TFLOP/s = "
                  f"{row['share_of_measured_peak']:.0%} of the measured peak")
        else:
            print(f"  {row['dtype']:15} n={row['n']:<6} {row['tflops']:8.2f} TFLOP/s")

    if args.json:
        args.json.write_text(json.dumps({
            "torch": torch.__version__, "device": describe_device(device),
            "mixed_precision": amp, "matmul": mm,
        }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
