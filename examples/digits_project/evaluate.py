"""Evaluation: the loss and accuracy of a model on a loader; also runnable on saved weights.

    python -m examples.digits_project.evaluate --config CONFIG --weights OUT/model.pt
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from course_utils.env import pick_device

from .data import make_loaders
from .model import build_model


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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the JSON config the model was trained with")
    parser.add_argument("--weights", required=True, help="a state_dict saved by train.py (model.pt)")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as file:
        config = json.load(file)
    device = pick_device()
    model = build_model(config).to(device)
    model.load_state_dict(torch.load(args.weights, map_location=device, weights_only=True))
    _, val_loader = make_loaders(config)
    metrics = evaluate(model, val_loader, device)
    print(json.dumps(metrics))
    return metrics


if __name__ == "__main__":
    main()
