"""Chapter 00's device_smoke_test (E6): its catalogue of answers, and what only a record shows."""

import numpy as np
import pytest
import torch

from course_utils.exercises import environment as ex
from course_utils.exercises.core import Outcome, ProbeResult, Status
from exercise_catalogue import EDGE, STATEFUL, Catalogue, right, wrong


# ============================================================================================
# device_smoke_test (E6)
# ============================================================================================
def smoke_moved_there(device):
    a = torch.arange(1, 10, dtype=torch.float32).view(3, 3).to(device)
    return torch.matmul(a, a).to("cpu")


def smoke_default_device_block(device):
    with torch.device(device):
        a = torch.arange(1.0, 10.0).reshape(3, 3)
        product = torch.mm(a, a)
    return product.cpu()


def smoke_einsum(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to(torch.device(device))
    return torch.einsum("ij,jk->ik", a, a).to(torch.device("cpu"))


def smoke_written_matrix(device):
    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device)
    return torch.linalg.matrix_power(a, 2).detach().cpu()


def smoke_back_through_a_list(device):
    with torch.device(device):
        a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        product = a @ a
    return torch.tensor(product.tolist())


def smoke_elementwise(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a * a).cpu()


def smoke_integers(device):
    a = torch.arange(1, 10, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_as_list(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).tolist()


def smoke_ignores_device(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).cpu()


def smoke_moves_after_computing(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).to(device).cpu()


def smoke_stays_there(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return a @ a


def smoke_names_cuda(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to("cuda")
    return (a @ a).cpu()


_kept_product = []


def smoke_keeps_the_first_product(device):
    if not _kept_product:
        a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
        _kept_product.append((a @ a).cpu())
    return _kept_product[0]


def smoke_sets_the_default_device(device):
    torch.set_default_device(device)
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a @ a).cpu()


def smoke_only_named_gpus(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    if device in ("cuda", "mps"):
        a = a.to(device)
    return (a @ a).cpu()


def smoke_device_type_attribute(device):
    a = torch.arange(1.0, 10.0, device=device.type).reshape(3, 3)
    return (a @ a).cpu()


def smoke_through_numpy(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.from_numpy((a @ a).numpy())


if torch.cuda.is_available():  # on a GPU machine the same mistake runs, on the wrong device
    _NAMES_CUDA = wrong("names 'cuda' itself", smoke_names_cuda, "ran on cuda:0, not on cpu", kind=EDGE)
else:
    _NAMES_CUDA = wrong("names 'cuda' itself", smoke_names_cuda, "Torch not compiled with CUDA enabled",
                        "Likely cause: the code asks for 'cuda' itself", kind=EDGE, outcome=Outcome.RAISED)

def smoke_bmm_on_a_batch_of_one(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(1, 3, 3)
    return torch.bmm(a, a)[0].cpu()


def smoke_device_as_text(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3).to(str(device))
    return (a @ a).to("cpu")


def smoke_transposed(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.mm(a, a.T).cpu()


def smoke_float64(device):
    a = torch.arange(1.0, 10.0, device=device, dtype=torch.float64).reshape(3, 3)
    return (a @ a).cpu()


def smoke_recomputes_on_the_cpu(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    a @ a
    b = torch.arange(1.0, 10.0).reshape(3, 3)
    return b @ b


def smoke_product_by_broadcasting(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a[:, :, None] * a[None, :, :]).sum(1).cpu()


# -- round 3 of outside testing ---------------------------------------------------------------
def smoke_with_linspace(device):
    a = torch.linspace(1, 9, 9, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_with_the_matrix_written_out(device):
    a = torch.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], device=device)
    return (a @ a).to("cpu")


def smoke_cubes_the_matrix(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return torch.linalg.matrix_power(a, 3).cpu()


# -- issue 45, fresh round (from the task text) ------------------------------------------
def smoke_returns_true(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    product = (a @ a).cpu()
    return bool(product.shape == (3, 3))


def smoke_sum(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).sum().cpu()


def smoke_with_the_device_name(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).cpu(), str(device)


def smoke_moves_one_operand(device):
    a = torch.arange(1.0, 10.0).reshape(3, 3)
    return (a.to(device) @ a).cpu()


def smoke_doubles(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a + a).cpu()


def smoke_as_numpy(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).cpu().numpy()


def smoke_from_zero(device):
    a = torch.arange(0.0, 9.0, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_flat(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).cpu().reshape(9)


def smoke_arange_stops_early(device):
    a = torch.arange(1.0, 9.0, device=device).reshape(3, 3)
    return (a @ a).cpu()


def smoke_transposes_the_result(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).cpu().T


def smoke_linalg_matmul(device):
    a = torch.arange(9, dtype=torch.float32, device=device).add(1).view(3, 3)
    return torch.linalg.matmul(a, a).to("cpu")


# -- issue 45, second fresh round (from the task text) ------------------------------------
def smoke_non_blocking_copy_back(device):
    a = torch.arange(1.0, 10.0, device=device).reshape(3, 3)
    return (a @ a).to("cpu", non_blocking=True)


CATALOGUE = Catalogue({
    ex.device_smoke_test: [
        wrong("matrix product written out with broadcasting", smoke_product_by_broadcasting,
              "No matrix product ran during this call", "worked out with mul, sum", "a @ a", kind=EDGE),
        right("torch.bmm on a batch of one", smoke_bmm_on_a_batch_of_one),
        right("the device as text, str(device)", smoke_device_as_text),
        wrong("a @ a.T", smoke_transposed, "This is a @ a.T"),
        wrong("float64 matrix", smoke_float64, "dtype torch.float64; expected torch.float32"),
        wrong("returns a CPU recomputation", smoke_recomputes_on_the_cpu, "nothing was copied back from meta",
              kind=EDGE),
        right("arange with dtype, .to(device), torch.matmul, .to('cpu')", smoke_moved_there),
        right("with torch.device(device): and torch.mm", smoke_default_device_block),
        right("einsum and torch.device objects", smoke_einsum),
        right("the matrix written out, matrix_power", smoke_written_matrix),
        right("torch.tensor in a device block, back through .tolist()", smoke_back_through_a_list),
        wrong("element-wise product", smoke_elementwise, "element-wise squares", "`@`"),
        wrong("integer matrix", smoke_integers, "dtype torch.int64", "torch.arange(1.0, 10.0)"),
        wrong("returns a list", smoke_as_list, "returned a list"),
        wrong("ignores the device", smoke_ignores_device, "ran on cpu, not on meta", "device=device"),
        wrong("moves after computing", smoke_moves_after_computing, "ran on cpu, not on meta"),
        wrong("forgets the copy back", smoke_stays_there, "still on meta", "product.cpu()"),
        _NAMES_CUDA,
        wrong("keeps the first product", smoke_keeps_the_first_product, "No matrix product ran during this call",
              kind=STATEFUL),
        wrong("set_default_device left behind", smoke_sets_the_default_device,
              "left torch's default device set to meta", "with torch.device(device):", kind=STATEFUL),
        wrong("moves only for the names 'cuda' and 'mps'", smoke_only_named_gpus,
              "ran on cpu, not on meta", kind=EDGE),
        wrong("expects a torch.device", smoke_device_type_attribute, "AttributeError",
              "Likely cause: the check passes the device as a string", kind=EDGE, outcome=Outcome.RAISED),
        wrong("copies back through NumPy", smoke_through_numpy, "to numpy", "Likely cause: .numpy() only works on CPU",
              kind=EDGE, outcome=Outcome.RAISED),
        # -- round 3 of outside testing
        right("torch.linspace", smoke_with_linspace),
        right("the matrix as a literal on the device", smoke_with_the_matrix_written_out),
        wrong("a @ a @ a", smoke_cubes_the_matrix, "right shape but wrong values"),
        # -- issue 45, fresh round (from the task text) --

        wrong("returns True when the shape is right", smoke_returns_true, "is a bool", "expected a torch.Tensor"),
        wrong("returns the product's sum", smoke_sum, "has shape (); expected (3, 3)"),
        wrong("returns the product and the device's name", smoke_with_the_device_name, "returned a tuple"),
        wrong("moves only one operand", smoke_moves_one_operand, "Expected all tensors to be on the same device",
              "Likely cause:", kind=EDGE, outcome=Outcome.RAISED),
        wrong("a + a", smoke_doubles, "worked out with add"),
        wrong("returns a NumPy array", smoke_as_numpy, "returned a numpy.ndarray"),
        wrong("arange from 0", smoke_from_zero, "right shape but wrong values"),
        wrong("returns nine numbers in a row", smoke_flat, "has shape (9,); expected (3, 3)"),
        wrong("arange(1.0, 9.0)", smoke_arange_stops_early, "invalid for input of size 8", "Likely cause:",
              outcome=Outcome.RAISED),
        wrong("returns the product transposed", smoke_transposes_the_result, "right shape but wrong values"),
        right("arange(9) + 1, .view, torch.linalg.matmul, .to('cpu')", smoke_linalg_matmul),
        # -- issue 45, second fresh round (from the task text) --
        wrong("copies back with non_blocking=True", smoke_non_blocking_copy_back, "non_blocking=True",
              "waits for nothing", "return product.cpu()", kind=EDGE),
    ],
})


@pytest.mark.parametrize("case", CATALOGUE.cases, ids=str)
def test_catalogue(case):
    case.assert_holds()


# -- what only a record shows ------------------------------------------------------------------
def _device_record(got_device="cpu", matmul_devices=("cuda:0",), device="cuda:0", copied_back=("cuda:0",)):
    a = np.arange(1.0, 10.0, dtype=np.float32).reshape(3, 3)
    tensor = {"kind": "tensor", "shape": [3, 3], "dtype": "torch.float32", "requires_grad": False}
    return [
        {
            "device": device,
            "on": f"device={device!r}",
            "got": dict(tensor, device=got_device, values=a @ a),
            "matmul_devices": list(matmul_devices),
            "copied_back_from": list(copied_back),
            "values_unknown": False,
            "default_device_after": "cpu",
            "default_device_before": "cpu",
            "expected": dict(tensor, device="cpu", values=a @ a),
            "elementwise": a * a,
            "transposed": a @ a.T,
        }
    ]


def test_device_smoke_test_mistakes_only_a_gpu_shows_are_judged_from_the_record():
    """On a CPU-only runner these can only be produced as records, which is what the judge reads."""
    judge = ex.device_smoke_test.judge
    right_record = judge(ProbeResult(Status.OK, _device_record()))
    assert right_record.passed
    stayed = judge(ProbeResult(Status.OK, _device_record(got_device="cuda:0")))
    assert "still on cuda:0" in stayed.message and ".cpu()" in stayed.message
    ignored = judge(ProbeResult(Status.OK, _device_record(matmul_devices=("cpu",))))
    assert "ran on cpu, not on cuda:0" in ignored.message
    by_type_only = judge(ProbeResult(Status.OK, _device_record(device="cuda:1")))
    assert "ran on cuda:0, not on cuda:1" in by_type_only.message


def test_device_smoke_test_leaves_the_default_device_as_it_was():
    before = torch.get_default_device()
    verdict = ex.device_smoke_test.verdict(smoke_sets_the_default_device)
    assert not verdict.passed
    assert torch.get_default_device() == before
    assert torch.arange(1.0).device.type == "cpu"
