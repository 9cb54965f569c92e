"""What to look at when the learner's code raised: read from the error itself, never guessed.

An exercise's own ``error_notes`` name the classic mistake of its topic; this module is the
fallback every other error gets. Each rule reads a fact out of the error's text (the sizes that
met, the device that was asked for, the name that was missing) and says what to look at. A rule
never claims a cause the text does not show.
"""

from __future__ import annotations

import re
from typing import Callable

Rule = Callable[["re.Match[str]"], str]

# (error type or None for any, pattern searched in the message, what to say); first match wins.
_RULES: list[tuple[str | None, str, Rule]] = [
    # Only a notebook being graded says this (course_utils.grading.kernel_guard, kernel_probe).
    (None, r"^grading: ",
     lambda m: "your code reached for the grader's own code or data (a worked answer, a check, "
               "its frames or memory), which a graded notebook does not allow: a grade comes only "
               "from code you wrote. Write the computation yourself."),
    (None, r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) "
           r"at non-singleton dimension (\d+)",
     lambda m: f"two tensors met in one element-wise operation with sizes {m[1]} and {m[2]} in "
               f"dimension {m[3]}, and neither is 1, so they cannot broadcast. Print the shape "
               "of each operand on the line shown; add or remove a dimension (x[:, None], "
               "squeeze(d)) so the sizes agree or one is 1."),
    (None, r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
     lambda m: f"a matrix product (a Linear layer, @ or mm) got {m[1]}x{m[2]} and {m[3]}x{m[4]}: "
               f"the first's last size ({m[2]}) must equal the second's first ({m[3]}). For a "
               f"Linear layer, its in_features ({m[3]}) must be the input's last size ({m[2]})."),
    (None, r"Expected all tensors to be on the same device|Tensor on device \S+ is not on the "
           r"expected device",
     lambda m: "the tensors of one operation live on different devices. Make new tensors on "
               "the inputs' device (device=x.device, torch.zeros_like(x)) and move modules with "
               ".to(device); never name 'cuda' or 'cpu' where the input's device is meant."),
    (None, r"Found no NVIDIA driver|Torch not compiled with CUDA enabled|"
           r"no CUDA GPUs are available|CUDA driver version is insufficient",
     lambda m: "your code asked for the CUDA device by name, and this torch cannot use one. "
               "Use the device your function was given, or the device of its inputs."),
    (None, r"Cannot copy out of meta tensor|cannot be called on meta tensors",
     lambda m: "the check passed tensors on the 'meta' device (it stands in for a GPU: shapes, "
               "no values), and your code read values from one (.item(), .tolist(), .cpu(), "
               "printing). Keep the work on the device of the inputs."),
    (None, r"expected target dtype to be Long",
     lambda m: "class targets must be integers (int64, 'long'), one class index per sample. "
               "Print the targets' dtype; convert with .long()."),
    (None, r"expected scalar type|to have the same dtype|must have the same dtype|"
           r"have same dtype|Found dtype \w+ but expected|can't be cast to the desired output type",
     lambda m: "two tensors of different dtypes met in one operation (the error names both). "
               "Print the dtype of each operand on the line shown and convert one with "
               ".to(other.dtype); a new tensor takes dtype=x.dtype."),
    (None, r"element 0 of tensors does not require grad and does not have a grad_fn",
     lambda m: "backward() ran on a result autograd did not record: nothing it was computed "
               "from requires grad, grad mode is off (torch.no_grad(), set_grad_enabled(False)), "
               "or it came from a .detach()ed tensor. Look at how the tensor you call backward() "
               "on was made."),
    (None, r"assign(?:ing)? a gradient (?:with dtype|of )|assigned grad has data of a different",
     lambda m: ".grad was given a tensor of another dtype, shape or device than its parameter. "
               "Make it from the parameter (torch.zeros_like(w)), or set .grad = None."),
    (None, r"only Tensors of floating point(?: and complex)? dtype can require gradients",
     lambda m: "requires_grad on an integer or bool tensor: only floating-point tensors have "
               "gradients. Convert it first (x.float(), x.to(torch.float64)) or do not ask for grad."),
    (None, r"expected np\.ndarray \(got ([\w.]+)\)",
     lambda m: f"torch.from_numpy needs an array and got {m[1]}: arithmetic on a 0-d array gives "
               "a NumPy scalar. Use torch.tensor(value), or np.asarray(value) first."),
    (None, r"Input type \((\w+)\) and (?:bias|weight) type \((\w+)\) should be the same",
     lambda m: f"the input ({m[1]}) and the layer's weights ({m[2]}) differ in dtype or device. "
               "Give the layer an input like its weights (x.to(weight.dtype)), or move the model."),
    (None, r"could not infer output dtype\. Input dtype must be either a floating point or "
           r"complex dtype\. Got: (\w+)",
     lambda m: f"mean() (or another average) of an integer tensor ({m[1]}): averages need a "
               "float tensor. Convert first (x.float()) or pass dtype=torch.float32."),
    (None, r"Cannot access accelerator device when none is available",
     lambda m: "a device was asked for and this machine has none: an integer given to "
               "torch.Generator(...) or torch.device(...) is a device index, not a seed. Seed "
               "with torch.Generator().manual_seed(seed)."),
    (None, r"Trying to backward through the graph a second time",
     lambda m: "backward() ran twice through the same recorded graph. Recompute the forward "
               "pass (the loss) before each backward()."),
    (None, r"a leaf Variable that requires grad is being used in an in-place operation",
     lambda m: "your code changed a tensor that requires grad in place (+=, -=, .add_(), "
               ".copy_()) while autograd was recording. Change parameters inside "
               "`with torch.no_grad():`."),
    (None, r"modified by an inplace operation",
     lambda m: "a tensor autograd saved for backward() was changed in place afterwards. Find "
               "the in-place operation on the line shown or after it (x += ..., .relu_(), "
               "inplace=True) and make it out of place."),
    (None, r"view size is not compatible with input tensor's size and stride",
     lambda m: "view() needs a tensor laid out in order in memory, and this one is not (it was "
               "transposed or permuted). Use reshape(), or .contiguous() before view()."),
    (None, r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)",
     lambda m: f"a view or reshape to [{m[1]}] of a tensor that holds {m[2]} numbers: the sizes "
               f"asked for must multiply to {m[2]} (one of them may be -1). Print the tensor's "
               "shape next to the shape you ask for."),
    (None, r"Dimension out of range \(expected to be in range of \[(-?\d+), (-?\d+)\], but got (-?\d+)\)",
     lambda m: f"a dim argument of {m[3]} on a tensor whose dims run from {m[1]} to {m[2]}. "
               "Print x.dim() (or x.shape) next to the dim you pass."),
    (None, r"index (-?\d+) is out of bounds for dimension (\d+) with size (\d+)",
     lambda m: f"index {m[1]} into dimension {m[2]}, which has only {m[3]} entries. Print the "
               "shape of the tensor you index on the line shown."),
    (None, r"Can't call numpy\(\) on Tensor that requires grad",
     lambda m: "numpy() on a tensor autograd records. Call .detach() first."),
    (None, r"can't convert (\S+) device type tensor to numpy",
     lambda m: f"numpy() on a tensor on {m[1]}. Call .cpu() first."),
    (None, r"only one element tensors can be converted to Python scalars|"
           r"a Tensor with (\d+) elements cannot be converted to Scalar",
     lambda m: ".item(), float() or int() on a tensor holding more than one number. Reduce it "
               "first (.sum(), .mean()) or index the one value you mean."),
    (None, r"Boolean value of Tensor with more than one (?:value|element) is ambiguous",
     lambda m: "an `if`, `and`, `or` or `not` on a tensor holding several values. Say which "
               "you mean: .any(), .all(), or compare one value."),
    (None, r"Attempted to call `?variable\.set_data\(tensor\)`?, but `?variable`? and `?tensor`? "
           r"have incompatible tensor type",
     lambda m: "an assignment to .data with a tensor of another device or kind. .data cannot "
               "move a tensor, and assigning it changes the caller's tensor too: return a new "
               "tensor made with .to(...) instead."),
    (None, r"tensors used as indices must be long, int, byte or bool tensors",
     lambda m: "a tensor of another dtype used as an index (torch.tensor([]) is float32, for "
               "instance). Index with a bool mask, or make the index with dtype=torch.long."),
    ("TypeError", r'missing \d+ required positional arguments?: "(shape|size|dims)"',
     lambda m: f"a call on the line shown got no {m[1]} at all. If it unpacks a shape with * "
               f"(x.reshape(*x.shape[1:])), an empty shape unpacks to nothing: pass the shape as "
               f"one tuple instead (x.reshape(x.shape[1:]))."),
    ("ValueError", r"training mode is expected to be boolean",
     lambda m: "model.train() takes True or False (train(False) is eval()); it got something "
               "else, often a number or a tensor passed by mistake."),
    ("TypeError", r"'[<>]=?' not supported between instances of '([^']+)' and 'NoneType'|"
                  r"'[<>]=?' not supported between instances of 'NoneType' and '([^']+)'",
     lambda m: "a comparison between a value and None on the line shown: one side is still None "
               "(a best-so-far that starts as None, or a function that returned nothing). Start "
               "it as float('inf'), or test `is None` first."),
    ("NameError", r"name '([^']+)' is not defined",
     lambda m: f"your function uses the name `{m[1]}`, which is neither defined inside it nor "
               "among the notebook's names when the check ran. Define it inside the function "
               "(or run the cell that defines it) and pass what it needs as arguments."),
    ("AttributeError", r"'NoneType' object has no attribute '([^']+)'",
     lambda m: f"a value was None where your code used .{m[1]}. Print the value on the line "
               "shown: a function without `return` gives None, and so does .grad before any "
               "backward()."),
    ("AttributeError", r"'([^']+)' object has no attribute '([^']+)'",
     lambda m: f"your code used .{m[2]} on {_a(m[1])}, which has no such attribute. Print "
               "type() of that value on the line shown."),
    ("TypeError", r"missing (\d+) required positional arguments?|takes (\d+) positional "
                  r"arguments? but (\d+) (?:was|were) given|got an unexpected keyword argument",
     lambda m: "a call on the line shown passes other arguments than the function it calls "
               "takes. Compare that call with the function's parameters."),
    ("TypeError", r"'([^']+)' object is not (callable|subscriptable|iterable)",
     lambda m: f"your code used {_a(m[1])} as if it were {_what(m[2])}. Print type() of that "
               "value on the line shown."),
    ("TypeError", r"unsupported operand type\(s\) for (\S+): '([^']+)' and '([^']+)'",
     lambda m: f"`{m[1]}` between {_a(m[2])} and {_a(m[3])}, which do not combine. Print "
               "type() of both operands on the line shown."),
    ("KeyError", r"^'?(.*?)'?$",
     lambda m: f"a lookup of the key {m[1]!r} in a dictionary that does not hold it. Print "
               "list(d) of that dictionary next to the key you look up."),
    ("ValueError", r"not enough values to unpack \(expected (\d+), got (\d+)\)|"
                   r"too many values to unpack \(expected (\d+)",
     lambda m: "unpacking a value into a number of names that differs from its number of "
               "items. Print that value (or its len()) on the line shown."),
    ("ZeroDivisionError", r"",
     lambda m: "a division by zero on the line shown. Look at what can be 0 there for the "
               "input named above (a count, a length, a sum)."),
    ("RecursionError", r"",
     lambda m: "a function that calls itself without end. Look for a call to your own "
               "function (or a method calling itself) on the line shown."),
]


