"""Chapter 06's exercise seeded_loader: right answers pass, classic mistakes fail with the message that names them."""

import random

import numpy as np
import pytest
import torch
from torch.utils.data import (BatchSampler, DataLoader, RandomSampler, Sampler, SequentialSampler,
                              SubsetRandomSampler)

from course_utils.data import reseed_worker
from course_utils.exercises import debugging as ex
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- seeded_loader (D8) ----------------------------------------------------------------------
def loader_with_a_sampler(dataset, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, generator=g)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_worker_seeding(dataset, batch_size, seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return DataLoader(dataset, batch_size, shuffle=True, generator=g, worker_init_fn=reseed_worker)


def loader_with_a_subset_sampler(dataset, batch_size, seed):
    sampler = SubsetRandomSampler(range(len(dataset)), generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=False)


def loader_global_seed(dataset, batch_size, seed):
    torch.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def loader_no_shuffle(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size)


def loader_batches(dataset, batch_size, seed):
    return list(ex.seeded_loader.reference(dataset, batch_size, seed))


def loader_ignores_seed(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))


def loader_manual_seed_as_generator(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.manual_seed(seed))


def loader_fixed_permutation(dataset, batch_size, seed):
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
    return DataLoader(dataset, batch_size=batch_size, sampler=order)


_SHARED = torch.Generator()


def loader_shared_generator(dataset, batch_size, seed):
    _SHARED.manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=_SHARED)


def loader_drop_last(dataset, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=g, drop_last=True)


def loader_belt_and_braces(dataset, batch_size, seed):
    torch.manual_seed(seed)  # the global stream too, "to be safe"
    return ex.seeded_loader.reference(dataset, batch_size, seed)


def loader_with_a_batch_sampler(dataset, batch_size, seed):
    generator = torch.Generator("cpu")
    generator.manual_seed(seed)
    return DataLoader(dataset, batch_sampler=BatchSampler(RandomSampler(dataset, generator=generator),
                                                          batch_size, drop_last=False))


class _ShuffledWithPython(Sampler):
    def __init__(self, size, seed):
        self.size, self.random = size, random.Random(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        order = list(range(self.size))
        self.random.shuffle(order)
        return iter(order)


def loader_with_a_python_random_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_ShuffledWithPython(len(dataset), seed))


def loader_seed_drawn_under_fork_rng(dataset, batch_size, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        own = int(torch.randint(0, 2**62, ()))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(own))


def loader_seed_plus_initial_seed(dataset, batch_size, seed):
    generator = torch.Generator().manual_seed(torch.initial_seed() + seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


def loader_global_seed_under_fork_rng(dataset, batch_size, seed):
    with torch.random.fork_rng():  # "the global stream is left as it was"
        torch.manual_seed(seed)
        return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def loader_with_replacement(dataset, batch_size, seed):
    sampler = RandomSampler(dataset, replacement=True, generator=torch.Generator().manual_seed(seed))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


class _ReseededEveryEpoch(DataLoader):
    def __iter__(self):
        self.generator.manual_seed(self.seed)  # "the same seed every epoch"
        return super().__iter__()


def loader_reseeded_every_epoch(dataset, batch_size, seed):
    loader = _ReseededEveryEpoch(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator())
    loader.seed = seed
    return loader


class _GlobalReseededEveryEpoch(Sampler):
    def __init__(self, size, seed):
        self.size, self.seed, self.epoch = size, seed, 0

    def __len__(self):
        return self.size

    def __iter__(self):
        torch.manual_seed(self.seed + self.epoch)  # "a new, repeatable order every epoch"
        self.epoch += 1
        return iter(torch.randperm(self.size).tolist())


def loader_reseeds_the_global_stream_every_epoch(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_GlobalReseededEveryEpoch(len(dataset), seed))


class _OwnStreamButDrawsGlobal(Sampler):
    def __init__(self, size, seed):
        self.size, self.generator = size, torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        order = torch.randperm(self.size, generator=self.generator)
        order = order[torch.randperm(self.size)]  # "one more shuffle" from the global stream
        return iter(order.tolist())


def loader_draws_the_global_stream_when_iterated(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_OwnStreamButDrawsGlobal(len(dataset), seed))


class _ShuffledWithGlobalPython(Sampler):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __iter__(self):
        order = list(range(self.size))
        random.shuffle(order)
        return iter(order)


def loader_python_global_random(dataset, batch_size, seed):
    random.seed(seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=_ShuffledWithGlobalPython(len(dataset)))


def loader_generator_but_plain_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=RandomSampler(dataset),
                      generator=torch.Generator().manual_seed(seed))


