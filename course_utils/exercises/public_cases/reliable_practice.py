"""Chapter 07's public cases (see ``course_utils.exercises.public``).

Inputs only: small models, an optimizer, a scheduler, a scaler and a loader built from seeds
other than the practice probes' ones, and state dicts of literal names; the facts a right
answer gives on them come from the reference, at release time. The file exercises get a path
in a folder made for that one call (its name differs every time, so its repr names the file
only) and removed afterwards: their facts are what the file holds, never where it was. The
checkpoint that ``resume`` reads is written by the course's own ``save_checkpoint``, from
another run's parts, before the learner's code runs.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import uuid
import warnings

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_utils.checkpoints import calls_watched, save_checkpoint
from course_utils.exercises.core import Mistake
from course_utils.exercises.public import PublicCase, PublicCases, describe, seeded_module


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class _NewFile(str):
    """The path of a file in a temporary folder that does not exist yet: the use makes the
    folder for one call and removes it afterwards. A new folder name every time, so the repr,
    which the records use, names the file only."""

    def __new__(cls, name: str):
        folder = os.path.join(tempfile.gettempdir(), f"course-public-case-{uuid.uuid4().hex}")
        return super().__new__(cls, os.path.join(folder, name))

    def __repr__(self):
        return f"'<a new temporary folder>/{os.path.basename(self)}'"


class _Folder:
    """Makes the folder of a ``_NewFile`` and removes it, with all it holds, afterwards."""

    def __init__(self, path: str):
        self.path = os.path.dirname(path)

    def __enter__(self):
        os.makedirs(self.path)
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)


# ============================================================================================
# save_weights
# ============================================================================================
def _weights_inputs():
    model = seeded_module(lambda: nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2)), 501)
    with torch.no_grad():  # running statistics off their defaults, as after training
        model[1].running_mean.copy_(torch.linspace(-1.0, 1.0, 5))
        model[1].running_var.copy_(torch.linspace(0.5, 2.5, 5))
        model[1].num_batches_tracked.fill_(9)
    return model, _NewFile("weights.pt")


def _refusal(error: BaseException) -> str:
    """What torch.load said, shortly: the sentence that names what it refused, else its first line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()
    found = re.search(r"(Unsupported global: GLOBAL \S+ was not an allowed global by default\.)", text)
    said = found.group(1) if found else (text.splitlines()[0] if text else "")
    return f"torch.load(path, weights_only=True) raised {type(error).__name__}: {said}"


def _read_back(path: str):
    """What ``torch.load(path, weights_only=True)`` gives: a dict with its keys in sorted order
    (an OrderedDict, as state_dict() is, counts as a dict), or the refusal, said."""
    if not os.path.isfile(path):
        return "no file at the path"
    try:
        with warnings.catch_warnings():  # torch's own remarks on a file the learner wrote
            warnings.simplefilter("ignore")
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # what weights_only=True refuses is the lesson
        return _refusal(error)
    if isinstance(loaded, dict):
        return {key: loaded[key] for key in sorted(loaded, key=str)}
    return loaded


_FILE = "what_torch.load_reads_from_the_file_(names_and_tensors_only)"


def _saved(answer, arguments, run, on):
    """The files in the folder afterwards, what a weights-only load reads from the file, and
    the model afterwards: saving must only read it."""
    model, path = arguments
    with _Folder(path) as folder:
        run(answer, model, path, on=on)
        return {
            "the_files_in_the_folder_afterwards": describe(sorted(os.listdir(folder))),
            _FILE: describe(_read_back(path)),
            "the_model_after_the_call": describe(model),
        }


save_weights = PublicCases(
    use=_saved,
    rtol=0, atol=0,
    cases=[PublicCase("a Sequential(Linear(4, 5), BatchNorm1d(5), ReLU, Linear(5, 2)) in train mode "
                      "and a path in an empty folder", _weights_inputs)],
)


# ============================================================================================
# resume
# ============================================================================================
class _Cosine(torch.optim.lr_scheduler.CosineAnnealingLR):
    """A CosineAnnealingLR whose repr says how it was made (an address differs on every run)."""

    def __repr__(self):
        return f"CosineAnnealingLR(optimizer, T_max={self.T_max})"


class _Scaler(torch.amp.GradScaler):
    def __repr__(self):
        return f"torch.amp.GradScaler('cpu', init_scale=1024.0, growth_interval={self._growth_interval})"


class _Loader(DataLoader):
    def __repr__(self):
        return ("DataLoader(a data set of 12 examples, batch_size=4, shuffle=True, "
                "generator=torch.Generator().manual_seed(5))")


