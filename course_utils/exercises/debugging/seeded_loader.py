"""Chapter 06, D8: a shuffle that repeats (the exercise ``seeded_loader``).

Engine: applies states.session_settings/changed_settings (the global random state, the default
dtype, grad mode and deterministic algorithms an answer must leave as they were), loaders made
before any is iterated, a batch_size that does not divide the data set, and items of two parts
(x, y) that each batch must keep together; hand-written because the answer is a DataLoader whose
order is judged by what it must and must not depend on (the seed, the global stream, the epoch),
with no reference order to compare with.
"""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from course_utils.exercises.core import Exercise, Function, Mistake
from course_utils.exercises.debugging.common import CHAPTER, _kind
from course_utils.exercises.states import changed_settings, session_settings
from course_utils.exercises.messages import Message, Messages


MESSAGES = Messages("seeded_loader", {
    "passed": (
        "Correct: the order depends on the seed alone, not on what the rest of the program drew from "
        "the global random stream, and it still changes from epoch to epoch."),
    "hint-1": (
        "A DataLoader with shuffle=True and no generator draws its shuffle from the global random "
        "stream when each epoch starts, not when it is created."),
    "hint-2": (
        "Give the loader a random stream of its own: a torch.Generator seeded with seed, passed as "
        "generator=."),
    "hint-3": (
        "return DataLoader(dataset, batch_size=batch_size, shuffle=True, "
        "generator=torch.Generator().manual_seed(seed))"),
    "seed-passed-as-device": (
        "torch.Generator's argument is a device, not a seed: torch.Generator(7) asks for device 7. "
        "Make it, then seed it: torch.Generator().manual_seed(seed)."),
    "no-shuffle": (
        "Your loader gives the items in their stored order, 0, 1, 2…: it does not shuffle. Pass "
        "shuffle=True (training needs a new order every epoch), and make the order repeatable with "
        "generator=, not by switching shuffling off."),
    "global-generator": Message(
        "Your loader's generator is torch.default_generator, the global random stream itself (which "
        "is also what torch.manual_seed(seed) returns): other code drawing from it changes the order."
        " Make a new one: generator=torch.Generator().manual_seed(seed).",
        advises=('torch.Generator().manual_seed(seed)',)),
    "shared-generator": (
        "Two loaders made by your function share one torch.Generator object: iterating one moves the "
        "other's stream, and each new call reseeds the loaders made before it. Make a new generator "
        "in every call: torch.Generator().manual_seed(seed)."),
    "global-stream-sampler": (
        "Two loaders with seed=7 gave different orders: your loader draws its order from "
        "{other_streams}, a global stream that every other loader and the rest of the program share, "
        "so the order depends on what was drawn before. Give each loader a stream of its own: "
        "generator=torch.Generator().manual_seed(seed) (or a random.Random(seed) / "
        "np.random.default_rng(seed) of its own in a sampler)."),
    "sampler-without-generator": (
        "Two loaders with seed=7 gave different orders. Your loader has a generator of its own, but "
        "its RandomSampler has none (its generator is None): the sampler does the shuffling, and "
        "draws from the global stream when each epoch starts, while the loader's generator= only "
        "reaches a sampler the loader makes itself, when the loader is made. Pass shuffle=True with "
        "generator=torch.Generator().manual_seed(seed), or give the sampler the generator: "
        "RandomSampler(dataset, generator=...)."),
    "touches-global-each-epoch-alone": (
        "Iterating over your loader changed the global random generator's state (on "
        "{global_changed_iterating}): each epoch, something in it reseeded the stream the rest of "
        "the program uses, or drew from it, so the dropout masks and initialisations that follow "
        "depend on your loader. Draw the shuffle from the loader's own generator only "
        "(generator=torch.Generator().manual_seed(seed)) and leave the global one as it was."),
    "touches-global-each-epoch": (
        "Two loaders with seed=7 gave different orders. Your loader has a generator of its own, yet "
        "iterating over it changed the global random generator's state (on "
        "{global_changed_iterating}): something in it draws from the global stream each epoch, so its"
        " order depends on what the rest of the program drew before. Draw the whole shuffle from the "
        "loader's own generator."),
    "order-shared-between-loaders": (
        "Two loaders with seed=7 gave different orders, though neither draws from the global random "
        "stream: your loader's order depends on something the loaders share (a counter, a cache, a "
        "stream kept between calls), so the loaders made and used before it change it. Give each "
        "loader a stream of its own, made in the call: generator=torch.Generator().manual_seed(seed)."),
    "seeds-global-stream": Message(
        "Two loaders with seed=7 gave different orders, because other code used the global random "
        "stream (torch.manual_seed / torch.rand) between creating each loader and iterating over it. "
        "Without its own generator, a DataLoader draws its shuffle from the global stream when an "
        "epoch starts, so torch.manual_seed(seed) before creating it is not enough. Give it its own: "
        "generator=torch.Generator().manual_seed(seed).",
        advises=('torch.Generator().manual_seed(seed)',)),
    "seed-from-global-state": Message(
        "Two loaders with seed=7, made while the global random stream was seeded differently "
        "(torch.manual_seed(2024), then torch.manual_seed(31)), gave different orders although "
        "everything else was the same: your loader's order depends on the global state when it is "
        "made (torch.initial_seed(), a number drawn from the global stream), not on seed alone. Seed "
        "its generator with seed itself: torch.Generator().manual_seed(seed).",
        advises=('torch.Generator().manual_seed(seed)',)),
    "touches-global-stream": (
        "Your function changed the global random generator's state (on {global_changed}): it reseeded"
        " or drew from the stream the rest of the program uses, so every call resets the randomness "
        "of the code around it (model initialisation, dropout). The loader needs a generator of its "
        "own; leave the global one alone."),
    "changed-settings": (
        "Your function changed {settings} (on {on}) and left it so: every later computation of the "
        "program runs under it. A loader needs none of these settings; leave the session as it was."),
    "ignores-seed": "seed=7 and seed=8 gave the same order: the seed must choose the shuffle.",
    "same-order-every-epoch": (
        "Your loader repeats the same order in every epoch (two epochs of the loader with seed=7): "
        "training needs a new order each epoch. Let the loader shuffle with shuffle=True and its own "
        "generator, made once when the loader is created, so each epoch continues its stream (a new "
        "order, yet the same sequence of orders in every run)."),
    "not-a-loader": (
        "seeded_loader returned {record}; return a torch.utils.data.DataLoader (shuffle=True, "
        "batch_size=batch_size, and its own generator)."),
    "drop-last": (
        "With batch_size={size} your loader gives {sizes}: the last, smaller batch of {size2} is "
        "missing, so {size2} items never appear in an epoch. Keep it (drop_last=False, the default)."),
    "not-each-item-once": (
        "One epoch of your loader with batch_size={size} does not hold each of the 20 items exactly "
        "once (it holds {items_count} items)."),
    "wrong-batch-sizes": "With batch_size={size} your batches have sizes {sizes}; expected {expected}.",
    "batch-not-a-pair": "is not the pair (x, y) of the items' parts",
    "batch-of-other-labels": "holds the labels {labels} for the examples {batch}",
    "batches-not-items": (
        "Each batch of your loader must hold the items' parts as the data set gives them, x with its "
        "y: a batch of the loader with seed=7 {what}. Leave collate_fn as it is (the default stacks "
        "each part: a batch is (x, y))."),
})

