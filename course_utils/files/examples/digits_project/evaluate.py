"""Evaluation: the loss and accuracy of a model on a loader; also runnable on saved weights.

    python FILES/examples/digits_project/evaluate.py --config OUT/config.json --weights OUT/model.pt    (from any folder)
    python -m examples.digits_project.evaluate --config OUT/config.json --weights OUT/model.pt    (with FILES = course_utils/files on PYTHONPATH)

It prints {"loss": ..., "accuracy": ...} on the validation set the config describes. --weights
takes the final model.pt, or a checkpoint.pt (its weights are used).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

if not __package__:
    # Started as a file (python path/to/evaluate.py): Python put this file's folder on sys.path,
    # and neither `examples` nor `course_utils` is in it. Put FILES (the folder that holds examples/) first, as
    # `python -m examples.digits_project.evaluate` from FILES does, so that the imports below
    # work whatever the current folder.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F

from course_utils.env import pick_device
from examples.digits_project import ConfigError, command, load_config, one_line
from examples.digits_project.data import make_loaders
from examples.digits_project.model import build_model

NAME = "evaluate.py"  # how messages on stderr start


def evaluate(model, loader, device) -> dict:
    """Mean cross-entropy and accuracy over the loader, in eval mode, without a graph."""
    was_training = model.training
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            total_loss += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(dim=1) == y).sum().item()
            count += len(y)
    model.train(was_training)
    return {"loss": total_loss / count, "accuracy": correct / count}


def fail(message: str) -> NoReturn:
    """Stop with one line on stderr and exit status 1: a misuse, not a bug, needs no traceback."""
    sys.exit(f"{NAME}: error: {message}")


def main(argv=None) -> dict:
    run = command("examples.digits_project.evaluate", as_file=not __package__)
    parser = argparse.ArgumentParser(
        prog=run,
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"example:\n  {run} --config runs/first/config.json --weights runs/first/model.pt\n\n"
        + __doc__.split("\n\n")[2],
    )
    parser.add_argument("--config", required=True, help="the JSON config the model was trained with (OUT/config.json)")
    parser.add_argument("--weights", required=True, help="a state_dict saved by train.py (OUT/model.pt)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as error:
        fail(str(error))
    weights = Path(args.weights)
    if not weights.is_file():
        fail(f"no weights at {weights} (train.py writes OUT/model.pt when its run ends)")
    device = pick_device()
    try:
        state = torch.load(weights, map_location=device, weights_only=True)
    except Exception as error:  # truncated, not a torch file, or holding more than plain data
        fail(f"cannot read the weights {weights}: {one_line(error)}")
    if isinstance(state, dict) and "model" in state and "epoch" in state:
        state = state["model"]  # a checkpoint written by train.py: its weights
    model = build_model(config).to(device)
    try:
        model.load_state_dict(state)
    except (RuntimeError, ValueError, TypeError, AttributeError) as error:
        fail(f"the weights {weights} do not fit the model {args.config} describes: {one_line(error)}")
    try:
        _, val_loader = make_loaders(config)
    except ValueError as error:  # a val_fraction that leaves an empty part
        fail(f"the config {args.config}: {one_line(error)}")
    metrics = evaluate(model, val_loader, device)
    print(json.dumps(metrics))
    return metrics


if __name__ == "__main__":
    main()