class _NumpySampler(Sampler):
    def __init__(self, size, seed):
        self.size, self.rng = size, np.random.default_rng(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        return iter(self.rng.permutation(self.size).tolist())


def loader_with_a_numpy_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_NumpySampler(len(dataset), seed))


class _SeededPerEpoch(Sampler):
    def __init__(self, size, seed):
        self.size, self.seed, self.epoch = size, seed, 0

    def __len__(self):
        return self.size

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed * 1000 + self.epoch)
        self.epoch += 1
        return iter(torch.randperm(self.size, generator=generator).tolist())


def loader_seeded_per_epoch(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_SeededPerEpoch(len(dataset), seed))


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def s_iterator(dataset, batch_size, seed):
    return iter(DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)))


def s_batch_size_forgotten(dataset, batch_size, seed):
    return DataLoader(dataset, shuffle=True, generator=torch.Generator().manual_seed(seed))


def s_collate_keeps_lists(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed),
                      collate_fn=lambda batch: batch)


_PER_SEED = {}


def s_cached_per_seed(dataset, batch_size, seed):
    if seed not in _PER_SEED:
        _PER_SEED[seed] = torch.Generator().manual_seed(seed)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=_PER_SEED[seed])


def s_deterministic_switched_on(dataset, batch_size, seed):
    torch.use_deterministic_algorithms(True)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))


def s_generator_set_afterwards(dataset, batch_size, seed):
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    loader.generator = torch.Generator().manual_seed(seed)
    return loader


_EPOCH = [0]


class _EpochSampler:
    def __init__(self, n, seed):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __iter__(self):
        _EPOCH[0] += 1  # one counter for every loader
        g = torch.Generator().manual_seed(self.seed + _EPOCH[0])
        return iter(torch.randperm(self.n, generator=g).tolist())


def s_shared_epoch_counter(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_EpochSampler(len(dataset), seed))


def s_collate_drops_labels(dataset, batch_size, seed):
    from torch.utils.data import default_collate
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed),
                      collate_fn=lambda batch: default_collate(batch)[0])


class _ShuffledBatches:
    def __init__(self, n, batch_size, seed):
        self.batches = list(BatchSampler(SequentialSampler(range(n)), batch_size, drop_last=False))
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        order = torch.randperm(len(self.batches), generator=self.generator).tolist()
        return iter([self.batches[i] for i in order])


def s_shuffles_batches(dataset, batch_size, seed):
    return DataLoader(dataset, batch_sampler=_ShuffledBatches(len(dataset), batch_size, seed))


def s_seed_from_the_dataset(dataset, batch_size, seed):
    generator = torch.Generator().manual_seed(seed + len(dataset) * 1000 + int(torch.randint(0, 1, ())))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator)


class _PermutationSampler(Sampler):
    def __init__(self, size, seed):
        self.size = size
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.size

    def __iter__(self):
        return iter(torch.randperm(self.size, generator=self.generator).tolist())


def loader_with_a_permutation_sampler(dataset, batch_size, seed):
    return DataLoader(dataset, batch_size=batch_size, sampler=_PermutationSampler(len(dataset), seed))


