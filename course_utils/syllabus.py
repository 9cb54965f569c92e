"""What each chapter teaches, point by point, in course order.

Every point is opened in its notebook by a markdown cell tagged ``point:<ID>``; a test checks
that each chapter whose notebook exists covers all of its points. Points marked ``practised``
have at least one auto-checked exercise.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    id: str
    summary: str
    practised: bool = False


@dataclass(frozen=True)
class Chapter:
    notebook: str  # file stem in solutions/ and notebooks/
    title: str
    points: tuple[Point, ...]


def _p(id: str, summary: str, practised: bool = False) -> Point:
    return Point(id, summary, practised)


CHAPTERS: tuple[Chapter, ...] = (
    Chapter("00_environment", "Environment", (
        _p("E1", "pip or conda, never both in one environment; spotting a package installed twice"),
        _p("E2", "the build decides the device: a CPU-only build silently ignores the GPU"),
        _p("E3", "NVIDIA driver vs CUDA runtime: the driver's CUDA version must be at least torch's"),
        _p("E4", "one virtual environment per project; ask the kernel which one it runs in", True),
        _p("E5", "pin what works: pip freeze, conda env export, the course's own pins"),
        _p("E6", "a health check that computes, differentiates and round-trips every device", True),
        _p("E7", "the seed check: same seed, same numbers; another seed, other numbers", True),
        _p("E8", "conda today: conda-forge, since PyTorch's own channel stopped after 2.5"),
    )),
    Chapter("01_tensors", "Tensors", (
        _p("T1", "shape, dtype, device: print them first", True),
        _p("T2", "making tensors: lists, NumPy, factories"),
        _p("T3", "from_numpy / as_tensor share memory, torch.tensor copies", True),
        _p("T4", "dtypes: precision, bytes per element, silent promotion and truncation"),
        _p("T5", "transposes are non-contiguous views: view fails, contiguous or reshape", True),
        _p("T9", "indexing, slicing and masks: basic indexing views, advanced indexing copies", True),
        _p("T6", "unsqueeze, squeeze (only size-1 dims), flatten", True),
        _p("T7", "broadcasting rules and the (N,) vs (N, 1) → (N, N) bug", True),
        _p("T10", "matrix products and reductions with dim, keepdim and argmax", True),
        _p("T8", "assert shapes before a key operation", True),
        _p("T11", "cat vs stack, expand vs repeat, .item() and .numpy()'s real errors"),
    )),
    Chapter("02_autograd", "Autograd", (
        _p("A1", "the graph is recorded as operations run; leaves, grad_fn", True),
        _p("A2", "gradients accumulate until cleared", True),
        _p("A3", "no_grad and inference_mode: no graph, less memory; time measured against the noise"),
        _p("A4", "the graph is freed by backward; retain_graph and its cost"),
        _p("A5", "in-place operations: the version counter, leaves refused", True),
        _p("A6", "detach() vs .data"),
        _p("A7", "non-scalar outputs: backward(gradient=...), autograd.grad; freezing parameters", True),
    )),
    Chapter("03_models", "Models", (
        _p("M1", "nn.Sequential vs an nn.Module subclass with branches", True),
        _p("M2", "registered layers; a plain list is invisible, nn.ModuleList is not", True),
        _p("M3", "attribute names are state_dict keys"),
        _p("M4", "data-dependent control flow in forward; tracing silently freezes the branch"),
        _p("M5", "CrossEntropyLoss takes logits; softmax before it is a silent bug", True),
        _p("M9", "losses for other tasks: BCEWithLogitsLoss, MSE; the target dtype and shape each expects", True),
        _p("M6", "optimizers: SGD, momentum (a decaying sum of gradients), Adam/AdamW"),
        _p("M7", "the learning rate: sweeps; schedulers stepped per epoch, per batch or on a metric"),
        _p("M8", "weight decay on weights only: parameter groups", True),
        _p("M10", "initialisation: the default, nn.init, and the scale of signals through depth (measured)"),
    )),
    Chapter("04_training_loop", "Training loop", (
        _p("L1", "the six steps, in order", True),
        _p("L2", "where to clear gradients, and where it really goes wrong"),
        _p("L3", "Dataset and DataLoader; num_workers measured; start methods and notebook classes"),
        _p("L4", "eval() and no_grad for validation, train() after", True),
        _p("L5", "live loss curves, overfitting, early stopping", True),
        _p("L6", "a held-out test set: choices made on the validation set make its score "
                 "optimistic; statistics from the training split only"),
        _p("L7", "variable-length examples: a collate_fn that pads, and the mask or lengths with it"),
        _p("L8", "CPU threads: get_num_threads/set_num_threads, and workers on one thread each (measured)"),
    )),
    Chapter("05_speed_and_memory", "Speed and memory", (
        _p("P1", "mixed precision: autocast, GradScaler for float16, bfloat16"),
        _p("P2", "measure time and peak memory, do not quote"),
        _p("P3", "float16 overflow, keeping a region in float32"),
        _p("P4", "where memory goes: parameters, gradients, optimizer state, activations", True),
        _p("P5", "gradient accumulation that matches one big batch", True),
        _p("P6", "freeing memory; evaluation without no_grad"),
        _p("P7", "is the loader the bottleneck?", True),
        _p("P8", "loader fixes, each measured"),
        _p("P9", "torch.compile: compile time vs step time (measured), a graph break, when not to bother"),
        _p("P10", "activation checkpointing: memory saved vs time paid (measured)"),
        _p("P11", "a float16 GradScaler with clipping: unscale_ before clip_grad_norm_; a skipped step", True),
        _p("P12", "TF32 and matmul precision: set_float32_matmul_precision, allow_tf32, the change "
                  "of results; cudnn.benchmark for fixed shapes"),
        _p("P13", "profiling: torch.profiler tables, record_function, and hidden CPU-GPU syncs"),
        _p("P14", "out of memory: read the message's numbers, memory_summary, a memory snapshot, "
                  "expandable_segments for fragmentation"),
    )),
    Chapter("06_debugging", "Debugging", (
        _p("D1", "read a traceback from the bottom"),
        _p("D2", "shape errors: trace shapes layer by layer", True),
        _p("D3", "device errors: one device, map_location, device= inside forward", True),
        _p("D4", "module.to keeps Parameters; optimizer state is what moves wrong"),
        _p("D5", "NaN and inf: find the first non-finite value", True),
        _p("D6", "gradient norms and clipping", True),
        _p("D7", "vanishing gradients: per-layer norms, initialisation, residuals, normalisation"),
        _p("D8", "reproducibility: seeds, loader generator, workers, deterministic algorithms", True),
        _p("D9", "GPU errors are asynchronous: CUDA_LAUNCH_BLOCKING and a device-side assert"),
        _p("D10", "the default device and dtype, and the traps of setting them"),
        _p("D11", "the limits of reproducibility: bit for bit only on the same hardware, software "
                  "and versions; other kernels give other sums"),
        _p("D12", "a forward hook written by the learner: register_forward_hook, and removing it",
           True),
    )),
    Chapter("07_reliable_practice", "Reliable practice", (
        _p("S1", "save the state_dict; load with weights_only=True", True),
        _p("S2", "checkpoints that resume exactly", True),
        _p("S3", "strict loading: missing and unexpected keys", True),
        _p("S4", "a per-epoch log to a file and a plot"),
        _p("S5", "code outside notebooks: modules and a config"),
        _p("S6", "the smallest reproducing example"),
        _p("S7", "after loading: eval() and inference_mode; a bug report with collect_env"),
        _p("S8", "state dicts from elsewhere: a compiled model's _orig_mod. prefix, assign=True "
                 "after meta initialisation, a warm start with strict=False and its returned keys"),
    )),
)


def chapter(notebook: str) -> Chapter:
    for candidate in CHAPTERS:
        if candidate.notebook == notebook:
            return candidate
    raise KeyError(f"no chapter has the notebook {notebook!r}")
