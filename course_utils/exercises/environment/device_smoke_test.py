"""E6 — device_smoke_test: on each device, allocate, compute, copy back.

Engine: applies no edges or states catalogue: the one input is a device, tried as every
spelling the task allows (a str, a torch.device, "meta" as the stand-in GPU, each accelerator),
called twice; hand-written because the verdict reads where the product ran and what was copied
back (a dispatch record), which a comparison of results cannot see.
"""

from __future__ import annotations

import torch

from course_utils.exercises.core import Exercise, Function, Raised, a_or_an, later_error
from course_utils.exercises.environment.common import CHAPTER, _cases_record
from course_utils.exercises.facts import same_values, tensor_problem, value_facts
from course_utils.exercises.messages import Message, Messages
from course_utils.exercises.running import LearnerRaised, default_device

MESSAGES = Messages("device_smoke_test", {
    "hint-1": "Factories such as torch.arange take a device= argument.",
    "hint-2": "torch.arange(1.0, 10.0, device=device).reshape(3, 3) is the matrix; `@` multiplies matrices.",
    "hint-3": "Return product.cpu(): a result is only proven usable once it is back on the CPU.",
    "passed": ("Correct: on every device tried (the CPU, a stand-in GPU, and every accelerator this "
               "machine has), the matrix was made there, multiplied there and copied back."),
    "operands-on-two-devices": "one operand is on the device and the other on the CPU: create both on `device`.",
    "cuda-written-in": (
        "the code asks for 'cuda' itself. Use the `device` argument the check passes in: it may "
        "be the CPU, a GPU, or the stand-in 'meta'."),
    "device-given-as-string": (
        "the check passes the device as a string ('cpu') as well as a torch.device; "
        "torch.device(device) turns either into a torch.device."),
    "numpy-of-device-tensor": (
        ".numpy() only works on CPU tensors, and the task asks for a tensor anyway: return "
        "product.cpu()."),
    "not-a-tensor": (
        "device_smoke_test returned {kind} (on {on}); return the tensor itself, copied back to "
        "the CPU with .cpu()."),
    "default-device-left-set": (
        "Your function left torch's default device set to {device} after the call (on {on}): "
        "every tensor the notebook creates afterwards lands there. Pass device=device to the "
        "factory, or use `with torch.device(device):`, which puts the default back when the "
        "block ends."),
    "copy-back-does-not-wait": Message(
        "Your function copies the product back from {device} with non_blocking=True (on {on}): "
        "such a copy returns before the numbers have arrived and waits for nothing, so an error "
        "of the device's work need not surface inside the smoke test, and the tensor it returns "
        "may not be filled yet. The copy back is the step that waits: return product.cpu().",
        advises=("product.cpu()",)),
    "no-copy-back": (
        "Your result is still on {device} (on {on}). The last step of the smoke test is the copy "
        "back: return product.cpu()."),
    "integer-matrix": (
        "Your result has dtype {dtype} (on {on}): torch.arange(1, 10) makes integers. Use "
        "torch.arange(1.0, 10.0) for float32."),
    "elementwise-product": (
        "These are element-wise squares (on {on}): `*` multiplies element by element. The "
        "matrix product is `@` (or torch.matmul)."),
    "transposed-product": "This is a @ a.T (on {on}); the task asks for a @ a.",
    "no-matmul": (
        "No matrix product ran during this call (on {on}): your result was worked out with "
        "{ops} instead. A smoke test is there to run the device's own matrix multiplication: "
        "compute a @ a (torch.matmul)."),
    "cached-result": (
        "No matrix product ran during this call (on {on}). The smoke test must compute a @ a on "
        "the device each time it is called: a result known in advance proves nothing about the "
        "device."),
    "computed-off-device": (
        "The matrix product ran on {ran_on}, not on {device} (on {on}): create the tensor with "
        "device=device, or move it there with .to(device), before computing."),
    "recomputed-on-cpu": (
        "Your result is on the CPU, but nothing was copied back from {device} (on {on}): the "
        "product computed there never left it. Return product.cpu()."),
})


