"""Chapter 05's training_memory_bytes: its catalogue of right and wrong answers."""

import copy

import pytest
import torch

from course_utils.bench import optimizer_state_tensors, tensor_bytes
from course_utils.exercises import speed_and_memory as ex
from course_utils.exercises.core import Outcome
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# -- training_memory_bytes (P4) --------------------------------------------------------------
STATES = {"sgd": 0, "momentum": 1, "adam": 2}


def with_nbytes(model, optimizer_name):
    trainable = sum(p.nbytes for p in model.parameters() if p.requires_grad)
    everything = sum(p.nbytes for p in model.parameters())
    return everything + trainable * (1 + STATES[optimizer_name])


def measured(model, optimizer_name):
    # Build the optimizer on a copy, take one step, and count the tensors that exist.
    model = copy.deepcopy(model)
    trainable = [p for p in model.parameters() if p.requires_grad]
    make = {
        "sgd": lambda: torch.optim.SGD(trainable, lr=0.1),
        "momentum": lambda: torch.optim.SGD(trainable, lr=0.1, momentum=0.9),
        "adam": lambda: torch.optim.Adam(trainable),
    }
    optimizer = make[optimizer_name]()
    for p in trainable:
        p.grad = torch.ones_like(p)
    optimizer.step()
    return (
        tensor_bytes(model.parameters())
        + tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
        + tensor_bytes(optimizer_state_tensors(optimizer))  # Adam's 4-byte step counters too
    )


def by_named_parameters_and_bits(model, optimizer_name):
    copies = 1 + {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for _, p in model.named_parameters():
        nbytes = p.numel() * torch.finfo(p.dtype).bits // 8
        total += nbytes * (1 + copies * p.requires_grad)
    return int(total)


def as_a_tensor(model, optimizer_name):
    states = ["sgd", "momentum", "adam"].index(optimizer_name)
    sizes = torch.tensor([p.numel() * p.element_size() for p in model.parameters()])
    trainable = torch.tensor([p.requires_grad for p in model.parameters()])
    return (sizes + sizes * trainable * (1 + states)).sum()


def _memory(parameter_factor, gradient=True, states=STATES, size=None, frozen_too=False):
    def answer(model, optimizer_name):
        total = 0
        for p in model.parameters():
            bytes_ = p.numel() * (p.element_size() if size is None else size)
            total += bytes_ * parameter_factor
            if p.requires_grad or frozen_too:
                total += bytes_ * (int(gradient) + states[optimizer_name])
        return total

    return answer


def size_by_dtype_name(model, optimizer_name):
    states = STATES[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * (2 if p.dtype in (torch.float16, torch.bfloat16) else 4)
        total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def per_module(model, optimizer_name):
    states = STATES[optimizer_name]
    total = 0
    for module in model.modules():
        for p in module.parameters(recurse=False):
            size = p.numel() * p.element_size()
            total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def from_state_dict(model, optimizer_name):
    per_tensor = 2 + STATES[optimizer_name]
    return sum(t.numel() * t.element_size() * per_tensor for t in model.state_dict().values())


def steps_the_model_itself(model, optimizer_name):
    make = {
        "sgd": lambda: torch.optim.SGD(model.parameters(), lr=0.1),
        "momentum": lambda: torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        "adam": lambda: torch.optim.Adam(model.parameters()),
    }
    optimizer = make[optimizer_name]()
    for p in model.parameters():
        if p.requires_grad:
            p.grad = torch.ones_like(p)
    optimizer.step()
    return (
        tensor_bytes(model.parameters())
        + tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
        + tensor_bytes(optimizer_state_tensors(optimizer))
    )


def converts_to_float32(model, optimizer_name):
    model.float()  # "to count in one dtype"
    states = STATES[optimizer_name]
    return sum(p.numel() * 4 * (1 + (1 + states) * p.requires_grad) for p in model.parameters())


# -- round 2: answers outside testers wrote ------------------------------------------------------
def one_element_size_for_all(model, optimizer_name):
    params = list(model.parameters())
    size = params[0].element_size()  # "they all have the model's dtype"
    states = STATES[optimizer_name]
    elements = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return (elements + trainable * (1 + states)) * size


def in_numpy(model, optimizer_name):
    import numpy as np

    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    sizes = np.array([p.numel() * p.element_size() for p in model.parameters()], dtype=np.int64)
    trainable = np.array([p.requires_grad for p in model.parameters()])
    return sizes.sum() + (sizes * trainable).sum() * (1 + states)


def with_if_branches_and_a_float(model, optimizer_name):
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    if optimizer_name == "sgd":
        state = 0
    elif optimizer_name == "momentum":
        state = grads
    elif optimizer_name == "adam":
        state = 2 * grads
    else:
        raise ValueError(optimizer_name)
    return float(params + grads + state)


def capitalised_names(model, optimizer_name):
    states = {"SGD": 0, "Momentum": 1, "Adam": 2}[optimizer_name]
    return sum(p.numel() * p.element_size() * (1 + (1 + states) * p.requires_grad)
               for p in model.parameters())


# -- round 3 -----------------------------------------------------------------------------------
def trainable_and_frozen_with_match(model, optimizer_name):
    match optimizer_name:
        case "sgd":
            states = 0
        case "momentum":
            states = 1
        case "adam":
            states = 2
        case _:
            raise ValueError(optimizer_name)
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() * p.element_size() for p in model.parameters() if not p.requires_grad)
    return frozen + trainable * (2 + states)


# -- issue 45, fresh round (from the task text) ---------------------------------------------
_FRESH_STATES = {"sgd": 0, "momentum": 1, "adam": 2}
_FRESH_CACHE = {}


def tm_size_table_without_float16(model, optimizer_name):
    """bytes per element from a table of the dtypes the text names (float16 falls to 4)."""
    sizes = {torch.float32: 4, torch.float64: 8, torch.bfloat16: 2}
    total = 0
    for p in model.parameters():
        size = p.numel() * sizes.get(p.dtype, 4)
        total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if p.requires_grad else 0)
    return total


