"""Training: read a config, train, and write a log and checkpoints to an output folder.

    python -m examples.digits_project.train --config CONFIG --out FOLDER [--resume]

The output folder receives config.json (the exact settings of this run), log.jsonl (one line
per epoch), checkpoint.pt (everything needed to resume, rewritten atomically after every
epoch) and model.pt (the final weights only). --resume continues from FOLDER/checkpoint.pt.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
import torch.nn.functional as F

from course_utils.checkpoints import restore_rng_state, save_atomically, save_checkpoint
from course_utils.env import pick_device, seed_everything
from course_utils.run_log import EpochTimer, RunLog

from .data import make_loaders
from .evaluate import evaluate
from .model import build_model


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


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="a JSON file of hyper-parameters")
    parser.add_argument("--out", required=True, help="folder for the log and the checkpoints")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as file:
        config = json.load(file)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.resume:
        shutil.copyfile(args.config, out / "config.json")

    device = pick_device()
    seed_everything(config["seed"])
    train_loader, val_loader = make_loaders(config)
    model = build_model(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=config["lr_gamma"])
    # float16 mixed precision on CUDA only, where it pays; the scaler keeps its small gradients
    # from rounding to zero. Disabled, the scaler does nothing and its state_dict() is {}.
    mixed_precision = config["mixed_precision"] and device.type == "cuda"
    scaler = torch.amp.GradScaler(device.type, enabled=mixed_precision)

    start = 0
    if args.resume:
        checkpoint = torch.load(out / "checkpoint.pt", map_location=device, weights_only=True)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        scaler.load_state_dict(checkpoint["scaler"])
        restore_rng_state(checkpoint["rng"])  # the loader's shuffling draws from these too
        start = checkpoint["epoch"] + 1

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


if __name__ == "__main__":
    main()
