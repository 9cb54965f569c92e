"""Chapter 07, S1: save the state_dict, so that torch.load(weights_only=True) can read it (the
exercise ``save_weights``).

Engine: applies states.snapshot/differences (what the answer leaves on the model: modes,
requires_grad, values, buffers) and the identity of its parameters, on a model with a BatchNorm
buffer of int64 (a 0-d tensor), a second call after training on in eval mode, the model in
float64, and on meta (a stand-in for a GPU: a move of the model itself shows); hand-written
because the answer writes a file whose classic mistakes (the whole object, parameters only,
another dtype, a stale file) are named from what torch.load(weights_only=True) makes of it.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function, Mistake, Raised, later_error
from course_utils.exercises.facts import given, tensor_of
from course_utils.exercises.reliable_practice.common import CHAPTER, _kind, _error_text
from course_utils.exercises.running import LearnerRaised, judge_side
from course_utils.exercises.states import differences, snapshot
from course_utils.exercises.messages import Message, Messages


MESSAGES = Messages("save_weights", {
    "wrote-other-files": " It wrote {files} instead.",
    "missing-entries": (
        "Your file lacks {missing} of the model's state_dict{quiet}. Save every entry of "
        "model.state_dict() as it is, buffers and integer tensors included."),
    "missing-entries-quiet": (
        " (load_state_dict(strict=True) does not even notice: BatchNorm fills in a missing "
        "num_batches_tracked, as for files older than it)"),
    "converted-dtype-values": (
        "The tensors in your file differ from the model's, e.g. {first} (stored as {dtype}): save "
        "them as they are, in their own dtype; a fresh model loads the values exactly only if they "
        "were saved exactly."),
    "changed-the-model-second-call": (
        "The first save was right, but on a second call, after the model trained on and was put in eval mode, with the same path (the file exists already), your "
        "function changed the model ({changed}); saving must only read it."),
    "changed-mode-second-call": (
        "The first save was right, but on a second call, after the model trained on and was put in eval mode, with the same path (the file exists already), your "
        "function switched the model back to train mode: the evaluation that follows would use "
        "dropout and batch statistics. Saving needs no mode; leave model.training as it was (no "
        "model.train() or model.eval() in a save function)."),
    "stale-file-values": "its {differ} still hold the first call's values",
    "changed-the-model-on": (
        "Your function changed the model ({changed}) on {on}; saving must only read it. Save "
        "model.state_dict() as it is; convert or move copies, if ever, not the model."),
    "converted-float64": (
        "On {on}, your file stores {first} as {dtype}, not as the model's float64: the tensors must "
        "be saved as they are, in their own dtype. A conversion (.float(), .to(torch.float32)) "
        "rounds float64 values and hands whoever loads the file another dtype than the model's. "
        "Save model.state_dict() without converting it."),
    "no-file-on": "On {on}, your function wrote no readable file at the path it was given: {problem}.",
    "moved-the-model": (
        "Your function moved the model itself ({how}) on {on}: Module.cpu() and .to(...) move the "
        "module in place (and return it), so a model on a GPU would be left on the CPU after saving"
        " and training would go on there, or stop with tensors on two devices. Leave the model as "
        "it is: torch.save(model.state_dict(), path) saves the tensors from where they are, and "
        "torch.load(path, map_location=...) puts them where the loader wants. For CPU copies, copy "
        "the tensors ({{k: v.cpu() for k, v in model.state_dict().items()}}), not the model."),
    "passed": (
        "Correct: the file holds names and tensors only, so torch.load(path, weights_only=True) reads"
        " it without running any code, and any model with the same layer names can load it."),
    "hint-1": (
        "The check loads your file with torch.load(path, weights_only=True), then into a fresh model "
        "of the same architecture with load_state_dict(strict=True)."),
    "hint-2": (
        "weights_only=True accepts tensors, dicts, lists and plain numbers, never a class such as "
        "nn.Sequential: save a dict of named tensors."),
    "hint-3": "torch.save(model.state_dict(), path)",
    "changed-the-model": (
        "Your function changed the model ({changed}); saving must only read it. Save "
        "model.state_dict() as it is; convert or move copies, if ever, not the model."),
    "changed-mode": (
        "Your function changed the model's mode (train/eval) and did not put it back: the caller's "
        "training goes on with dropout and BatchNorm in the wrong mode. Saving needs no mode; leave "
        "model.training as it was."),
    "replaced-parameters": (
        "Your function replaced the model's parameters ({replaced}) with new tensor objects "
        "(load_state_dict(..., assign=True) does that): an optimizer built before holds the old ones,"
        " so training would no longer move the model. Saving only reads the model; leave its "
        "parameters as they are."),
    "left-model-changed": (
        "Your function left the model changed: {left_changed}. Saving only reads the model; leave it "
        "as it was."),
    "wrong-path": "No file was written at the path you were given.{others} Save to exactly that path.",
    "unloadable-format": (
        "torch.load(path, weights_only=True) cannot read your file. Save only tensors in a dict "
        "(model.state_dict()) with torch.save, not other Python objects or another file format. It "
        'says: "{load_error}"'),
    "saved-parameter-list": (
        "Your file holds {kind} of {length} tensors without their names (list(model.parameters())?). "
        "load_state_dict matches tensors to layers by name, so it cannot use them; and the BatchNorm "
        "running statistics are not parameters at all. Save model.state_dict()."),
    "not-a-state-dict": "Your file holds {kind}; expected the model's state_dict (a dict of named tensors).",
    "parameters-only": (
        "Your file has the parameters but not the buffers: {missing} are missing. named_parameters() "
        "skips buffers such as BatchNorm's running mean and variance, which the model needs in eval "
        "mode. model.state_dict() holds both."),
    "not-tensors": Message(
        "Your file's dict holds something other than tensors under {not_tensors} (keys {keys}). Save "
        "the state_dict itself: torch.save(model.state_dict(), path).",
        advises=('torch.save(model.state_dict(), path)',)),
    "converted-dtype": (
        "Your file stores {first} as {first2}, not in the model's own dtype. The values survived, but"
        " the task asks for the weights as they are: a wider dtype makes the file larger and hands "
        "whoever loads it tensors of another dtype than the model's. Save model.state_dict() without "
        "converting it."),
    "keys-not-loadable": (
        "A fresh model of the same architecture cannot load your file with "
        "load_state_dict(strict=True): {strict_error}"),
    "stale-file": (
        "The first save was right, but on a second call, after the model trained on and was put in eval mode, with the same path (the file exists already), the file does not hold the "
        "model's new weights: {what}. Each call must write the weights the model has now, replacing "
        "the file."),
    "saved-whole-model": Message(
        "You saved the whole model object (torch.save(model, path)): the file holds a pickled "
        "{found}, and torch.load(path, weights_only=True) refuses to rebuild classes, because "
        'unpickling a class can run any code. It says: "{load_error}" Save model.state_dict(): names '
        "and tensors only.",
        advises=('torch.save(model.state_dict(), path)',)),
})


def _unpickler_complaint(message: str) -> str:
    """The sentence of a weights-only error that names what was refused, else its first line."""
    found = re.search(r"(Unsupported global: GLOBAL \S+ was not an allowed global by default\.)", message)
    return found.group(1) if found else message.splitlines()[0]


# ============================================================================================
# S1 — save the state_dict, so that torch.load(weights_only=True) can read it
# ============================================================================================
def save_weights(model, path):
    torch.save(model.state_dict(), path)


def _architecture() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _weights_model() -> nn.Module:
    torch.manual_seed(5)
    model = _architecture()
    with torch.no_grad():  # one batch in training mode: the running statistics move off their defaults
        model(torch.randn(16, 6, generator=torch.Generator().manual_seed(50)))
    return model


_WEIGHTS_ON = "a Sequential(Linear, BatchNorm1d, ReLU, Linear) and a path in an empty temporary folder"


def _readable(tensor: torch.Tensor):
    """The numbers of a tensor as a NumPy array, or None when it has none (meta)."""
    tensor = torch.Tensor.detach(tensor)
    if tensor.device.type == "meta":
        return None
    tensor = tensor.cpu()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    return tensor.numpy().copy()


def _state_changes(before: dict, model: nn.Module) -> list[str]:
    """What changed in the model's state_dict since ``before`` (a dict of name → tensor copy)."""
    after = model.state_dict()
    changes = []
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            changes.append(f"{name} (gone)")
        elif new.device != old.device:
            changes.append(f"{name} (now on {new.device})")
        elif new.dtype != old.dtype:
            changes.append(f"{name} (now {str(new.dtype).removeprefix('torch.')})")
        elif new.shape != old.shape or not torch.equal(new, old):
            changes.append(name)
    return changes