_GLOBAL_STATE = "the global random state (torch.manual_seed or a draw)"  # judged on its own
_DETERMINISTIC = "deterministic algorithms (torch.use_deterministic_algorithms)"


# ============================================================================================
# D8 — a shuffle that repeats
# ============================================================================================
def seeded_loader(dataset, batch_size, seed):
    generator = torch.Generator()
    generator.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def _epoch(loader, labels=None) -> list[list[int]]:
    """The items' x of each batch; their y, batch by batch, appended to ``labels`` (None for a
    batch that is not the pair (x, y) of tensors the default collate makes)."""
    batches = []
    for batch in loader:
        values = batch[0] if isinstance(batch, (tuple, list)) else batch
        batches.append([int(v) for v in torch.as_tensor(values).reshape(-1).tolist()])
        if labels is not None:
            pair = isinstance(batch, (tuple, list)) and len(batch) == 2 and all(
                isinstance(part, torch.Tensor) for part in batch)
            labels.append([int(v) for v in batch[1].reshape(-1).tolist()] if pair else None)
    return batches


def _generators_of(loader) -> list:
    found = [getattr(loader, "generator", None), getattr(getattr(loader, "sampler", None), "generator", None)]
    batch_sampler = getattr(loader, "batch_sampler", None)
    found.append(getattr(getattr(batch_sampler, "sampler", None), "generator", None))
    return [g for g in found if isinstance(g, torch.Generator)]