def _parts(seed: int):
    """A run's model, optimizer, scheduler, scaler and loader (with a generator of its own);
    the model's weights drawn from ``seed``, everything else the same for every run."""
    model = seeded_module(lambda: nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)), seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    scheduler = _Cosine(optimizer, T_max=8)
    scaler = _Scaler("cpu", init_scale=1024.0, growth_interval=3)
    generator = _generator(511)
    data = TensorDataset(torch.randn(12, 4, generator=generator), torch.arange(12))
    loader = _Loader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(5))
    return model, optimizer, scheduler, scaler, loader


_SAVED_EPOCH = 4


def _resume_inputs():
    return (_NewFile("checkpoint.pt"), *_parts(512))


def _write_checkpoint(path: str) -> None:
    """Another run's parts, moved on as training moves them (two Adam steps with the
    scheduler, a scale that shrank, an epoch of the loader), saved after epoch 4."""
    model, optimizer, scheduler, scaler, loader = _parts(513)
    generator = _generator(514)
    for _ in range(2):
        for parameter in model.parameters():
            parameter.grad = torch.randn(parameter.shape, generator=generator)
        optimizer.step()
        scheduler.step()
    scaler.load_state_dict({"scale": 128.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                            "growth_interval": 3, "_growth_tracker": 2})
    for _ in loader:  # the loader's own generator moves on, as after an epoch
        pass
    torch.manual_seed(515)
    random.seed(515)
    np.random.seed(515)
    save_checkpoint(path, _SAVED_EPOCH, model, optimizer, scheduler, scaler, loader)


def _adam_state(optimizer, parameters) -> list:
    states = [optimizer.state.get(p, {}) for p in parameters]
    return [{key: state[key] for key in ("step", "exp_avg", "exp_avg_sq") if key in state}
            for state in states]


_UNSAFE = "whether_a_torch.load_call_allowed_any_class_(weights-only_switched_off)"
_WORKED_ANSWER = "whether your function called course_utils.checkpoints.load_checkpoint"

# resume's rule, which its task states: the loading is written by hand. Both of its checks refuse
# an answer that calls the course's worked answer, however it reaches it (an alias, the module),
# with these words: the practice judge (reliable_practice/resume.py, an exam's hidden cases)
# and the public cases below (an exam's own check).
CALLS_LOAD_CHECKPOINT = Mistake("calls-load-checkpoint", (
    "Refused: your resume calls course_utils.checkpoints.load_checkpoint, the course's worked "
    "answer to this very exercise, so it shows nothing of what you can write. The task asks you "
    "to write the loading yourself: torch.load with weights_only=True, each part's state, the "
    "random generators (restore_rng_state is yours to use), and the epoch to continue from."
))


def calls_the_worked_answer(record: list) -> Mistake | None:
    """The public record's verdict on resume's rule: ``CALLS_LOAD_CHECKPOINT`` when a case saw
    the call."""
    if any(case["facts"].get(_WORKED_ANSWER, {}).get("value") for case in record):
        return CALLS_LOAD_CHECKPOINT
    return None


def _resumed(answer, arguments, run, on):
    """The epoch it returned (an int), whether it loaded with weights_only=False, and what the
    freshly built parts hold afterwards: the weights, Adam's state, the learning rate and the
    schedule, the scale, and the next numbers of every random stream, the loader's included."""
    path, model, optimizer, scheduler, scaler, loader = arguments
    parameters = list(model.parameters())
    with _Folder(path):
        _write_checkpoint(path)
        torch.manual_seed(4321)  # a new process: the streams start elsewhere
        random.seed(4321)
        np.random.seed(4321)
        weights_only = []
        real_load = torch.load

        def recording_load(*args, **kwargs):
            weights_only.append(kwargs.get("weights_only"))
            return real_load(*args, **kwargs)

        torch.load = recording_load
        try:
            with calls_watched() as library_calls:
                start = run(answer, path, model, optimizer, scheduler, scaler, loader, on=on)
        finally:
            torch.load = real_load
    if isinstance(start, np.integer):
        start = int(start)
    return {
        _WORKED_ANSWER: describe("load_checkpoint" in library_calls),
        "returned": describe(start),
        _UNSAFE: describe(any(value is False for value in weights_only)),
        "the_model_after_resume": describe(model),
        "Adam's_state_for_each_parameter_after_resume": describe(_adam_state(optimizer, parameters)),
        "the_optimizer's_learning_rate_after_resume": describe(float(optimizer.param_groups[0]["lr"])),
        "the_scheduler's_last_epoch_after_resume": describe(int(scheduler.last_epoch)),
        "the_scheduler's_last_learning_rates_after_resume": describe(
            [float(lr) for lr in scheduler.get_last_lr()]),
        "the_scaler's_scale_after_resume": describe(float(scaler.get_scale())),
        "the_next_numbers_of_torch's_global_generator": describe(torch.rand(3)),
        "the_next_numbers_of_Python's_and_NumPy's_global_streams": describe(
            [random.random(), float(np.random.random())]),
        "the_labels_in_the_order_the_loader_gives_them_next": describe(
            [int(label) for _, labels in loader for label in labels]),
    }