# ============================================================================================
# E6 — on each device: allocate, compute, copy back
# ============================================================================================
def device_smoke_test(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    product = a @ a
    return product.cpu()


_MATMUL_OPS = ("mm", "matmul", "bmm", "addmm", "mv", "dot", "baddbmm", "addmv", "linear")
# What a matrix product written out by hand (a[:, :, None] * a[None], then a sum) runs instead.
_ARITHMETIC_OPS = ("mul", "sum", "add", "prod", "einsum")
# Stands in for a GPU: the check runs every answer there, so that no real GPU is needed to see
# where the work ran and whether the result came back.
_STAND_IN = "meta"
_STAND_IN_TEXT = "device='meta', the check's stand-in for a GPU"


def _device_name(device) -> str:
    """'cuda:1', 'mps:0', 'cpu', 'meta': what a tensor on that device reports."""
    import torch

    device = torch.device(device)
    if device.index is None and device.type not in ("cpu", "meta"):
        device = torch.device(device.type, 0)
    return str(device)


def _device_recorder():
    """A dispatch mode that records where matrix products ran and what was copied back, and
    that gives the stand-in device (meta, which has no memory) real numbers: every operation on
    it is also run on a CPU copy, which is what a copy back returns."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    aten = torch.ops.aten

    def is_stand_in(value):
        return isinstance(value, torch.Tensor) and value.device.type == _STAND_IN

    class DeviceRecorder(TorchDispatchMode):
        # Entering torch.compile's machinery on first use costs a second; nothing here compiles.
        _should_skip_dynamo = classmethod(lambda cls: False)

        def __init__(self):
            super().__init__()
            self.matmul_devices = set()
            self.arithmetic_ops = set()  # element-wise arithmetic and sums that ran
            self.copied_back_from = set()
            self.copied_back_without_waiting = set()  # copies back with non_blocking=True
            self.values_unknown = False
            self._shadows = {}  # id(stand-in tensor) -> (that tensor, its CPU copy)

        def _shadow(self, value):
            if is_stand_in(value):
                pair = self._shadows.get(id(value))
                if pair is None or pair[0] is not value:
                    raise LookupError
                return pair[1]
            if isinstance(value, torch.device) and value.type == _STAND_IN:
                return torch.device("cpu")
            return value

        def _remember(self, out, shadow_out):
            outs, shadows = tree_flatten(out)[0], tree_flatten(shadow_out)[0]
            for tensor, shadow in zip(outs, shadows):
                if is_stand_in(tensor) and isinstance(shadow, torch.Tensor):
                    self._shadows[id(tensor)] = (tensor, shadow)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            if func.__name__.split(".")[0] in _ARITHMETIC_OPS and tensors:
                self.arithmetic_ops.add(func.__name__.split(".")[0])
            if func.__name__.split(".")[0] in _MATMUL_OPS:
                self.matmul_devices.update(str(t.device) for t in tensors)
            target = kwargs.get("device")
            to_stand_in = target is not None and torch.device(target).type == _STAND_IN
            from_stand_in = any(is_stand_in(t) for t in tensors)
            if func in (aten._to_copy.default, aten.copy_.default):
                source = args[1] if func is aten.copy_.default else args[0]
                destination = args[0].device if func is aten.copy_.default else torch.device(target or args[0].device)
                if source.device.type != "cpu" and destination.type == "cpu":
                    self.copied_back_from.add(str(source.device))
                    waits = not (args[2] if func is aten.copy_.default and len(args) > 2
                                 else kwargs.get("non_blocking", False))
                    if not waits:
                        self.copied_back_without_waiting.add(str(source.device))
            if func is aten._local_scalar_dense.default and args[0].device.type != "cpu":
                self.copied_back_from.add(str(args[0].device))  # .item(), .tolist()
            if not (from_stand_in or to_stand_in):
                return func(*args, **kwargs)
            mixed = {t.device.type for t in tensors if t.dim() > 0}
            if len(mixed) > 1 and func not in (aten._to_copy.default, aten.copy_.default):
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but found at least two "
                    f"devices, {' and '.join(sorted(mixed))}!"
                )
            try:
                shadow_args, shadow_kwargs = tree_map(self._shadow, (args, kwargs))
            except LookupError:  # made in a way the recorder did not see: numbers unknown
                self.values_unknown = True
                return self._unknown(func, args, kwargs)
            shadow_out = func(*shadow_args, **shadow_kwargs)
            leaves = (
                func is aten._local_scalar_dense.default
                or (func is aten._to_copy.default and target is not None and not to_stand_in)
                or (func is aten.copy_.default and not is_stand_in(args[0]))
            )
            if leaves:
                return shadow_out if func is not aten.copy_.default else args[0]
            if func is aten.copy_.default or torch.Tag.inplace_view in func.tags:
                out = func(*args, **kwargs)
            elif func._schema.is_mutable:
                out = args[0]  # data changed in place: the CPU copy has it
            else:
                out = tree_map(
                    lambda s: torch.empty_strided(s.shape, s.stride(), dtype=s.dtype,
                                                  device=_STAND_IN)
                    if isinstance(s, torch.Tensor) else s,
                    shadow_out,
                )
            self._remember(out, shadow_out)
            return out

        def _unknown(self, func, args, kwargs):
            if func is aten._local_scalar_dense.default:
                return float("nan") if args[0].is_floating_point() else 0
            if (func is aten._to_copy.default and not kwargs.get("device") is None
                    and torch.device(kwargs["device"]).type != _STAND_IN):
                source = args[0]
                dtype = kwargs.get("dtype") or source.dtype
                filled = torch.full(source.shape, float("nan") if dtype.is_floating_point else 0,
                                    dtype=dtype)
                return filled.to(kwargs["device"])
            return func(*args, **kwargs)

    class StandInFactories(TorchFunctionMode):
        """torch.tensor(data, device='meta') builds its tensor below the dispatcher, where the
        recorder cannot see the numbers: build it on the CPU, then copy it over where the
        recorder sees the copy."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            device = kwargs.get("device")
            if (func in (torch.tensor, torch.as_tensor, torch.asarray) and device is not None
                    and torch.device(device).type == _STAND_IN):
                requires_grad = kwargs.get("requires_grad", False)
                on_cpu = func(*args, **dict(kwargs, device="cpu", requires_grad=False))
                return on_cpu.to(_STAND_IN).requires_grad_(requires_grad)
            return func(*args, **kwargs)

    recorder = DeviceRecorder()
    recorder.factories = StandInFactories()
    return recorder


def _smoke_test_calls():
    """(what to pass, how to name it, the device name the work must run on)."""
    import torch

    from course_utils.env import available_accelerators

    calls = [
        ("cpu", "device='cpu'", "cpu"),
        (torch.device("cpu"), "device=torch.device('cpu')", "cpu"),
        (_STAND_IN, _STAND_IN_TEXT, _STAND_IN),
        (torch.device(_STAND_IN), "device=torch.device('meta'), the check's stand-in for a GPU", _STAND_IN),
    ]
    for accelerator in available_accelerators():
        name = _device_name(accelerator)
        calls.append((torch.device(name), f"device=torch.device({name!r})", name))
    calls.append(("cpu", "device='cpu', a second call", "cpu"))
    return calls


def _probe_device_smoke_test(answer, run):
    """Each device given (by name) and what the answer did there: never the product a right
    answer gives (``_expect_device_smoke_test`` computes that, on the CPU, on the judge's side:
    the matrix is fixed and the right result is the same on every device)."""
    import torch

    cases = []
    record = {"cases": cases}
    for device, on, name in _smoke_test_calls():
        context_before = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        default_before = default_device()
        recorder = _device_recorder()
        try:
            with recorder.factories, recorder:
                got = run(answer, device, on=on)
            facts = value_facts(got)
        except LearnerRaised as raised:
            # The judge decides: a mistake the earlier calls already show is the one to report,
            # not the error a later device led to.
            record["raised"] = later_error(raised, answer, cases)
            break
        finally:
            default_after = default_device()
            if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not context_before:
                # torch.set_default_device inside the answer: put the learner's default back
                torch.set_default_device(None if context_before is None else context_before.device)
        cases.append(
            {
                "device": name,
                "on": on,
                "got": facts,
                "matmul_devices": sorted(recorder.matmul_devices),
                "arithmetic_ops": sorted(recorder.arithmetic_ops),
                "copied_back_from": sorted(recorder.copied_back_from),
                "copied_back_without_waiting": sorted(recorder.copied_back_without_waiting),
                "values_unknown": recorder.values_unknown,
                "default_device_after": _device_name(default_after),
                "default_device_before": _device_name(default_before),
            }
        )
    return record


def _expect_device_smoke_test(record):
    """What the reference gives (run on the CPU: a right answer copies its product back there),
    and the classic mistakes' results (a * a, a @ a.T), for every case."""
    import torch

    a = torch.arange(1.0, 10.0, device="cpu").reshape(3, 3)
    expected = value_facts(device_smoke_test.reference("cpu"))
    elementwise, transposed = (a * a).numpy().copy(), (a @ a.T).numpy().copy()
    record = _cases_record(record)
    for case in record["cases"]:
        case.update(expected=dict(expected), elementwise=elementwise.copy(), transposed=transposed.copy())
    return record


def _judge_device_smoke_test(record):
    record = _cases_record(record)
    cases = record["cases"]
    for case in cases:
        got, expected, device, on = case["got"], case["expected"], case["device"], case["on"]
        if got["kind"] in ("list", "numpy.ndarray", "float", "tuple"):
            return MESSAGES("not-a-tensor", kind=a_or_an(got["kind"]), on=on)
        if got["kind"] != "tensor":
            return tensor_problem(got, expected, what="your result", on=on)
        if case["default_device_after"] != case["default_device_before"]:
            return MESSAGES("default-device-left-set", device=case["default_device_after"], on=on)
        if got["device"] != "cpu":
            return MESSAGES("no-copy-back", device=got["device"], on=on)
        if got["dtype"].startswith(("torch.int", "torch.uint")):
            return MESSAGES("integer-matrix", dtype=got["dtype"], on=on)
        if got["shape"] == [3, 3] and "values" in got and not case["values_unknown"]:
            if same_values(got["values"], case["elementwise"]):
                return MESSAGES("elementwise-product", on=on)
            if same_values(got["values"], case["transposed"]):
                return MESSAGES("transposed-product", on=on)
        ran_on = case["matmul_devices"]
        if not ran_on and case.get("arithmetic_ops"):
            return MESSAGES("no-matmul", on=on, ops=", ".join(case["arithmetic_ops"]))
        if not ran_on:
            return MESSAGES("cached-result", on=on)
        if device not in ran_on:
            return MESSAGES("computed-off-device", ran_on=", ".join(ran_on), device=device, on=on)
        if device != "cpu" and device not in case["copied_back_from"]:
            return MESSAGES("recomputed-on-cpu", device=device, on=on)
        if device in case.get("copied_back_without_waiting", ()) and \
                set(case["copied_back_from"]) <= set(case["copied_back_without_waiting"]):
            return MESSAGES("copy-back-does-not-wait", device=device, on=on)
        if case["values_unknown"]:
            expected = {key: value for key, value in expected.items() if key != "values"}
        problem = tensor_problem(got, expected, what="your result", on=on)
        if problem:
            return problem
    if record.get("raised"):
        return Raised(record["raised"])
    return None


device_smoke_test = Exercise(
    "device_smoke_test",
    chapter=CHAPTER,
    title="Allocate, compute and copy back on a device",
    expects=Function("device_smoke_test", ("device",),
                     returns="a 3×3 float32 tensor on the CPU: the product computed on `device`"),
    probe=_probe_device_smoke_test,
    expect=_expect_device_smoke_test,
    judge=_judge_device_smoke_test,
    reference=device_smoke_test,
    passed_message=MESSAGES.text("passed"),
    hints=MESSAGES.hints(),
    error_notes=MESSAGES.notes({
        "operands-on-two-devices": "Expected all tensors to be on the same device",
        "cuda-written-in": "Torch not compiled with CUDA enabled",
        "device-given-as-string": "'str' object has no attribute",
        "numpy-of-device-tensor": "to numpy",
    }),
    messages=MESSAGES,
)