def _file_record(path: str, expected: dict) -> dict:
    """What torch.load(weights_only=True) and a fresh model's load_state_dict make of the file."""
    record = {}
    try:
        with warnings.catch_warnings():  # torch's own remarks on a file the learner wrote
            warnings.simplefilter("ignore")
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # what weights_only=True says about the file is the lesson
        record["load_error"] = _unpickler_complaint(_error_text(error, 2000))
        found = re.search(r"GLOBAL (\S+)", str(error))
        record["global"] = found.group(1) if found else ""
        return record
    record["kind"] = _kind(loaded)
    if isinstance(loaded, (list, tuple)):
        record["length"] = len(loaded)
        return record
    if not isinstance(loaded, dict):
        return record
    record["keys"] = [str(k) for k in loaded]
    record["not_tensors"] = [str(k) for k, v in loaded.items() if not isinstance(v, torch.Tensor)]
    tensors = {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}
    record["differ"] = sorted(
        k for k, v in tensors.items()
        if k in expected and (v.dtype != expected[k].dtype or not np.array_equal(_readable(v), _readable(expected[k])))
    )
    # Stored in another dtype, yet every value survived (a wider dtype): the values are not the
    # problem, the dtype is.
    record["exact_values"] = all(
        (r := _readable(tensors[k])) is not None and r.shape == _readable(expected[k]).shape
        and np.array_equal(r.astype(np.float64), _readable(expected[k]).astype(np.float64))
        for k in record["differ"]
    )
    record["dtypes"] = {k: str(v.dtype).removeprefix("torch.") for k, v in tensors.items()}
    fresh = _architecture()
    try:
        fresh.load_state_dict(loaded, strict=True)
        record["strict_error"] = None
    except Exception as error:
        record["strict_error"] = _error_text(error)
    return record