_LOADERS = [  # key, seed, batch_size, the global draws made before its first epoch
    ("a", 7, 4, 123),
    ("b", 7, 4, 999),
    ("c", 8, 4, 123),
    ("d", 7, 3, 555),
    ("e", 7, 4, 123),  # made while the global stream was seeded otherwise (_MADE_UNDER)
]
_MADE_UNDER = {"e": 31}  # the global seed when a loader is made; 2024 for the others


def _probe_seeded_loader(answer, run):
    # Items of two parts, as a data set of examples and labels has: item i is (i, 10 * i).
    dataset = TensorDataset(torch.arange(20), torch.arange(20) * 10)
    record = {"global_changed": [], "settings_changed": []}
    loaders = {}
    # Every loader is made first, then iterated: loaders that share one generator show.
    streams = set()  # Python's or NumPy's global stream, used by the loader or its making
    for key, seed, batch_size, _ in _LOADERS:
        on = f"seeded_loader(a data set of 20 items, batch_size={batch_size}, seed={seed})"
        torch.manual_seed(_MADE_UNDER.get(key, 2024))
        before = torch.get_rng_state()
        others = _other_streams()
        settings = session_settings()
        loader = run(answer, dataset, batch_size, seed, on=on)
        streams |= _other_streams_moved(others)
        record["settings_changed"] += [(name, on) for name in changed_settings(settings, session_settings())
                                       if name != _GLOBAL_STATE and (name, on) not in record["settings_changed"]]
        torch.use_deterministic_algorithms(settings[_DETERMINISTIC])  # put back for the checks that follow
        if not torch.equal(torch.get_rng_state(), before):
            record["global_changed"].append(on)
        record[f"kind_{key}"] = _kind(loader)
        if not isinstance(loader, DataLoader):
            return record
        loaders[key] = (loader, on)
    default = torch.default_generator
    first = loaders["a"][0]
    samplers = [getattr(first, "sampler", None), getattr(getattr(first, "batch_sampler", None), "sampler", None)]
    # generator= on the loader reaches only a sampler the loader makes itself (shuffle=True).
    record["sampler_without_generator"] = isinstance(first.generator, torch.Generator) and any(
        isinstance(sampler, torch.utils.data.RandomSampler) and sampler.generator is None for sampler in samplers
    )
    generators = {key: _generators_of(loader) for key, (loader, _) in loaders.items()}
    record["uses_global_generator"] = any(g is default for gs in generators.values() for g in gs)
    record["own_generator"] = bool(generators["a"]) and not record["uses_global_generator"]
    record["shared_generator"] = any(
        g is h for gs in generators.values() for hs in generators.values() if gs is not hs
        for g in gs for h in hs
    ) and not record["uses_global_generator"]
    record["global_changed_iterating"] = []
    for key, _, _, disturbance in _LOADERS:
        loader, on = loaders[key]
        torch.manual_seed(disturbance)  # the rest of a program uses the global random stream
        torch.rand(3)
        epochs = [(key, f"iterating over {on}")] + ([("a2", f"a second epoch of {on}")] if key == "a" else [])
        for name, where in epochs:
            before = torch.get_rng_state()
            others = _other_streams()
            labels = []
            record[name] = run(_epoch, loader, labels, on=where)
            record[f"labels_{name}"] = labels
            streams |= _other_streams_moved(others)
            if _global_moved(before):
                record["global_changed_iterating"].append(where)
    record["other_streams"] = sorted(streams)
    return record


def _other_streams() -> dict:
    return {"Python's random module": random.getstate(),
            "NumPy's global np.random": np.random.get_state()[1].copy()}


