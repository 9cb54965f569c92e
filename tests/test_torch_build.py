"""Set-up picks the torch build for the hardware, checks the index has it, and falls back to PyPI."""

import urllib.error

import pytest

from course_utils import torch_build
from course_utils.nvidia_smi import NvidiaSmiInfo
from course_utils.torch_build import Machine, plan, resolve

LAPTOP = Machine("Linux", "x86_64", "cp311")
OLD_DRIVER = Machine(
    "Linux", "x86_64", "cp311", NvidiaSmiInfo(("NVIDIA GeForce RTX 3060",), "535.54", "12.2")
)
NEW_DRIVER = Machine("Linux", "x86_64", "cp312", NvidiaSmiInfo(("NVIDIA H200",), "580.65", "13.0"))
AMD = Machine("Linux", "x86_64", "cp311", amd_gpu=True)
MAC = Machine("Darwin", "arm64", "cp313")


def index_pages(pages):
    """A fake index: {url: page text}; a missing url answers 404, as the real one does."""

    def fetch(url):
        if url not in pages:
            raise urllib.error.HTTPError(url, 404, "Not Found", None, None)
        return pages[url]

    return fetch


def offline(url):
    raise urllib.error.URLError("[Errno -2] Name or service not known")


def listing(*wheels):
    return "".join(f'<a href="/whl/{w.replace("+", "%2B")}">{w}</a>\n' for w in wheels)


def test_a_linux_laptop_without_nvidia_driver_gets_the_cpu_build():
    chosen = plan(LAPTOP)
    assert chosen.kind == "cpu"
    assert chosen.indexes == ["https://download.pytorch.org/whl/cpu"]
    assert "no NVIDIA driver" in chosen.reason and "no AMD GPU" in chosen.reason
    fetch = index_pages({
        "https://download.pytorch.org/whl/cpu/torch/": listing(
            "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
        )
    })
    resolution = resolve(chosen, "2.13.0", LAPTOP, fetch)
    assert resolution.index == "https://download.pytorch.org/whl/cpu"
    assert "CPU-only" in resolution.message


def test_a_driver_gets_the_newest_cuda_build_it_supports():
    chosen = plan(OLD_DRIVER)
    assert chosen.kind == "cuda"
    assert [url.rsplit("/", 1)[1] for url in chosen.indexes] == ["cu121", "cu118"]
    assert "CUDA up to 12.2" in chosen.reason
    # cu121 lacks this release: the next one down that has it is chosen.
    fetch = index_pages({
        "https://download.pytorch.org/whl/cu121/torch/": listing(
            "torch-2.5.1+cu121-cp311-cp311-linux_x86_64.whl"
        ),
        "https://download.pytorch.org/whl/cu118/torch/": listing(
            "torch-2.13.0+cu118-cp311-cp311-manylinux_2_28_x86_64.whl"
        ),
    })
    assert resolve(chosen, "2.13.0", OLD_DRIVER, fetch).index.endswith("/cu118")


def test_a_new_driver_may_take_the_newest_build():
    tags = [url.rsplit("/", 1)[1] for url in plan(NEW_DRIVER).indexes]
    assert tags[0] == "cu130"
    fetch = index_pages({
        "https://download.pytorch.org/whl/cu130/torch/": listing(
            "torch-2.13.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
        )
    })
    assert resolve(plan(NEW_DRIVER), "2.13.0", NEW_DRIVER, fetch).index.endswith("/cu130")


def test_the_wheel_must_be_for_this_python_and_platform():
    fetch = index_pages({
        "https://download.pytorch.org/whl/cpu/torch/": listing(
            "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",  # another Python
            "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_aarch64.whl",  # another machine
            "torch-2.13.1+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",  # another version
        )
    })
    resolution = resolve(plan(LAPTOP), "2.13.0", LAPTOP, fetch)
    assert resolution.index is None
    assert "no CPU build of torch 2.13.0 for cp311 on x86_64" in resolution.message
    assert "PyPI" in resolution.message


def test_an_unreachable_index_falls_back_to_pypi_and_says_so():
    calls = []

    def fetch(url):
        calls.append(url)
        return offline(url)

    resolution = resolve(plan(OLD_DRIVER), "2.13.0", OLD_DRIVER, fetch)
    assert resolution.index is None
    assert "cannot be reached" in resolution.message
    assert "installing from the default index (PyPI) instead" in resolution.message
    assert "CUDA build of a few GB" in resolution.message
    assert len(calls) == 1, "an unreachable host is asked once, not once per CUDA version"


def test_amd_gpus_get_a_rocm_build():
    chosen = plan(AMD)
    assert chosen.kind == "rocm"
    assert all("/rocm" in url for url in chosen.indexes)


