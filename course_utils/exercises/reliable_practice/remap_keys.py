"""Chapter 07, S3: map old key prefixes onto renamed layers (the exercise ``remap_keys``).

Engine: edges.py and states.py do not apply (the inputs are names and the tensors are carried,
never computed on); the check compares each returned tensor's identity with the given one (a
copy, a .detach() or a view is another tensor) and what the dicts given are left as, on
overlapping, chained, multi-level and empty prefixes; hand-written because its named mistakes
(a prefix replaced anywhere, str.lstrip, renamed twice, keys dropped) are read from the keys.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from course_utils.exercises.core import Exercise, Function
from course_utils.exercises.facts import given, tensor_of
from course_utils.exercises.reliable_practice.common import CHAPTER, _kind, _error_text
from course_utils.exercises.messages import Messages


MESSAGES = Messages("remap_keys", {
    "passed": (
        "Correct: only keys that start with an old prefix are renamed, the rest are copied as they "
        "are, and load_state_dict(strict=True) accepts the result with no missing or unexpected key."),
    "hint-1": (
        "Build a new dict. For each key, find the rename whose old prefix the key starts with; keep "
        "the key as it is when none does."),
    "hint-2": (
        "A nested layer can have the same name as a top-level one (block.hidden vs hidden): replacing"
        " the old name anywhere in the key renames the wrong layer. Use key.startswith(old)."),
    "hint-3": "new_key = new + key[len(old):] when key.startswith(old); remapped[new_key] = value",
    "wrong-keys": (
        "Your keys differ from the new model's (on {on}, renames={renames}): missing {missing}, "
        "unexpected {extra}. load_state_dict(strict=True) says: {strict_error}"),
    "not-a-dict": (
        "remap_keys returned {kind} (on {on}); return a new dict of renamed keys and the same "
        "tensors."),
    "renamed-in-place-gone-one": "{gone} is gone from it{instead}",
    "renamed-in-place-gone": "{gone} are gone from it{instead}",
    "renamed-in-place-instead": ", and it has {new} instead",
    "renamed-in-place-reordered": "its keys are the same but in another order",
    "and-more": " and {count} more",
    "renamed-in-place": (
        "remap_keys changed the dict it was given (on {on}): {what}. Build and return a new dict; "
        "whoever called you may still need the original, for instance to load it into the old model."),
    "changed-renames": (
        "remap_keys changed the renames dict it was given (on {on}, renames={renames}): read it, do "
        "not empty or edit it; the caller may use it again for the next checkpoint."),
    "returned-input-dict": (
        "remap_keys returned the very dict it was given (on {on}, renames={renames}), not a new one: "
        "a later change to either changes both. Return a new dict, even when no key is renamed "
        "(dict(state_dict) or a comprehension)."),
    "renamed-twice": (
        "{key} became {chained} (on {on}, renames={renames}): you renamed it to {renamed}, then "
        "renamed that again because {renamed} starts with another old prefix. Each key gets at most "
        "one rename, the one its ORIGINAL name starts with: stop at the first match (break), and test"
        " the original key, not the renamed one."),
    "lstrip-prefix": (
        "{before} became {after}, not {want} (on {on}, renames={renames}): str.lstrip(old) removes "
        "every leading character that occurs anywhere in old, not the prefix old. Cut the prefix off "
        "by its length: new + key[len(old):] (or key.removeprefix(old))."),
    "unescaped-pattern": (
        "{before} became {after} (on {on}, renames={renames}), though it does not contain any old "
        "prefix: your test matches more than the exact prefix ('hidden.' must not match 'hidden2': "
        "a prefix tested without its final dot does, and so does a regular expression, where '.' "
        "matches any character). Test key.startswith(old) with the whole prefix, or escape a "
        "pattern with re.escape(old)."),
    "replaced-anywhere": (
        "{before} became {after} (on {on}, renames={renames}): you replaced the old name wherever it "
        "appears in the key, but only keys that START with it belong to the renamed layer; the nested"
        " layer kept its name. Test key.startswith(old) and replace only that prefix: new + "
        "key[len(old):]. (str.replace(old, new, 1) also changes the first match, which may be inside "
        "the key.)"),
    "replaced-every-occurrence": (
        "{before} became {after}, not {want} (on {on}, renames={renames}): your rename also replaced "
        "the old prefix where it appears again further inside the key. Replace only the prefix at the"
        " start: new + key[len(old):] (str.replace(old, new) changes every occurrence)."),
    "prefix-not-applied": (
        "{before} kept its name (on {on}, renames={renames}), though it starts with the old prefix "
        "{old!r} and should become {want}: every key that starts with an old prefix is renamed, "
        "whichever rename of the dict it is and whatever the layer holds (weights, biases, "
        "buffers). Test key.startswith(old) for every old prefix, on every key."),
    "renamed-unmatched-key": (
        "{before} became {after} (on {on}, renames={renames}), though it starts with no old prefix: "
        "a new prefix was put in front of a key that keeps its name. Rename a key only when "
        "key.startswith(old), and keep every other key as it is."),
    "first-level-only": (
        "{before} kept its name (on {on}, renames={renames}), though it starts with the old prefix "
        "{old!r} and should become {want}. A prefix can be longer than the first part of the name "
        "(several levels, such as 'layers.0.'): test key.startswith(old) for every old prefix."),
    "dropped-unmatched-keys": (
        "Keys that match no rename are gone, e.g. {unchanged} (on {on}): copy them over unchanged, or"
        " load_state_dict(strict=True) reports them missing."),
    "dict-kept-between-calls": (
        "Your dict holds keys of an earlier call too, e.g. {from_before} (on {on}, "
        "renames={renames}): they belong to another model's state_dict. Start each call with a new, "
        "empty dict, made inside the function; a dict kept between calls collects every call's keys."),
    "mismatched-tensors": (
        "The keys are right but {wrong_values} holds another tensor (on {on}): each tensor stays with"
        " its own key, only the key's prefix changes."),
    "refused-by-strict-load": "load_state_dict(strict=True) refused your dict (on {on}): {strict_error}",
    "cloned-tensors": (
        "The keys and values are right, but {copied} holds a copy of the given tensor, not the tensor"
        " itself (on {on}): the task asks for the same tensors. Put each given value in the new dict "
        "as it is, without .clone(); for a large model, copies double the memory for nothing."),
    "new-tensor-objects": (
        "The keys and values are right, and {other_objects} shares the given tensor's memory, but it "
        "is another tensor object (.detach(), .data or a view makes one) (on {on}): the task asks for"
        " the same tensors. Put each given value in the new dict as it is."),
    "skipped-empty-prefix": (
        "{before} kept its name (on {on}, renames={renames}), though it starts with the old prefix "
        "{old!r} and should become {want}: the new prefix here is the empty string, and cutting the "
        "old prefix off is a rename too. An empty string counts as False in a test such as `if new:` "
        "or `if renames.get(...)`; test key.startswith(old) alone, then new + key[len(old):]."),
})


# ============================================================================================
# S3 — map old key prefixes onto renamed layers
# ============================================================================================
def remap_keys(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        remapped[key] = value
    return remapped


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 4)
        self.out = nn.Linear(4, 4)


class _OldNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(6, 4)
        self.block = _Block()
        self.out = nn.Linear(4, 3)


class _NewNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(6, 4)
        self.block = _Block()  # its inner layers keep their names
        self.head = nn.Linear(4, 3)


class _LegacyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 6), nn.Linear(6, 4))
        self.norm = nn.BatchNorm1d(4)
        self.hidden = nn.Linear(4, 4)
        self.hidden2 = nn.Linear(4, 3)


class _ModernNet(nn.Module):
    """_LegacyNet with layers.0 taken out as stem, norm renamed bn, hidden renamed encoder."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.layers = nn.Sequential(nn.Identity(), nn.Linear(6, 4))
        self.bn = nn.BatchNorm1d(4)
        self.encoder = nn.Linear(4, 4)
        self.hidden2 = nn.Linear(4, 3)


