"""Training: read a config, train, and write a log and checkpoints to an output folder.

    python FILES/examples/digits_project/train.py --config CONFIG --out FOLDER    (from any folder)
    python FILES/examples/digits_project/train.py --out FOLDER --resume
    python -m examples.digits_project.train --config CONFIG --out FOLDER    (with FILES = course_utils/files on PYTHONPATH)

The output folder receives config.json (the exact settings of this run), log.jsonl (one line
per epoch), checkpoint.pt (everything needed to resume, rewritten atomically after every
epoch) and model.pt (the final weights only). --resume continues from FOLDER/checkpoint.pt with
the run's own FOLDER/config.json, or with a --config that differs from it only in "epochs" (to
train longer). Without --resume, a folder that already holds a run is refused: a second run is
never appended to the first, and nothing is deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

if not __package__:
    # Started as a file (python path/to/train.py): Python put this file's folder on sys.path,
    # and neither `examples` nor `course_utils` is in it. Put FILES (the folder that holds examples/) first, as
    # `python -m examples.digits_project.train` from FILES does, so that the imports below
    # work whatever the current folder.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F

from course_utils.checkpoints import restore_rng_state, save_atomically, save_checkpoint
from course_utils.env import pick_device, seed_everything
from course_utils.run_log import EpochTimer, RunLog
from examples.digits_project import SETTINGS, ConfigError, command, load_config, one_line, shown
from examples.digits_project.data import make_loaders
from examples.digits_project.evaluate import evaluate
from examples.digits_project.model import build_model

NAME = "train.py"  # how messages on stderr start
CHECKPOINT_KEYS = ("epoch", "model", "optimizer", "scheduler", "scaler", "rng")


def train_one_epoch(model, loader, optimizer, scaler, device) -> float:
    model.train()
    total, count = 0.0, 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.type, dtype=torch.float16, enabled=scaler.is_enabled()):
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        total += loss.item() * len(y)
        count += len(y)
    return total / count


def fail(message: str) -> NoReturn:
    """Stop with one line on stderr and exit status 1: a misuse, not a bug, needs no traceback."""
    sys.exit(f"{NAME}: error: {message}")


def note(message: str) -> None:
    print(f"{NAME}: note: {message}", file=sys.stderr, flush=True)


def command_line() -> argparse.ArgumentParser:
    """The command line; its usage and examples show the command as this script was started."""
    run = command("examples.digits_project.train", as_file=not __package__)
    config = shown(Path(__file__).with_name("config.json"))
    parser = argparse.ArgumentParser(
        prog=run,
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            f"examples:\n  {run} --config {config} --out runs/first\n  {run} --out runs/first --resume\n\n"
            + __doc__.split("\n\n")[2]
        ),
    )
    parser.add_argument("--config", help="a JSON file of hyper-parameters (with --resume: OUT/config.json unless given)")
    parser.add_argument("--out", required=True, help="folder for the log and the checkpoints")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    return parser


def main(argv=None) -> Path:
    args = command_line().parse_args(argv)
    out = Path(args.out)
    checkpoint_path, saved_config = out / "checkpoint.pt", out / "config.json"

    # Every misuse is found here, before anything is written.
    if args.resume:
        if not checkpoint_path.is_file():
            fail(f"--resume: no checkpoint at {checkpoint_path}, so there is nothing to resume; "
                 f"leave out --resume to start a run")
        if args.config is None and not saved_config.is_file():
            fail(f"--resume: the run has no {saved_config}; give the config it was started with as --config")
        config_path = Path(args.config) if args.config is not None else saved_config
        config = _config(config_path)
        if config_path != saved_config and saved_config.is_file():
            _same_settings_but_epochs(_config(saved_config), config, config_path, saved_config)
    else:
        if args.config is None:
            fail("--config is required to start a run (only --resume reads the run's own OUT/config.json)")
        config_path = Path(args.config)
        config = _config(config_path)
        held = _run_files(out)
        if held:
            fail(f"--out {out} already holds a run ({', '.join(held)}); add --resume to continue it, "
                 f"or give another or an empty --out folder")
    if out.exists() and not out.is_dir():
        fail(f"--out {out} is a file, not a folder")

    device = pick_device()
    seed_everything(config["seed"])
    try:
        train_loader, val_loader = make_loaders(config)
    except ValueError as error:  # a val_fraction that leaves an empty part
        fail(f"the config {config_path}: {one_line(error)}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        fail(f"cannot make the output folder {out}: {error.strerror or error}")

    start, checkpoint = 0, None
    if args.resume:
        checkpoint = _read_checkpoint(checkpoint_path, device)
        start = checkpoint["epoch"] + 1
        if start >= config["epochs"]:
            _already_done(out, checkpoint, start, config["epochs"])
            return out
    if not saved_config.exists() or not saved_config.samefile(config_path):
        shutil.copyfile(config_path, saved_config)  # on --resume: the config with the new "epochs"

    model = build_model(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config["lr_gamma"])
    # float16 mixed precision on CUDA only, where it pays; the scaler keeps its small gradients
    # from rounding to zero. Disabled, the scaler does nothing and its state_dict() is {}.
    # Chapter 05: the CPU's mixed precision is bfloat16, and on most CPUs it is slower than
    # float32, so the CPU (and MPS, XPU) train in float32 here, and say so.
    mixed_precision = config["mixed_precision"] and device.type == "cuda"
    if config["mixed_precision"] and not mixed_precision:
        note(f'"mixed_precision": true applies on a CUDA GPU only (float16 with a GradScaler); '
             f"this run on {device.type} trains in float32")
    scaler = torch.amp.GradScaler(device.type, enabled=mixed_precision)

    if checkpoint is not None:
        try:
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            scheduler.load_state_dict(checkpoint["scheduler"])
            scaler.load_state_dict(checkpoint["scaler"])
            restore_rng_state(checkpoint["rng"])  # the loader's shuffling draws from these too
        except (RuntimeError, ValueError, KeyError, TypeError) as error:
            fail(f"the checkpoint {checkpoint_path} does not fit the run {config_path} describes: {one_line(error)}")
        _keep_log_rows_before(out / "log.jsonl", start)

    with RunLog(out / "log.jsonl") as log:
        for epoch in range(start, config["epochs"]):
            lr = optimizer.param_groups[0]["lr"]
            with EpochTimer(device) as timer:
                train_loss = train_one_epoch(model, train_loader, optimizer, scaler, device)
                val = evaluate(model, val_loader, device)
            scheduler.step()
            row = log.write(
                epoch=epoch, train_loss=train_loss, val_loss=val["loss"], val_accuracy=val["accuracy"],
                lr=lr, seconds=round(timer.seconds, 4), peak_memory_bytes=timer.peak_memory_bytes,
            )
            print(json.dumps(row), flush=True)
            save_checkpoint(out / "checkpoint.pt", epoch, model, optimizer, scheduler, scaler)
    save_atomically(model.state_dict(), out / "model.pt")
    return out


def _config(path: Path) -> dict:
    try:
        return load_config(path)
    except ConfigError as error:
        fail(str(error))


def _run_files(out: Path) -> list[str]:
    """The files in ``out`` that a run has finished work in (an empty log is a run that never
    finished an epoch, and a config alone is not work: starting afresh there loses nothing)."""
    log = out / "log.jsonl"
    held = ["log.jsonl"] if log.is_file() and log.stat().st_size > 0 else []
    return held + [name for name in ("checkpoint.pt", "model.pt") if (out / name).is_file()]


def _same_settings_but_epochs(saved: dict, config: dict, config_path: Path, saved_path: Path) -> None:
    """A resumed run is the started run continued, so only "epochs" may change (to train longer)."""
    changed = [name for name in SETTINGS if name != "epochs" and saved[name] != config[name]]
    if changed:
        differences = ", ".join(f"{name} ({saved[name]} -> {config[name]})" for name in changed)
        fail(f"--resume: {config_path} differs from the run's {saved_path} in {differences}; a resumed "
             f'run keeps its settings, so change only "epochs", or start a new run in another --out')


def _read_checkpoint(path: Path, device) -> dict:
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # truncated, not a torch file, or holding more than plain data
        fail(f"cannot read the checkpoint {path}: {one_line(error)}")
    if not isinstance(checkpoint, dict) or not all(key in checkpoint for key in CHECKPOINT_KEYS):
        fail(f"{path} is not a checkpoint written by train.py (it has no {', '.join(CHECKPOINT_KEYS)})")
    return checkpoint


def _already_done(out: Path, checkpoint: dict, done: int, epochs: int) -> None:
    """--resume on a run that has its epochs: nothing to train, and the user is told so."""
    model_path = out / "model.pt"
    wrote = ""
    if not model_path.is_file():  # the run stopped between its last checkpoint and model.pt
        save_atomically(checkpoint["model"], model_path)
        wrote = f"; wrote {model_path} from its last checkpoint"
    note(f"{out} has already trained {done} epochs and the config asks for {epochs}: nothing to "
         f'resume{wrote} (to train longer, --resume with a --config whose "epochs" is larger)')


def _keep_log_rows_before(path: Path, start: int) -> None:
    """Before a resumed run appends, keep only whole rows of the epochs its checkpoint holds.

    A run stopped between writing an epoch's row and its checkpoint, or half-way through a row,
    would otherwise leave that epoch twice in the log, or glue the next row onto the cut one.
    """
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip()]
    kept = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("epoch"), int) and row["epoch"] < start:
            kept.append(line)
    cleaned = "".join(line + "\n" for line in kept)
    if cleaned != text:
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(cleaned, encoding="utf-8")
        os.replace(temporary, path)
    if len(kept) < len(lines):
        note(f"{path}: removed {len(lines) - len(kept)} line(s) after epoch {start - 1}, the last one "
             f"its checkpoint holds; those epochs run again")


if __name__ == "__main__":
    main()