CATALOGUE = Catalogue({
    ex.seeded_loader: [
        right("a RandomSampler with the generator", loader_with_a_sampler),
        right("worker seeding too", loader_with_worker_seeding),
        right("a SubsetRandomSampler over every index", loader_with_a_subset_sampler),
        wrong("seeds the global stream", loader_global_seed, "global random stream", "generator="),
        wrong("does not shuffle", loader_no_shuffle, "does not shuffle"),
        wrong("returns the batches", loader_batches, "returned list", "DataLoader"),
        wrong("ignores the seed", loader_ignores_seed, "seed=7 and seed=8 gave the same order"),
        wrong("generator=torch.manual_seed(seed)", loader_manual_seed_as_generator,
              "torch.default_generator", "torch.Generator().manual_seed(seed)"),
        wrong("one permutation for every epoch", loader_fixed_permutation,
              "same order in every epoch", kind=STATEFUL),
        wrong("one generator shared by every loader", loader_shared_generator,
              "share one torch.Generator object", kind=STATEFUL),
        wrong("drop_last=True", loader_drop_last, "the last, smaller batch of 2 is missing", "drop_last=False", kind=EDGE),
        wrong("reseeds the global stream as well", loader_belt_and_braces,
              "changed the global random generator's state", kind=STATEFUL),
        right("a BatchSampler over a RandomSampler", loader_with_a_batch_sampler),
        right("a sampler with its own random.Random", loader_with_a_python_random_sampler),
        right("a seed drawn under fork_rng", loader_seed_drawn_under_fork_rng),
        wrong("seeded with torch.initial_seed() + seed", loader_seed_plus_initial_seed,
              "depends on the global state when it is made", kind=EDGE),
        wrong("the global seed under fork_rng", loader_global_seed_under_fork_rng, "global random stream",
              "generator="),
        wrong("a RandomSampler with replacement", loader_with_replacement, "exactly once"),
        wrong("reseeds its generator every epoch", loader_reseeded_every_epoch, "same order in every epoch",
              kind=STATEFUL),
        wrong("a sampler that reseeds the global stream every epoch", loader_reseeds_the_global_stream_every_epoch,
              "Iterating over your loader changed the global random generator's state", kind=STATEFUL),
        wrong("a sampler that also draws from the global stream", loader_draws_the_global_stream_when_iterated,
              "iterating over it changed the global random generator's state", "draws from the global stream",
              kind=STATEFUL),
        wrong("a sampler on Python's global random", loader_python_global_random, "Python's random module",
              "a stream of its own"),
        wrong("generator= on the loader, a RandomSampler without one", loader_generator_but_plain_sampler,
              "its RandomSampler has none", "RandomSampler(dataset, generator=...)", kind=EDGE),
        right("a sampler with np.random.default_rng(seed)", loader_with_a_numpy_sampler),
        right("a sampler seeding a fresh generator per epoch", loader_seeded_per_epoch),
        # -- issue 45, fresh round (from the task text) --
        wrong('returns an iterator over the loader', s_iterator,
              '(shuffle=True, batch_size=batch_size, and its own generator)'),
        wrong('batch_size not passed', s_batch_size_forgotten, 'your batches have sizes'),
        wrong('a collate_fn that keeps the list of items', s_collate_keeps_lists,
              'does not hold each of the 20 items exactly once (it holds'),
        wrong('one generator per seed, kept between calls',
              s_cached_per_seed, 'and each new call reseeds the loaders made before it. Make a', kind=STATEFUL),
        wrong('switches deterministic algorithms on', s_deterministic_switched_on,
              'and left it so: every later computation of the program runs', kind=STATEFUL),
        wrong('the generator set on the loader after it was made', s_generator_set_afterwards,
              'loaders with seed=7 gave different orders. Your loader has a'),
        wrong('a sampler with an epoch counter shared by every loader', s_shared_epoch_counter,
              'made and used before it change it. Give each loader a stream', kind=STATEFUL),
        wrong('a collate_fn that keeps x only', s_collate_drops_labels,
              "the items' parts as the data set gives them, x with its y: a"),
        wrong('shuffles the batches, not the items', s_shuffles_batches, 'your batches have sizes'),
        wrong('a seed mixed with a draw from the global stream', s_seed_from_the_dataset,
              'the program uses, so every call resets the randomness of the', kind=STATEFUL),
        right("a sampler of torch.randperm from its own generator", loader_with_a_permutation_sampler),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