def tm_materialises_gradients(model, optimizer_name):
    """makes each gradient to count it, then clears .grad (an old gradient is lost)."""
    total = 0
    for p in model.parameters():
        total += p.numel() * p.element_size()
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
            total += p.grad.numel() * p.grad.element_size() * (1 + _FRESH_STATES[optimizer_name])
    model.zero_grad(set_to_none=True)
    return total


def tm_counts_buffers_too(model, optimizer_name):
    """the buffers too (batch norm's statistics are memory as well), frozen like a frozen weight."""
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        size = t.numel() * t.element_size()
        total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if t.requires_grad else 0)
    return total


def tm_eval_mode_counts_no_training(model, optimizer_name):
    """a model in eval mode is not training: only its parameters."""
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()
        total += size
        if p.requires_grad and model.training:
            total += size * (1 + _FRESH_STATES[optimizer_name])
    return total


def tm_cached_by_id(model, optimizer_name):
    """remembers each model's answer by id(model)."""
    key = (id(model), optimizer_name)
    if key not in _FRESH_CACHE:
        total = 0
        for p in model.parameters():
            size = p.numel() * p.element_size()
            total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if p.requires_grad else 0)
        _FRESH_CACHE[key] = total
    return _FRESH_CACHE[key]


def tm_rows_times_columns(model, optimizer_name):
    """a tensor's elements as rows x columns (a vector: its length)."""
    total = 0
    for p in model.parameters():
        elements = p.shape[0] * (p.shape[1] if p.dim() > 1 else 1)
        size = elements * p.element_size()
        total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if p.requires_grad else 0)
    return total


def tm_optimizer_state_in_float32(model, optimizer_name):
    """optimizer state always float32 (4 bytes an element), whatever the parameter's dtype."""
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()
        total += size
        if p.requires_grad:
            total += size + _FRESH_STATES[optimizer_name] * p.numel() * 4
    return total


def tm_puts_the_model_in_train_mode(model, optimizer_name):
    """model.train() first, "training" memory; the mode is left changed."""
    model.train()
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()
        total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if p.requires_grad else 0)
    return total


def tm_children_only(model, optimizer_name):
    """the parameters of model.children(), one level down."""
    total = 0
    for child in model.children():
        for p in child.parameters(recurse=False):
            size = p.numel() * p.element_size()
            total += size + (size * (1 + _FRESH_STATES[optimizer_name]) if p.requires_grad else 0)
    return total


def tm_gradients_in_float32(model, optimizer_name):
    """gradients are float32 (the chapter says so of autocast): 4 bytes an element."""
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()
        total += size
        if p.requires_grad:
            total += p.numel() * 4 + _FRESH_STATES[optimizer_name] * size
    return total


# -- issue 45, second fresh round (from the task text) --------------------------------------
def tm2_grad_present(model, optimizer_name):
    """'trainable' when a gradient is there or requires_grad: a layer frozen after training still
    holds its old .grad."""
    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * p.element_size()
        total += size
        if p.grad is not None or p.requires_grad:
            total += size * (1 + states)
    return total


def tm2_finfo_bits(model, optimizer_name):
    """bytes per element from torch.finfo(dtype).bits // 8: half a complex element, and
    raises on an integer parameter."""
    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * (torch.finfo(p.dtype).bits // 8)
        total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def tm2_finfo_bits_complex_doubled(model, optimizer_name):
    """finfo bits, doubled for a complex dtype: still raises on an integer parameter."""
    states = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer_name]
    total = 0
    for p in model.parameters():
        size = p.numel() * torch.finfo(p.dtype).bits // 8 * (2 if p.is_complex() else 1)
        total += size + (size * (1 + states) if p.requires_grad else 0)
    return total


def tm_dict_dedup_nbytes(model, optimizer_name):
    copies = {"sgd": 1, "momentum": 2, "adam": 3}[optimizer_name]
    unique = {id(p): p for p in model.parameters()}
    return sum(p.nbytes * (1 + copies * p.requires_grad) for p in unique.values())