class _Wrapped(nn.Module):
    """What nn.DataParallel looks like to state_dict(): the model under the name module."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def _remap_cases():
    torch.manual_seed(21)
    return [
        ("a model whose top-level hidden and out became encoder and head (its block keeps "
         "block.hidden and block.out)", _OldNet(), _NewNet, {"hidden.": "encoder.", "out.": "head."}),
        ("a Sequential that gained a Dropout at position 2", nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)),
         lambda: nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Dropout(0.1), nn.Linear(5, 2)), {"2.": "3."}),
        # Chained renames: "0." becomes "1.", the old "1." becomes "2."; each key is renamed once.
        ("a Sequential that gained a Dropout at the front", nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 2)),
         lambda: nn.Sequential(nn.Dropout(0.1), nn.Linear(4, 5), nn.Linear(5, 2)), {"0.": "1.", "1.": "2."}),
        # Swapped renames: two layers of the same shape trade places.
        ("a Sequential whose two Linear(4, 4) layers swapped places",
         nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)),
         lambda: nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), {"0.": "1.", "1.": "0."}),
        # A prefix of two levels; a remainder that starts with letters of the prefix
        # (norm.running_mean); a layer whose name merely begins like a renamed one (hidden2).
        ("a model whose layers.0 became stem, norm became bn and hidden became encoder (hidden2 "
         "and layers.1 keep their names)", _LegacyNet(), _ModernNet,
         {"layers.0.": "stem.", "norm.": "bn.", "hidden.": "encoder."}),
        # Nested Sequentials: the old prefix "0." appears again inside the keys (0.0.weight).
        ("a Sequential of (a Sequential of two Linear layers, a Linear) that gained a Dropout at "
         "the front", nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), nn.Linear(4, 2)),
         lambda: nn.Sequential(nn.Dropout(0.1), nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), nn.Linear(4, 2)),
         {"0.": "1.", "1.": "2."}),
        # An empty new prefix: the "module." that nn.DataParallel (or "_orig_mod." that
        # torch.compile) puts in front of every key, cut off.
        ("weights saved from a model wrapped in nn.DataParallel (every key starts with module.), "
         "loaded into the bare model", _Wrapped(nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))),
         lambda: nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2)), {"module.": ""}),
        # Nothing renamed: still a new dict, with the same tensors.
        ("a model whose layers kept their names", _OldNet(), _OldNet, {}),
    ]


def _chained_key(key, renames):
    """The key after every matching rename in turn: a renamed key renamed again."""
    for old, new in renames.items():
        if key.startswith(old):
            key = new + key[len(old):]
    return key


def _expected_key(key, renames):
    for old, new in renames.items():
        if key.startswith(old):
            return new + key[len(old):]
    return key


def _probe_remap_keys(answer, run):
    """What the answer returned for each state_dict (its keys, the numbers under each, which
    given tensor each value is) and what it did to its inputs, and the inputs themselves
    ("given"): never the keys a right answer makes (``_expect_remap_keys`` runs the reference
    on them, on the judge's side)."""
    cases = []
    for on, old_model, make_new, renames in _remap_cases():
        given_state = old_model.state_dict()
        keys_before = list(given_state)
        tensors = dict(given_state)
        renames_given = dict(renames)
        case = {
            "on": on,
            "given": {"state": [[key, given(tensor)] for key, tensor in tensors.items()],
                      "renames": dict(renames)},
            "renames": dict(renames),
        }
        got = run(answer, given_state, renames_given, on=f"{on}, renames={renames}")
        case.update({
            "renames_changed": renames_given != renames,
            "keys_before": keys_before,
            "keys_after_call": list(given_state),
            "kind": _kind(got),
            "same_object": got is given_state,
        })
        if not isinstance(got, dict):
            cases.append(case)
            return cases
        case["keys"] = [str(k) for k in got]
        # The numbers under each returned key (None for what holds none: no tensor, or meta).
        case["values"] = [[str(k), _numbers(v)] for k, v in got.items()]
        # Which given tensors each returned tensor is (the same memory and shape): none for a copy.
        case["sources"] = [
            [str(k), [old for old, t in tensors.items() if v.data_ptr() == t.data_ptr() and v.shape == t.shape]]
            for k, v in got.items() if isinstance(v, torch.Tensor) and v.device.type != "meta"
        ]
        # Which given tensor objects each returned value is: a .detach() or a view shares the
        # memory (above) and is yet another tensor.
        case["objects"] = [[str(k), [old for old, t in tensors.items() if v is t]] for k, v in got.items()]
        new_model = make_new()
        try:
            new_model.load_state_dict(got, strict=True)
            case["strict_error"] = None
        except Exception as error:
            case["strict_error"] = _error_text(error, 500)
        cases.append(case)
    return cases


def _numbers(value):
    """A returned value's numbers as a NumPy array; None when it is no tensor or has none."""
    if not isinstance(value, torch.Tensor) or value.device.type == "meta":
        return None
    with torch._C.DisableTorchFunction():
        tensor = torch.Tensor.detach(value).cpu()
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.float()
        return tensor.numpy().copy()


def _expect_remap_keys(cases):
    """The keys the reference makes of each recorded state_dict with its renames, and which
    given key's tensor belongs under each (so which returned values are another tensor, or a
    copy), for the judge."""
    for case in cases:
        state = {key: tensor_of(facts) for key, facts in case["given"]["state"]}
        remapped = remap_keys.reference(state, dict(case["given"]["renames"]))
        case["expected_keys"] = list(remapped)
        if "keys" not in case:
            continue
        old_key = {id(tensor): key for key, tensor in state.items()}
        origin = {str(new): old_key[id(tensor)] for new, tensor in remapped.items()}
        case["copied"] = sorted(key for key, sources in case["sources"] if key in origin and origin[key] not in sources)
        case["other_objects"] = sorted(
            key for key, objects in case.get("objects", []) if key in origin and key not in case["copied"]
            and origin[key] not in objects)
        case["wrong_values"] = sorted(
            key for key, numbers in case["values"]
            if key in origin and not (numbers is not None and np.array_equal(numbers, state[origin[key]].numpy()))
        )
    return cases


def _few(keys, limit=3) -> str:
    shown = ", ".join(repr(k) for k in keys[:limit])
    return shown + (MESSAGES.text("and-more", count=len(keys) - limit) if len(keys) > limit else "")


def _judge_remap_keys(cases):
    earlier = set()  # the keys every earlier call should have returned
    for case in cases:
        on, renames = case["on"], case["renames"]
        if "keys" not in case:
            return MESSAGES("not-a-dict", kind=case['kind'], on=on)
        if case["keys_after_call"] != case["keys_before"]:
            gone = [k for k in case["keys_before"] if k not in case["keys_after_call"]]
            new = [k for k in case["keys_after_call"] if k not in case["keys_before"]]
            if gone or new:
                what = MESSAGES.text("renamed-in-place-gone-one" if len(gone) == 1 else "renamed-in-place-gone",
                                     gone=_few(gone),
                                     instead=MESSAGES.text("renamed-in-place-instead", new=_few(new)) if new else "")
            else:
                what = MESSAGES.text("renamed-in-place-reordered")
            return MESSAGES("renamed-in-place", on=on, what=what)
        if case["renames_changed"]:
            return MESSAGES("changed-renames", on=on, renames=renames)
        if case["same_object"]:
            return MESSAGES("returned-input-dict", on=on, renames=renames)
        keys, expected = case["keys"], case["expected_keys"]
        if keys == expected or set(keys) == set(expected):
            if case["wrong_values"]:
                return MESSAGES("mismatched-tensors", wrong_values=case['wrong_values'][0], on=on)
            if case["strict_error"]:
                return MESSAGES("refused-by-strict-load", on=on, strict_error=case['strict_error'])
            if case["copied"]:
                return MESSAGES("cloned-tensors", copied=case['copied'][0], on=on)
            if case.get("other_objects"):
                return MESSAGES("new-tensor-objects", other_objects=case['other_objects'][0], on=on)
            earlier |= set(expected)
            continue
        chained = [_chained_key(k, renames) for k in case["keys_before"]]
        if set(keys) == set(chained) and set(chained) != set(expected):
            twice = next(
                (k, _expected_key(k, renames), c) for k, c, want in zip(case["keys_before"], chained, expected)
                if c != want
            )
            return MESSAGES("renamed-twice",
                            key=twice[0],
                            chained=twice[2],
                            on=on,
                            renames=renames,
                            renamed=twice[1])
        aligned = _aligned(case)
        stripped = _same_slip(case, _lstripped)
        if stripped:
            before, after, want = stripped
            return MESSAGES("lstrip-prefix", before=before, after=after, want=want, on=on, renames=renames)
        wrong_inside = [
            (before, after) for before, after, want in zip(case["keys_before"], aligned, expected)
            if after is not None and after != want and before == want
        ]
        if wrong_inside and not any(old in wrong_inside[0][0] for old in renames):
            before, after = wrong_inside[0]
            return MESSAGES("unescaped-pattern", before=before, after=after, on=on, renames=renames)
        if wrong_inside:
            before, after = wrong_inside[0]
            if any(after == new + before for new in renames.values()):  # a new prefix put before it
                return MESSAGES("renamed-unmatched-key", before=before, after=after, on=on, renames=renames)
            return MESSAGES("replaced-anywhere", before=before, after=after, on=on, renames=renames)
        again = _same_slip(case, _replaced_everywhere)
        if again:
            before, after, want = again
            return MESSAGES("replaced-every-occurrence",
                            before=before,
                            after=after,
                            want=want,
                            on=on,
                            renames=renames)
        kept = [(before, want) for before, after, want in zip(case["keys_before"], aligned, expected)
                if after is not None and after == before and want != before]
        if kept:
            before, want = kept[0]
            old = next(o for o in renames if before.startswith(o))
            if renames[old] == "":
                return MESSAGES("skipped-empty-prefix",
                                before=before,
                                on=on,
                                renames=renames,
                                old=old,
                                want=want)
            # Only a prefix of several levels ("layers.0.") tells an answer that tests the first.
            named = "first-level-only" if old.count(".") > 1 else "prefix-not-applied"
            return MESSAGES(named, before=before, on=on, renames=renames, old=old, want=want)
        missing = [k for k in expected if k not in keys]
        unchanged = [k for k in missing if k in case["keys_before"]]
        if unchanged and len(keys) < len(expected):
            return MESSAGES("dropped-unmatched-keys", unchanged=unchanged[0], on=on)
        extra = [k for k in keys if k not in expected]
        from_before = [k for k in extra if k in earlier and k not in case["keys_before"]]
        if extra and len(from_before) == len(extra):
            return MESSAGES("dict-kept-between-calls", from_before=from_before[0], on=on, renames=renames)
        return MESSAGES("wrong-keys",
                        on=on,
                        renames=renames,
                        missing=missing[:3],
                        extra=extra[:3],
                        strict_error=case['strict_error'])
    return None


def _same_slip(case, slip):
    """(key, what ``slip`` makes of it, the right key) for the first key ``slip`` gets wrong,
    when the learner's keys are exactly what ``slip`` makes of every key; else None."""
    renames, expected = case["renames"], case["expected_keys"]
    slipped = [slip(key, renames) for key in case["keys_before"]]
    if set(case["keys"]) != set(slipped) or set(slipped) == set(expected):
        return None
    return next((key, after, want) for key, after, want in zip(case["keys_before"], slipped, expected)
                if after != want)


def _lstripped(key, renames):
    """The key after the first matching rename done with str.lstrip instead of a cut."""
    for old, new in renames.items():
        if key.startswith(old):
            return new + key.lstrip(old)
    return key


def _replaced_everywhere(key, renames):
    """The key after the first matching rename done with str.replace (every occurrence)."""
    for old, new in renames.items():
        if key.startswith(old):
            return key.replace(old, new)
    return key


def _aligned(case):
    """The learner's keys, paired with the input keys by position (dicts keep their order)."""
    keys = case["keys"]
    if len(keys) != len(case["keys_before"]):
        return [None] * len(case["keys_before"])
    return keys


remap_keys = Exercise(
    "remap_keys",
    chapter=CHAPTER,
    title="Load old weights into renamed layers",
    expects=Function("remap_keys", ("state_dict", "renames"), returns="a new dict of str keys to the same tensors"),
    probe=_probe_remap_keys,
    expect=_expect_remap_keys,
    judge=_judge_remap_keys,
    reference=remap_keys,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    messages=MESSAGES,
)