def _probe_save_weights(answer, run):
    """What the answer's file holds and what it did to the model, and the model's state_dict it
    was given ("given"): never the keys a right file holds (``_expect_save_weights`` saves the
    rebuilt model with the reference, on the judge's side)."""
    model = _weights_model()
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    modes = [m.training for m in model.modules()]
    record = {"given": {"state": {name: given(tensor) for name, tensor in state.items()}}}
    parameters, left_before = dict(model.named_parameters()), snapshot(model)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "weights.pt")
        run(answer, model, path, on=_WEIGHTS_ON)
        record["files"] = sorted(os.listdir(folder))
        record["changed"] = _state_changes(state, model)
        record["mode_changed"] = [m.training for m in model.modules()] != modes
        # What else it left (requires_grad, .grad), and parameters swapped for new objects.
        record["left_changed"] = differences(snapshot(model), left_before)
        record["replaced"] = [name for name, p in model.named_parameters() if parameters.get(name) is not p]
        if not os.path.isfile(path) or record["changed"]:
            return record
        record.update(_file_record(path, state))
        if "strict_error" not in record or record["strict_error"] or record["differ"]:
            return record
        # A second save to the same path, after the model trained on and was put in eval mode
        # (saved after an evaluation): the file must follow, and the mode must stay.
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(0.25)
            model[1].running_mean.add_(0.5)
        model.eval()
        modes = [m.training for m in model.modules()]
        state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        run(answer, model, path, on=f"a second call, {_SECOND_SAVE}")
        second = _file_record(path, state) if os.path.isfile(path) else {"load_error": "the file is gone"}
        record["second"] = {
            "differ": second.get("differ"),
            "problem": second.get("load_error") or second.get("strict_error"),
            "changed": _state_changes(state, model),
            "mode_changed": [m.training for m in model.modules()] != modes,
        }
        # A model in float64 (a dtype of its own): the file must hold float64 tensors, exactly.
        model = _weights_model().double()
        state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        path = os.path.join(folder, "weights64.pt")
        run(answer, model, path, on=_FLOAT64_ON)
        wide = _file_record(path, state) if os.path.isfile(path) else {"load_error": "no file was written"}
        record["float64"] = {"differ": wide.get("differ"), "dtypes": wide.get("dtypes", {}),
                             "problem": wide.get("load_error"), "changed": _state_changes(state, model)}
        # A model on the meta device, the course's stand-in for a GPU: saving must not move it.
        # Meta tensors hold no values, so an answer that copies them (to the CPU) cannot run here:
        # only a move of the model itself (Module.cpu(), .to(), ...) is judged.
        model = _architecture().to("meta")
        modules = {id(m) for m in model.modules()}
        try:
            run(answer, model, os.path.join(folder, "weights_meta.pt"), on=_META_ON)
            moved = None
        except LearnerRaised as raised:
            moved = _module_move(raised.error, modules)
            if moved is None and not _no_data_on_meta(raised.error):
                record["raised"] = later_error(raised, answer)  # an error of its own, not meta's
        devices = {t.device.type for t in model.state_dict().values()}
        if moved is None and devices != {"meta"}:
            moved = f"now on {', '.join(sorted(devices))}"
        record["meta_moved"] = moved
    return record