CATALOGUE = Catalogue({
    ex.training_memory_bytes: [
        right("nbytes", with_nbytes),
        right("measured on a copy with a real optimizer", measured),
        right("a 0-dim tensor from vectorised sizes", as_a_tensor),
        wrong("counts elements", _memory(1, size=1), "elements, not bytes", "element_size()"),
        wrong("no gradients", _memory(1, gradient=False), "gradients are missing"),
        wrong("Adam as one state", _memory(1, states={"sgd": 0, "momentum": 1, "adam": 1}),
              "one state tensor for Adam", "exp_avg_sq"),
        wrong("no optimizer state", _memory(1, states={"sgd": 0, "momentum": 0, "adam": 0}),
              "optimizer state is missing"),
        wrong("frozen parameters counted", _memory(1, frozen_too=True), "frozen", "requires_grad=False"),
        wrong("4 bytes for bfloat16", _memory(1, size=4), "bfloat16", "counted 4", "element_size()"),
        wrong("returns a str", lambda model, name: f"{name}: a lot", "returned str"),
        wrong("returns None", lambda model, name: None, "returned NoneType"),
        wrong("sizes from the dtype by hand (float64 as 4)", size_by_dtype_name,
              "float64 MLP", "8 bytes per element", "counted 4", kind=EDGE),
        wrong("a shared weight per module", per_module, "shared weight twice", kind=EDGE),
        wrong("state_dict() tensors", from_state_dict, "model.state_dict()", "buffers", kind=EDGE),
        wrong("steps an optimizer on the model itself", steps_the_model_itself,
              "changed the values of its parameters", "copy.deepcopy", kind=STATEFUL),
        wrong("model.float() to count", converts_to_float32,
              "changed the dtype of its parameters", kind=STATEFUL),
        right("NumPy arrays of sizes, a NumPy integer", in_numpy),
        wrong("capitalised optimizer names", capitalised_names, "KeyError: 'sgd'",
              "Likely cause: a lookup of the key 'sgd'", kind=EDGE, outcome=Outcome.RAISED),
        right("if/elif branches, a float", with_if_branches_and_a_float),
        right("match statement, frozen plus trainable times (2 + states)", trainable_and_frozen_with_match),
        wrong("one element size for every parameter", one_element_size_for_all,
              "one element size, 4 bytes", "2 or 4 bytes per element", "p.element_size()", kind=EDGE),
        # -- issue 45, fresh round (from the task text) --
        wrong('a dtype table without float16 (4 by default)', tm_size_table_without_float16,
              'float16 MLP', 'counted 4', 'p.element_size()', kind=EDGE),
        wrong('makes each .grad to count it, then zero_grad(set_to_none=True)', tm_materialises_gradients,
              'left gradients in (or removed them from)', '1e8', kind=STATEFUL),
        wrong('buffers counted like frozen parameters', tm_counts_buffers_too,
              'Not the right count', 'batch norm', kind=EDGE),
        wrong('eval mode counted as not training', tm_eval_mode_counts_no_training,
              'eval mode', 'requires_grad', kind=STATEFUL),
        wrong('a cache by id(model)', tm_cached_by_id,
              'remembered its answer', 'first layer frozen', kind=STATEFUL),
        wrong('rows times columns (a 0-d parameter)', tm_rows_times_columns,
              'IndexError', '0-d parameter', kind=EDGE, outcome=Outcome.RAISED),
        wrong('optimizer state at 4 bytes an element', tm_optimizer_state_in_float32,
              '4 bytes an element', 'bfloat16 MLP', kind=EDGE),
        wrong('model.train() first, left in train mode', tm_puts_the_model_in_train_mode,
              'left in train mode', 'eval mode', kind=STATEFUL),
        wrong('model.children() one level down', tm_children_only,
              'shared weight twice', kind=EDGE),
        wrong('gradients at 4 bytes an element', tm_gradients_in_float32,
              '4 bytes an element', 'element_size()', kind=EDGE),
        right('parameters deduplicated by id, nbytes times a bool', tm_dict_dedup_nbytes),
        # -- issue 45, second fresh round (from the task text) --
        # (was right("named_parameters and finfo bits"): finfo counts half of a complex element
        # and knows no integer dtype; the task says each parameter's element_size())
        wrong("named_parameters and finfo bits", by_named_parameters_and_bits,
              "complex64", "counted 4", "p.element_size()", kind=EDGE),
        wrong("finfo(dtype).bits // 8 per element", tm2_finfo_bits,
              "complex64", "counted 4", "torch.finfo", kind=EDGE),
        wrong("finfo bits, doubled for complex (an int parameter)", tm2_finfo_bits_complex_doubled,
              "TypeError", "integer dtype", "element_size()", kind=EDGE, outcome=Outcome.RAISED),
        wrong("trainable when .grad is set or requires_grad", tm2_grad_present,
              "still holds", "requires_grad", "frozen after some training", kind=STATEFUL),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()