def test_macs_and_other_systems_use_pypi():
    assert plan(MAC).kind == "pypi" and plan(MAC).indexes == []
    assert "MPS" in resolve(plan(MAC), "2.13.0", MAC, offline).message
    assert plan(Machine("Windows", "AMD64", "cp311")).kind == "pypi"


@pytest.mark.parametrize("choice, kind", [("cpu", "cpu"), ("CUDA", "cuda"), ("rocm", "rocm"),
                                          ("pypi", "pypi")])
def test_the_learner_overrides_the_choice(choice, kind):
    chosen = plan(OLD_DRIVER, choice=choice)
    assert chosen.kind == kind
    if kind != "pypi":
        assert chosen.indexes
    assert "COURSE_TORCH" in chosen.reason


def test_cuda_override_without_a_driver_tries_every_cuda_build():
    assert len(plan(LAPTOP, choice="cuda").indexes) == len(torch_build.CUDA_BUILDS)


def test_an_index_url_wins_over_everything():
    chosen = plan(OLD_DRIVER, choice="cpu", index_url="https://example.invalid/simple")
    assert chosen.kind == "index" and chosen.indexes == ["https://example.invalid/simple"]
    resolution = resolve(chosen, "2.13.0", OLD_DRIVER, offline)
    assert resolution.index == "https://example.invalid/simple"


def test_an_unknown_choice_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="cpu, cuda, rocm, pypi"):
        plan(LAPTOP, choice="gpu")


def test_the_stamp_key_holds_the_overrides_only():
    assert torch_build.key({}) == torch_build.key({"UNRELATED": "1"})
    assert torch_build.key({"COURSE_TORCH": "cpu"}) != torch_build.key({})
    assert torch_build.key({"TORCH_INDEX_URL": "x"}) != torch_build.key({})


def test_install_keeps_a_working_torch_unless_told_otherwise(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(torch_build.subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(torch_build, "detect", lambda: LAPTOP)
    monkeypatch.setattr(torch_build, "installed_build", lambda: "pypi")
    assert torch_build.install("torch==2.13.0", env={}) == 0
    assert ran == [] and capsys.readouterr().out == ""


def test_install_falls_back_to_pypi_on_this_offline_machine(monkeypatch, capsys):
    commands = []

    class Done:
        returncode = 0

    def run(command, **kwargs):
        commands.append(command)
        return Done()

    monkeypatch.setattr(torch_build.subprocess, "run", run)
    monkeypatch.setattr(torch_build, "detect", lambda: LAPTOP)
    monkeypatch.setattr(torch_build, "installed_build", lambda: None)
    monkeypatch.setattr(torch_build, "fetch_page", offline)
    assert torch_build.install("torch==2.13.0", env={}) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 2, out  # what was chosen and why, then how to override it
    assert "wants the CPU build" in out and "PyPI" in out and "COURSE_TORCH" in out
    assert commands == [[torch_build.sys.executable, "-m", "pip", "install", "torch==2.13.0"]]


def test_an_explicit_override_replaces_a_torch_of_another_build(monkeypatch, capsys):
    commands = []

    class Done:
        returncode = 0

    monkeypatch.setattr(torch_build.subprocess, "run",
                        lambda command, **k: commands.append(command) or Done())
    monkeypatch.setattr(torch_build, "detect", lambda: OLD_DRIVER)
    monkeypatch.setattr(torch_build, "installed_build", lambda: "pypi")
    monkeypatch.setattr(torch_build, "fetch_page", offline)
    torch_build.install("torch==2.13.0", env={"COURSE_TORCH": "cpu"})
    assert commands[0][-4:] == ["uninstall", "--yes", "--quiet", "torch"]
    assert commands[1][-1] == "torch==2.13.0"
    assert "wants the CPU build" in capsys.readouterr().out


INTEL_MAC = Machine("Darwin", "x86_64", "cp311")


def test_an_intel_mac_is_told_why_before_pip_fails(monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(torch_build.subprocess, "run", lambda *a, **k: ran.append(a))
    monkeypatch.setattr(torch_build, "detect", lambda: INTEL_MAC)
    monkeypatch.setattr(torch_build, "installed_build", lambda: None)
    assert torch_build.install("torch==2.13.0", env={}) == 2
    said = capsys.readouterr().err
    assert ran == []  # pip is not asked: it would only say "no matching distribution"
    assert "no build for Intel Macs" in said and "2.2.2" in said and "Rosetta" in said and "Colab" in said
    assert "conda-forge" in said and "With conda" in said  # the route the README's conda section takes
    assert torch_build.intel_mac_problem(MAC, "2.13.0") is None  # Apple silicon: fine
    assert torch_build.intel_mac_problem(INTEL_MAC, "2.2.2") is None