def _a(kind: str) -> str:
    return f"{'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"


def _what(role: str) -> str:
    return {"callable": "a function", "subscriptable": "a sequence or dict (x[...])",
            "iterable": "a sequence (in a for loop or unpacking)"}[role]


GENERAL = (
    "run your function in a cell of its own on the input named above: the error's last line and "
    "the line of your code shown say what went wrong there."
)


# `p in params` compares a tensor with each element by ==: it broadcasts (and fails) or is
# ambiguous. Errors a membership test on tensors raises:
_MEMBERSHIP_ERRORS = ("must match the size of tensor", "Boolean value of Tensor with more than one")


def likely_cause(error_type: str, message: str, line: str | None = None) -> str:
    """What to look at for an error of type ``error_type`` with text ``message``, raised at the
    source ``line`` (when known): a line that tests a tensor's membership in a list is the
    cause of a broadcasting error there, not the shapes."""
    if line and any(text in message for text in _MEMBERSHIP_ERRORS) and _tests_membership(line):
        return (
            "`in` (and `not in`) compares a tensor with each element of the list by ==, which for "
            "tensors is element by element: it broadcasts, fails on other shapes, or cannot be "
            "one True/False. Compare identities instead: any(p is q for q in chosen), or keep "
            "the ids in a set: id(p) in chosen_ids."
        )
    for wanted_type, pattern, say in _RULES:
        if wanted_type is not None and wanted_type != error_type:
            continue
        match = re.search(pattern, message)
        if match:
            return say(match)
    return GENERAL


def _tests_membership(line: str) -> bool:
    """A `x in y` / `x not in y` test on the line (not the `in` of a `for` clause). The line
    may come as "`CODE` in FUNCTION": only the code counts, without its comment."""
    quoted = re.search(r"`(.*)`", line)
    code = (quoted.group(1) if quoted else line).split("#", 1)[0]
    code = re.sub(r"\bfor\s+[\w, ()]+\s+in\b", " ", code)  # drop each `for ... in`
    return bool(re.search(r"\bin\b", code))
