"""The digits classifier of chapter 07, laid out as a small project instead of notebook cells.

    data.py      where the examples come from, and how they are batched
    model.py     the network, built from the config
    train.py     the training run: config in, log + checkpoints out (the entry point)
    evaluate.py  load saved weights and measure them on the validation set
    config.json  every hyper-parameter, so a new run changes a file, not the code
    (this file)  load_config(): reads a config and says what is wrong with it, if anything

The project ships inside the course's package, in ``course_utils/files/examples/`` (so a learner
on Colab has it too); call that folder FILES. Run the scripts as files, from any folder (the
paths are relative to where you are):

    python FILES/examples/digits_project/train.py --config FILES/examples/digits_project/config.json --out runs/first
    python FILES/examples/digits_project/train.py --out runs/first --resume     # after a stop
    python FILES/examples/digits_project/evaluate.py --config runs/first/config.json --weights runs/first/model.pt

or as modules, with FILES on PYTHONPATH (or as the current folder):

    PYTHONPATH=FILES python -m examples.digits_project.train --config FILES/examples/digits_project/config.json --out runs/first
    PYTHONPATH=FILES python -m examples.digits_project.evaluate --config runs/first/config.json --weights runs/first/model.pt
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

# Every setting a config must have: (its type, the rule its value follows, that rule in words).
# A setting missing, misspelt or out of range stops the run before it starts, with the file and
# the setting named, instead of a KeyError half-way or a typo that is silently ignored.
SETTINGS = {
    "seed": (int, lambda v: v >= 0, "an integer >= 0"),
    "val_fraction": (float, lambda v: 0 < v < 1, "a number between 0 and 1"),
    "batch_size": (int, lambda v: v >= 1, "an integer >= 1"),
    "epochs": (int, lambda v: v >= 1, "an integer >= 1"),
    "hidden": (int, lambda v: v >= 1, "an integer >= 1"),
    "dropout": (float, lambda v: 0 <= v < 1, "a number from 0 up to (not including) 1"),
    "lr": (float, lambda v: v > 0, "a number > 0"),
    "weight_decay": (float, lambda v: v >= 0, "a number >= 0"),
    "lr_gamma": (float, lambda v: v > 0, "a number > 0"),
    "mixed_precision": (bool, lambda v: True, "true or false"),
}


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the problem, on one line."""


def load_config(path) -> dict:
    """The settings in the JSON file ``path``, checked against ``SETTINGS``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the config {path}: {getattr(error, 'strerror', None) or error}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"the config {path} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"the config {path} must be a JSON object ({{\"seed\": 0, ...}}), not {type(config).__name__}")
    unknown = sorted(set(config) - set(SETTINGS))
    if unknown:
        raise ConfigError(
            f"the config {path} has unknown settings {', '.join(map(repr, unknown))} "
            f"(the settings are {', '.join(SETTINGS)})"
        )
    missing = [name for name in SETTINGS if name not in config]
    if missing:
        raise ConfigError(f"the config {path} lacks {', '.join(map(repr, missing))}")
    for name, (kind, rule, words) in SETTINGS.items():
        value = config[name]
        # JSON's true/false are Python bools, which are also ints: only "mixed_precision" takes them.
        fits = isinstance(value, bool) if kind is bool else (
            isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        )
        if not fits or not rule(value):
            raise ConfigError(f"the config {path}: {name!r} must be {words}, not {json.dumps(value)}")
    return config


# --- what the two scripts share on the command line ----------------------------------------


def command(module: str, as_file: bool) -> str:
    """How to start the running script again from the same folder, for --help: the path as it
    was typed when it runs as a file, ``python -m module`` when it runs as a module."""
    return f"python {shlex.quote(sys.argv[0])}" if as_file else f"python -m {module}"


def shown(path) -> str:
    """``path`` as the user can type it from the current folder: relative when that is shorter."""
    path = Path(path).resolve()
    try:
        relative = os.path.relpath(path)
    except ValueError:  # Windows: another drive
        return str(path)
    return relative if not relative.startswith("..") else str(path)


def one_line(error: BaseException) -> str:
    """An exception's message on one line (load_state_dict's runs over several), kept short."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."