_FLOAT64_ON = "a call on the same architecture in float64 (model.double()), another path"
_META_ON = ("a call on the same architecture on the meta device (model.to('meta'), the course's "
            "stand-in for a GPU), another path")


def _no_data_on_meta(error: BaseException) -> bool:
    """Whether ``error`` is meta's refusal to give numbers it does not hold (a copy to the CPU,
    .numpy(), .item()): what a right answer that copies the tensors meets there, and no GPU."""
    return "meta" in str(error).lower()


def _module_move(error: BaseException, modules: set[int]) -> str | None:
    """The Module method (cpu, to, cuda...) through which ``error`` was raised while it moved one
    of ``modules`` itself, or None when the error came from elsewhere (a copy of a tensor)."""
    traceback, method = error.__traceback__, None
    while traceback is not None:
        frame = traceback.tb_frame
        owner = frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and frame.f_code.co_filename.endswith(os.path.join("modules", "module.py")):
            if frame.f_code.co_name == "_apply" and id(owner) in modules:
                return f"model.{method or 'to'}(...)" if method != "cpu" else "model.cpu()"
            if frame.f_code.co_name != "_apply":
                method = frame.f_code.co_name
        traceback = traceback.tb_next
    return None


def _expect_save_weights(record):
    """The keys of the file the reference writes for the model rebuilt from its recorded
    state_dict, and the names of its parameters (what a file of the parameters alone holds),
    for the judge."""
    import io

    with judge_side():
        model = _architecture()
        model.load_state_dict({name: tensor_of(facts) for name, facts in record["given"]["state"].items()})
        file = io.BytesIO()
        save_weights.reference(model, file)
        file.seek(0)
        record["expected_keys"] = [str(key) for key in torch.load(file, map_location="cpu", weights_only=True)]
        record["parameters"] = [name for name, _ in model.named_parameters()]
    return record


_SECOND_SAVE = ("after the model trained on and was put in eval mode, with the same path (the file "
                "exists already)")


