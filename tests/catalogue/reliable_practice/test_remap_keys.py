"""Chapter 07's exercise remap_keys: right answers pass, classic mistakes fail with the message that names them."""

import re
from collections import OrderedDict

import pytest

from course_utils.exercises import reliable_practice as ex
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- remap_keys (S3) -------------------------------------------------------------------------
def remap_with_partition(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        head, dot, rest = key.partition(".")
        out[renames.get(head + dot, head + dot)[:-1] + dot + rest if head + dot in renames else key] = value
    return out


def remap_with_regex(state_dict, renames):
    if not renames:
        return dict(state_dict)
    pattern = re.compile("^(" + "|".join(re.escape(old) for old in renames) + ")")
    return {pattern.sub(lambda m: renames[m.group(1)], key): value for key, value in state_dict.items()}


def remap_testing_the_original_key(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        new_key = key
        for old, new in renames.items():
            if key.startswith(old):
                new_key = new + key[len(old):]
        out[new_key] = value
    return out


def remap_with_next(state_dict, renames):
    def rename(key):
        old = next((old for old in renames if key.startswith(old)), None)
        return key if old is None else renames[old] + key.removeprefix(old)

    return OrderedDict((rename(key), value) for key, value in state_dict.items())


def remap_with_removeprefix(state_dict, renames):
    def rename(key):
        for old, new in renames.items():
            if key.startswith(old):
                return new + key.removeprefix(old)
        return key

    return {rename(key): value for key, value in state_dict.items()}


def remap_with_an_escaped_regex(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            renamed, count = re.subn("^" + re.escape(old), lambda match, new=new: new, key)
            if count:
                key = renamed
                break
        out[key] = value
    return out


def remap_with_lstrip(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key.lstrip(old)  # "strip the old prefix"
                break
        out[key] = value
    return out


def remap_replaces_every_occurrence(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = key.replace(old, new)
                break
        out[key] = value
    return out


def remap_with_an_unescaped_regex(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            renamed = re.sub("^" + old, new, key)
            if renamed != key:
                key = renamed
                break
        out[key] = value
    return out


def remap_replace_anywhere(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            key = key.replace(old, new)
        out[key] = value
    return out


def remap_replace_first(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            key = key.replace(old, new, 1)
        out[key] = value
    return out


def remap_in_place(state_dict, renames):
    for key in list(state_dict):
        for old, new in renames.items():
            if key.startswith(old):
                state_dict[new + key[len(old):]] = state_dict.pop(key)
    return state_dict


def remap_drops_the_rest(state_dict, renames):
    return {new + k[len(old):]: v for k, v in state_dict.items() for old, new in renames.items() if k.startswith(old)}


def remap_swaps_values(state_dict, renames):
    good = ex.remap_keys.reference(state_dict, renames)
    keys = list(good)
    return {keys[0]: good[keys[1]], keys[1]: good[keys[0]], **{k: good[k] for k in keys[2:]}}


def remap_renames_again(state_dict, renames):  # no break: a renamed key meets the next rename
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value
    return out


def remap_clones(state_dict, renames):
    return {key: value.clone() for key, value in ex.remap_keys.reference(state_dict, renames).items()}


def remap_nothing_to_do(state_dict, renames):
    if not renames:
        return state_dict  # "nothing to rename"
    return ex.remap_keys.reference(state_dict, renames)


def remap_fills_in_the_renames(state_dict, renames):
    for key in state_dict:  # a complete mapping: every top-level name, renamed or not
        head = key.split(".")[0] + "."
        renames.setdefault(head, head)
    return {renames[key.split(".")[0] + "."] + key.split(".", 1)[1]: value for key, value in state_dict.items()}


def remap_by_popping(state_dict, renames):
    for key in list(state_dict):
        for old, new in renames.items():
            if key.startswith(old):
                state_dict[new + key[len(old):]] = state_dict.pop(key)
                break
    return state_dict


_ACCUMULATED = {}


def remap_into_a_module_level_dict(state_dict, renames):
    for key, value in state_dict.items():  # the dict outlives the call
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        _ACCUMULATED[key] = value
    return dict(_ACCUMULATED)


def remap_skips_an_empty_new_prefix(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if new and key.startswith(old):  # "nothing to put in front: nothing to do"
                key = new + key[len(old):]
                break
        out[key] = value
    return out


def remap_by_the_longest_dotted_prefix(state_dict, renames):
    out = {}
    for key, value in state_dict.items():
        parts = key.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i]) + "."
            if prefix in renames:
                key = renames[prefix] + ".".join(parts[i:])
                break
        out[key] = value
    return out


def remap_with_map_and_next(state_dict, renames):
    def renamed(item):
        key, value = item
        return next((renames[o] + key[len(o):] for o in renames if key.startswith(o)), key), value
    return dict(map(renamed, state_dict.items()))


# -- issue 45, fresh round (from the task text) ---------------------------------------------
def r_old_anywhere_then_slice(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if old in key:
                key = new + key[len(old):]
                break
        remapped[key] = value
    return remapped


def r_dot_optional(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old.rstrip(".")):
                key = new + key[len(old):]
                break
        remapped[key] = value
    return remapped


def r_detached(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(old):]
                break
        remapped[key] = value.detach()
    return remapped


def r_first_rename_only(state_dict, renames):
    old, new = next(iter(renames.items()), ("", ""))
    return {(new + key[len(old):] if old and key.startswith(old) else key): value for key, value in state_dict.items()}


def r_new_on_every_key(state_dict, renames):
    remapped = dict(state_dict)
    for old, new in renames.items():
        remapped = {new + key.removeprefix(old) if key.startswith(old) or old not in key else key: value
                    for key, value in remapped.items()}
    return remapped


def r_slice_by_new_length(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new + key[len(new):]
                break
        remapped[key] = value
    return remapped


def r_own_dot(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                key = new.rstrip(".") + "." + key[len(old):]
                break
        remapped[key] = value
    return remapped


def r_keeps_old_key_too(state_dict, renames):
    remapped = dict(state_dict)
    for key, value in state_dict.items():
        for old, new in renames.items():
            if key.startswith(old):
                remapped[new + key[len(old):]] = value
                break
    return remapped


def r_parameters_only(state_dict, renames):
    remapped = {}
    for key, value in state_dict.items():
        if key.endswith(("weight", "bias")):
            for old, new in renames.items():
                if key.startswith(old):
                    key = new + key[len(old):]
                    break
        remapped[key] = value
    return remapped


def r_keys_times_renames(state_dict, renames):
    return {(new + key[len(old):] if key.startswith(old) else key): value
            for key, value in state_dict.items() for old, new in renames.items()}


def remap_by_splitting_at_the_prefix(state_dict, renames):
    remapped = {}
    for key in state_dict:
        match = next((old for old in renames if key.startswith(old)), None)
        new_key = key if match is None else renames[match] + key.split(match, 1)[1]
        remapped[new_key] = state_dict[key]
    return remapped


CATALOGUE = Catalogue({
    ex.remap_keys: [
        wrong("pops and re-adds keys in the given dict", remap_by_popping, "'hidden.weight'", "are gone from it",
              "'encoder.weight'"),
        right("str.removeprefix in a comprehension", remap_with_removeprefix),
        right("an escaped regular expression per prefix", remap_with_an_escaped_regex),
        wrong("str.partition: first level of the name only", remap_with_partition,
              "layers.0.weight kept its name", "several levels", kind=EDGE),
        wrong("strips the prefix with str.lstrip", remap_with_lstrip, "norm.running_mean became bn.unning_mean",
              "key[len(old):]", kind=EDGE),
        wrong("startswith, then str.replace of every occurrence", remap_replaces_every_occurrence,
              "0.0.weight became 1.1.weight", "further inside the key", kind=EDGE),
        wrong("an unescaped regular expression", remap_with_an_unescaped_regex,
              "hidden2.weight became encoder..weight", "re.escape(old)", kind=EDGE),
        right("one regular expression", remap_with_regex),
        right("tests the original key, no break", remap_testing_the_original_key),
        right("next() over the prefixes, an OrderedDict", remap_with_next),
        wrong("replaces the old name anywhere", remap_replace_anywhere,
              "block.hidden.weight became block.encoder.weight", "startswith"),
        wrong("replaces the first occurrence", remap_replace_first, "block.hidden.weight became block.encoder.weight"),
        wrong("renames inside the given dict", remap_in_place, "changed the dict it was given", kind=STATEFUL),
        wrong("drops the keys that match no rename", remap_drops_the_rest, "match no rename are gone",
              "block.hidden.weight"),
        wrong("pairs keys with the wrong tensors", remap_swaps_values, "holds another tensor"),
        wrong("returns a list of pairs", lambda sd, renames: list(sd.items()), "returned list"),
        wrong("renames a renamed key again", remap_renames_again, "0.weight became 2.weight", "renamed that again",
              "ORIGINAL name", "break", kind=EDGE),
        wrong("clones every tensor", remap_clones, "holds a copy of the given tensor", "same tensors"),
        wrong("returns the given dict when nothing is renamed", remap_nothing_to_do,
              "returned the very dict it was given", "renames={}", kind=EDGE),
        wrong("fills the renames dict in", remap_fills_in_the_renames, "changed the renames dict", kind=STATEFUL),
        wrong("one dict kept between calls", remap_into_a_module_level_dict, "keys of an earlier call",
              "new, empty dict", kind=STATEFUL),
        wrong("skips an empty new prefix", remap_skips_an_empty_new_prefix, "module.0.weight kept its name",
              "empty string", kind=EDGE),
        right("the longest dotted prefix first", remap_by_the_longest_dotted_prefix),
        right("map() and next()", remap_with_map_and_next),
        # -- issue 45, fresh round (from the task text) --
        wrong('`old in key`, then the first len(old) characters cut',
              r_old_anywhere_then_slice, 'you replaced the old name wherever it appears in the key,', kind=EDGE),
        wrong('the prefix tested without its dot', r_dot_optional,
              'though it does not contain any old prefix: your test matches', kind=EDGE),
        wrong('detaches every tensor', r_detached, 'memory, but it is another tensor object (.detach(), .data or'),
        wrong('the first rename only', r_first_rename_only,
              'an old prefix is renamed, whichever rename of the dict it is'),
        wrong('the new prefix put before keys the old one is not in', r_new_on_every_key,
              'though it starts with no old prefix: a new prefix was put', kind=EDGE),
        wrong('cuts len(new) characters', r_slice_by_new_length, "Your keys differ from the new model's (on"),
        wrong('a dot of its own after the new prefix', r_own_dot,
              "Your keys differ from the new model's (on", kind=EDGE),
        wrong('keeps the old key next to the new', r_keeps_old_key_too, "Your keys differ from the new model's (on"),
        wrong('renames weights and biases only', r_parameters_only,
              'an old prefix is renamed, whichever rename of the dict it is', kind=EDGE),
        wrong('one comprehension over keys and renames', r_keys_times_renames,
              "Your keys differ from the new model's (on", kind=EDGE),
        right("split at the first matching prefix", remap_by_splitting_at_the_prefix),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