resume = PublicCases(
    use=_resumed,
    cases=[PublicCase("a checkpoint saved by save_checkpoint after epoch 4 of another run, and "
                      "freshly built parts: Adam(lr=0.02), CosineAnnealingLR(T_max=8), a CPU "
                      "GradScaler and a DataLoader with its own generator", _resume_inputs)],
    refuses=calls_the_worked_answer,
    lets_through={"torch.load without weights_only": (
        "the public case records a torch.load that switches weights_only off, not one that leaves "
        "it unsaid (the default is True in the PyTorch the course pins); the hidden case asks for "
        "it said")},
)


# ============================================================================================
# remap_keys
# ============================================================================================
def _state(shapes: dict, seed: int) -> dict:
    generator = _generator(seed)
    return {key: torch.randn(shape, generator=generator) for key, shape in shapes.items()}


def _remap_inputs(shapes, renames, seed):
    return lambda: (_state(shapes, seed), dict(renames))


def _remapped(answer, arguments, run, on):
    """The dict it returned, its keys sorted (the order does not matter to load_state_dict;
    an OrderedDict counts as a dict), whether each value is the given tensor itself rather
    than a copy, and the two dicts it was given, afterwards."""
    state_dict, renames = arguments
    given = list(state_dict.values())
    returned = run(answer, state_dict, renames, on=on)
    facts = {}
    if isinstance(returned, dict):
        items = sorted(returned.items(), key=lambda item: str(item[0]))
        facts["returned"] = describe(dict(items))
        facts["whether_each_value_is_a_given_tensor_itself_(not_a_copy)"] = describe(
            [any(_same_tensor(value, tensor) for tensor in given) for _, value in items])
    else:
        facts["returned"] = describe(returned)
    facts["arguments"] = [describe(state_dict), describe(renames)]
    return facts


def _same_tensor(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and a.device == b.device and a.device.type != "meta"
            and a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.dtype == b.dtype)


# Names only a prefix of which is renamed: top-level layers whose nested namesakes keep their
# names; an empty new prefix (what nn.DataParallel puts in front, cut off); renames that chain.
_RENAMED_LAYERS = {"hidden.weight": (4, 3), "hidden.bias": (4,), "block.hidden.weight": (4, 4),
                   "block.hidden.bias": (4,), "block.proj.weight": (2, 4), "proj.weight": (2, 4),
                   "proj.bias": (2,)}
_WRAPPED = {"module.0.weight": (3, 2), "module.0.bias": (3,), "module.2.weight": (1, 3),
            "module.2.bias": (1,)}
_SHIFTED = {"0.weight": (5, 2), "0.bias": (5,), "1.weight": (3, 5), "1.bias": (3,)}

remap_keys = PublicCases(
    use=_remapped,
    rtol=0, atol=0,
    cases=[
        PublicCase("a state_dict whose top-level hidden and proj became encoder and head (its "
                   "block keeps block.hidden and block.proj), renames={'hidden.': 'encoder.', "
                   "'proj.': 'head.'}",
                   _remap_inputs(_RENAMED_LAYERS, {"hidden.": "encoder.", "proj.": "head."}, 521)),
        PublicCase("a state_dict saved from a model wrapped in nn.DataParallel, renames={'module.': ''}",
                   _remap_inputs(_WRAPPED, {"module.": ""}, 522)),
        PublicCase("a Sequential's state_dict, the model having gained a layer at the front, "
                   "renames={'0.': '1.', '1.': '2.'}",
                   _remap_inputs(_SHIFTED, {"0.": "1.", "1.": "2."}, 523)),
    ],
    lets_through={"detaches every tensor": (
        "the public cases compare values and memory, which a .detach() keeps; the hidden cases "
        "compare each tensor's identity with the given one")},
)