def _other_streams_moved(before: dict) -> set:
    after = _other_streams()
    moved = set()
    for name, state in before.items():
        same = np.array_equal(state, after[name]) if isinstance(state, np.ndarray) else state == after[name]
        if not same:
            moved.add(name)
    return moved


def _global_moved(before: torch.Tensor) -> bool:
    """Whether the global generator moved since ``before`` by more than the one number a
    DataLoader without generator= draws itself when an epoch starts (its workers' base seed:
    a loader whose sampler holds the generator does that, and it is not the learner's doing)."""
    after = torch.get_rng_state()
    if torch.equal(after, before):
        return False
    one_draw = torch.Generator()
    one_draw.set_state(before)
    torch.empty((), dtype=torch.int64).random_(generator=one_draw)
    return not torch.equal(after, one_draw.get_state())


def _judge_seeded_loader(record):
    for key, _, _, _ in _LOADERS:
        if key not in record:
            return MESSAGES("not-a-loader", record=record[f'kind_{key}'])
    a, b, c, d, a2 = record["a"], record["b"], record["c"], record["d"], record["a2"]
    for order, size in ((a, 4), (d, 3)):
        items = sorted(v for batch in order for v in batch)
        sizes = [len(batch) for batch in order]
        if 20 % size and sizes == [size] * (20 // size):
            return MESSAGES("drop-last", size=size, sizes=sizes, size2=20 % size)
        if items != list(range(20)):
            return MESSAGES("not-each-item-once", size=size, items_count=len(items))
        expected = [size] * (20 // size) + ([20 % size] if 20 % size else [])
        if sizes != expected:
            return MESSAGES("wrong-batch-sizes", size=size, sizes=sizes, expected=expected)
    for batch, labels in zip(a, record.get("labels_a") or []):
        if labels is None or labels != [10 * v for v in batch]:
            what = (MESSAGES.text("batch-not-a-pair") if labels is None
                    else MESSAGES.text("batch-of-other-labels", labels=labels, batch=batch))
            return MESSAGES("batches-not-items", what=what)
    if a == c and [v for batch in a for v in batch] == list(range(20)):
        return MESSAGES("no-shuffle")
    if record["uses_global_generator"]:
        return MESSAGES("global-generator")
    if record["shared_generator"]:
        return MESSAGES("shared-generator")
    if a != b and record.get("other_streams"):
        return MESSAGES("global-stream-sampler", other_streams=' and '.join(record['other_streams']))
    if a != b and record.get("sampler_without_generator"):
        return MESSAGES("sampler-without-generator")
    if a != b and record.get("own_generator") and record.get("global_changed_iterating"):
        return MESSAGES("touches-global-each-epoch",
                        global_changed_iterating=record['global_changed_iterating'][0])
    if a != b and not record.get("global_changed_iterating") and not record["global_changed"]:
        return MESSAGES("order-shared-between-loaders")
    if a != b:
        return MESSAGES("seeds-global-stream")
    if a != record["e"]:
        return MESSAGES("seed-from-global-state")
    if record["global_changed"]:
        return MESSAGES("touches-global-stream", global_changed=record['global_changed'][0])
    if record.get("global_changed_iterating"):
        return Mistake("touches-global-each-epoch", MESSAGES.text(
            "touches-global-each-epoch-alone", global_changed_iterating=record['global_changed_iterating'][0]))
    if record.get("settings_changed"):
        names = sorted({name for name, _ in record["settings_changed"]})
        settings, on = ", ".join(names), record["settings_changed"][0][1]
        return MESSAGES("changed-settings", settings=settings, on=on)
    if a == c:
        return MESSAGES("ignores-seed")
    if a2 == a:
        return MESSAGES("same-order-every-epoch")
    return None


seeded_loader = Exercise(
    "seeded_loader",
    chapter=CHAPTER,
    title="A shuffle that repeats",
    expects=Function("seeded_loader", ("dataset", "batch_size", "seed"), returns="a torch.utils.data.DataLoader"),
    probe=_probe_seeded_loader,
    judge=_judge_seeded_loader,
    reference=seeded_loader,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "seed-passed-as-device": "accelerator",
    }),
    messages=MESSAGES,
)