def _judge_save_weights(record):
    if record["changed"]:
        return MESSAGES("changed-the-model", changed=', '.join(record['changed'][:4]))
    if record["mode_changed"]:
        return MESSAGES("changed-mode")
    if record.get("replaced"):
        return MESSAGES("replaced-parameters", replaced=', '.join(record['replaced'][:3]))
    if record.get("left_changed"):
        return MESSAGES("left-model-changed", left_changed='; '.join(record['left_changed'][:2]))
    if "weights.pt" not in record["files"]:
        others = MESSAGES.text("wrote-other-files", files=', '.join(record['files'])) if record["files"] else ""
        return MESSAGES("wrong-path", others=others)
    if "load_error" in record:
        found = record["global"]
        if found.startswith("torch.nn.modules."):
            return MESSAGES("saved-whole-model", found=found, load_error=record['load_error'])
        return MESSAGES("unloadable-format", load_error=record['load_error'])
    kind = record.get("kind")
    if "length" in record:
        return MESSAGES("saved-parameter-list", kind=record['kind'], length=record['length'])
    if "keys" not in record:
        return MESSAGES("not-a-state-dict", kind=kind)
    keys, expected = record["keys"], record["expected_keys"]
    missing = [k for k in expected if k not in keys]
    if missing and set(keys) == set(record["parameters"]):
        return MESSAGES("parameters-only", missing=', '.join(missing[:3]))
    if missing and set(keys) <= set(expected):
        quiet = all(k.endswith("num_batches_tracked") for k in missing)
        return MESSAGES("missing-entries", missing=', '.join(missing[:3]),
                        quiet=MESSAGES.text("missing-entries-quiet") if quiet else "")
    if record["not_tensors"]:
        return MESSAGES("not-tensors", not_tensors=', '.join(record['not_tensors'][:3]), keys=keys[:4])
    if record["differ"] and record["exact_values"]:
        first = record["differ"][0]
        return MESSAGES("converted-dtype", first=first, first2=record['dtypes'].get(first, '?'))
    if record["differ"]:
        first = record["differ"][0]
        dtype = record["dtypes"].get(first, "?")
        return Mistake("converted-dtype", MESSAGES.text("converted-dtype-values", first=first, dtype=dtype))
    if record["strict_error"]:
        return MESSAGES("keys-not-loadable", strict_error=record['strict_error'])
    second = record["second"]
    if second["changed"]:
        return Mistake("changed-the-model", MESSAGES.text(
            "changed-the-model-second-call", changed=', '.join(second['changed'][:4])))
    if second["mode_changed"]:
        return Mistake("changed-mode", MESSAGES.text("changed-mode-second-call"))
    if second["problem"] or second["differ"]:
        what = (MESSAGES.text("stale-file-values", differ=', '.join(second['differ'][:3]))
                if second["differ"] else second["problem"])
        return MESSAGES("stale-file", what=what)
    wide = record.get("float64")
    if wide is not None and wide["changed"]:
        return Mistake("changed-the-model", MESSAGES.text(
            "changed-the-model-on", changed=', '.join(wide['changed'][:4]), on=_FLOAT64_ON))
    if wide is not None and (wide["problem"] or wide["differ"]):
        first = (wide["differ"] or ["?"])[0]
        return MESSAGES("converted-float64", on=_FLOAT64_ON, first=first,
                        dtype=wide["dtypes"].get(first, "?")) if wide["differ"] else \
            MESSAGES("no-file-on", on=_FLOAT64_ON, problem=wide["problem"])
    if record.get("meta_moved"):
        return MESSAGES("moved-the-model", how=record["meta_moved"], on=_META_ON)
    if record.get("raised"):
        return Raised(record["raised"])
    return None


save_weights = Exercise(
    "save_weights",
    chapter=CHAPTER,
    title="Save the weights, not the object",
    expects=Function("save_weights", ("model", "path"), returns="nothing (None): it writes the file at path"),
    probe=_probe_save_weights,
    expect=_expect_save_weights,
    judge=_judge_save_weights,
    reference=save_weights,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    messages=MESSAGES,
)
