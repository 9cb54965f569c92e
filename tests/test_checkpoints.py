"""course_utils.checkpoints: atomic saves, RNG states that load with weights_only, checkpoints."""

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from course_utils import checkpoints


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models train many times faster on one thread, above all on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_save_atomically_writes_a_loadable_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "weights.pt"
    checkpoints.save_atomically({"w": torch.arange(3.0)}, path)
    checkpoints.save_atomically({"w": torch.arange(4.0)}, path)  # replaces the first
    assert torch.equal(torch.load(path, weights_only=True)["w"], torch.arange(4.0))
    assert [p.name for p in tmp_path.iterdir()] == ["weights.pt"]


def test_an_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    checkpoints.save_atomically({"epoch": 1}, path)
    real_save = torch.save

    def half_then_crash(obj, file):
        real_save(obj, file)
        file.seek(0)
        file.truncate(10)
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(torch, "save", half_then_crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save_atomically({"epoch": 2}, path)
    monkeypatch.setattr(torch, "save", real_save)
    assert torch.load(path, weights_only=True) == {"epoch": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_rng_state_loads_with_weights_only_and_restores_every_generator(tmp_path):
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    np.random.standard_normal()  # leaves a cached gauss in NumPy's state
    path = tmp_path / "rng.pt"
    checkpoints.save_atomically(checkpoints.rng_state(), path)
    expected = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    checkpoints.restore_rng_state(torch.load(path, weights_only=True))
    got = (random.random(), np.random.standard_normal(), np.random.rand(), torch.rand(2))
    assert got[:3] == expected[:3]
    assert torch.equal(got[3], expected[3])


def test_save_checkpoint_holds_everything_and_loads_with_weights_only(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    path = checkpoints.save_checkpoint(tmp_path / "c.pt", 3, model, optimizer, scheduler, scaler)
    loaded = torch.load(path, weights_only=True)
    assert set(loaded) == {"epoch", "model", "optimizer", "scheduler", "scaler", "rng"}
    assert loaded["epoch"] == 3
    assert loaded["scaler"] == {}
    assert loaded["scheduler"]["last_epoch"] == 1
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    fresh.load_state_dict(loaded["model"])
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)


# -- parts a run does not have ---------------------------------------------------------------
def _trained_parts():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_save_checkpoint_takes_none_for_a_scheduler_or_scaler_the_run_does_not_have(tmp_path):
    model, optimizer = _trained_parts()
    path = checkpoints.save_checkpoint(tmp_path / "c.pt", 0, model, optimizer)
    loaded = torch.load(path, weights_only=True)
    assert loaded["scheduler"] is None and loaded["scaler"] is None
    path = checkpoints.save_checkpoint(tmp_path / "c.pt", 0, model, optimizer, None, None)
    assert torch.load(path, weights_only=True)["scaler"] is None


def test_load_checkpoint_restores_what_was_saved_and_takes_none_likewise(tmp_path):
    model, optimizer = _trained_parts()
    checkpoints.save_checkpoint(tmp_path / "c.pt", 4, model, optimizer)
    expected = torch.rand(3)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.2), nn.Linear(4, 2))
    fresh_optimizer = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    assert checkpoints.load_checkpoint(tmp_path / "c.pt", fresh, fresh_optimizer, None, None) == 5
    assert torch.equal(torch.rand(3), expected)  # the generators are back where they were saved
    for a, b in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)
    assert fresh_optimizer.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()


def test_load_checkpoint_says_which_part_is_missing_on_which_side(tmp_path):
    model, optimizer = _trained_parts()
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    checkpoints.save_checkpoint(tmp_path / "without.pt", 0, model, optimizer)
    checkpoints.save_checkpoint(tmp_path / "with.pt", 0, model, optimizer, scheduler)
    with pytest.raises(ValueError, match=r"holds no scheduler state.*saved with scheduler=None"):
        checkpoints.load_checkpoint(tmp_path / "without.pt", model, optimizer, scheduler)
    with pytest.raises(ValueError, match=r"holds the scheduler's state.*no scheduler was given"):
        checkpoints.load_checkpoint(tmp_path / "with.pt", model, optimizer)


# -- a save into a folder that does not exist ------------------------------------------------
def test_a_save_into_a_missing_folder_names_the_target_and_the_folder_not_a_temporary(tmp_path):
    target = tmp_path / "runs" / "today" / "checkpoint.pt"
    with pytest.raises(FileNotFoundError) as caught:
        checkpoints.save_atomically({"epoch": 1}, target)
    message = str(caught.value)
    assert str(target) in message
    assert f"the folder {target.parent} does not exist" in message
    assert ".tmp" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_save_that_cannot_create_its_temporary_file_names_the_target(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    target = tmp_path / "a_file" / "checkpoint.pt"
    with pytest.raises(NotADirectoryError) as caught:
        checkpoints.save_atomically({"epoch": 1}, target)
    assert str(target) in str(caught.value) and ".tmp" not in str(caught.value)


# -- loaders that hold their own generator ---------------------------------------------------
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset  # noqa: E402

_X = torch.randn(40, 3, generator=torch.Generator().manual_seed(3))
_Y = torch.randint(0, 2, (40,), generator=torch.Generator().manual_seed(4))


def _loaders():
    """Each way a learner gives a DataLoader its own generator, built fresh (as a new process would)."""
    data = TensorDataset(_X, _Y)
    return {
        "loader's generator": DataLoader(
            data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0)),
        "sampler's generator": DataLoader(
            data, batch_size=8, sampler=RandomSampler(data, generator=torch.Generator().manual_seed(0))),
        "batch sampler's sampler's generator": DataLoader(data, batch_sampler=BatchSampler(
            RandomSampler(data, generator=torch.Generator().manual_seed(0)), batch_size=8, drop_last=False)),
        "two generators": DataLoader(
            data, sampler=RandomSampler(data, generator=torch.Generator().manual_seed(0)),
            batch_size=8, generator=torch.Generator().manual_seed(1)),
    }


def _make_run(loader):
    model = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.3), nn.Linear(8, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    return model, optimizer, None, None, loader


def _train_epoch(model, optimizer, scheduler, scaler, loader):
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _same_weights(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def _interrupted(kind, path, save_loader):
    """2 epochs, a checkpoint, a 'new process' (other seed, fresh objects), 2 more epochs."""
    torch.manual_seed(0)
    parts = _make_run(_loaders()[kind])
    for _ in range(2):
        _train_epoch(*parts)
    saved = parts if save_loader else parts[:4]
    checkpoints.save_checkpoint(path, 1, *saved)
    torch.manual_seed(99)
    parts = _make_run(_loaders()[kind])
    given = parts if save_loader else parts[:4]
    start = checkpoints.load_checkpoint(path, *given)
    for _ in range(start, 4):
        _train_epoch(*parts)
    return parts[0]


@pytest.mark.parametrize("kind", list(_loaders()))
def test_a_checkpoint_resumes_a_loader_with_its_own_generator_bit_for_bit(tmp_path, kind):
    torch.manual_seed(0)
    parts = _make_run(_loaders()[kind])
    for _ in range(4):
        _train_epoch(*parts)
    straight = parts[0]
    assert not _same_weights(_interrupted(kind, tmp_path / "c.pt", save_loader=False), straight)
    assert _same_weights(_interrupted(kind, tmp_path / "c.pt", save_loader=True), straight)


def test_the_loader_state_loads_with_weights_only_and_names_where_each_generator_sits(tmp_path):
    loaders = _loaders()
    path = checkpoints.save_atomically(checkpoints.rng_state(list(loaders.values())), tmp_path / "rng.pt")
    saved = torch.load(path, weights_only=True)["loaders"]
    assert [list(state) for state in saved] == [
        ["generator = sampler.generator"],
        ["sampler.generator"],
        ["batch_sampler.sampler.generator"],
        ["generator", "sampler.generator"],
    ]
    assert all(s.dtype == torch.uint8 for state in saved for s in state.values())


def test_a_restored_loader_hands_its_workers_the_seeds_of_the_run_it_continues():
    # The loader draws the base seed of its worker processes from its generator when an epoch
    # starts (also with num_workers=0, where no worker uses it); a resumed run must draw the same.
    loader = _loaders()["loader's generator"]
    list(loader)
    state = checkpoints.rng_state(loader)
    expected = iter(loader)._base_seed
    again = _loaders()["loader's generator"]
    checkpoints.restore_rng_state(state, again)
    assert iter(again)._base_seed == expected


def test_restoring_without_the_loader_warns_and_a_loader_the_state_lacks_is_refused():
    state = checkpoints.rng_state(_loaders()["loader's generator"])
    with pytest.warns(UserWarning, match=r"generator = sampler\.generator.*restore_rng_state\(state, loader\)"):
        checkpoints.restore_rng_state(state)
    without = checkpoints.rng_state()
    with pytest.raises(ValueError, match=r"no state for this loader's generator.*rng_state\(loader\)"):
        checkpoints.restore_rng_state(without, _loaders()["loader's generator"])
    with pytest.raises(ValueError, match=r"sampler\.generator.*batch_sampler\.sampler\.generator"):
        checkpoints.restore_rng_state(checkpoints.rng_state(_loaders()["sampler's generator"]),
                                      _loaders()["batch sampler's sampler's generator"])
    # A loader that draws only from the global generators has nothing of its own to restore.
    plain = DataLoader(TensorDataset(_X), batch_size=8, shuffle=True)
    checkpoints.restore_rng_state(without, plain)
    with pytest.raises(TypeError, match="DataLoader"):
        checkpoints.rng_state(TensorDataset(_X))


class _NumpySampler(torch.utils.data.Sampler):
    """A custom sampler with its own NumPy generator: nothing a checkpoint can save."""

    def __init__(self, n):
        self.n, self.rng = n, np.random.default_rng(0)

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(self.rng.permutation(self.n).tolist())


def test_what_the_checkpoint_cannot_save_is_said_when_saving(tmp_path):
    data = TensorDataset(_X, _Y)
    custom = DataLoader(data, batch_size=8, sampler=_NumpySampler(len(data)))
    with pytest.warns(UserWarning, match=r"sampler\.rng \(numpy\.random\._generator\.Generator\)"):
        checkpoints.save_checkpoint(tmp_path / "c.pt", 0, *_make_run(custom))
    holding = type("Jittered", (TensorDataset,), {})(_X, _Y)
    holding.rng = random.Random(0)
    with pytest.warns(UserWarning, match=r"dataset\.rng \(random\.Random\)"):
        checkpoints.rng_state(DataLoader(holding, batch_size=8))
    persistent = DataLoader(data, batch_size=8, shuffle=True, num_workers=1, persistent_workers=True,
                            generator=torch.Generator().manual_seed(0))
    with pytest.warns(UserWarning, match="persistent_workers=True"):
        checkpoints.rng_state(persistent)


# -- chapter 07 leaves no files behind -------------------------------------------------------
def test_chapter_07_removes_its_folder_when_the_kernel_shuts_down_before_the_last_cell(tmp_path):
    # A learner who stops half-way: the chapter's first cell, one file written, then the kernel
    # shuts down (closing the notebook, restarting the kernel). The last cell, which removes the
    # folder on a Run All, never ran; the notebook's run in the tests checks that one.
    import nbclient
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    chapter = nbformat.read(Path(__file__).resolve().parents[1] / "solutions" / "07_reliable_practice.ipynb", as_version=4)
    setup = next(cell.source for cell in chapter.cells if cell.cell_type == "code")
    assert "WORK =" in setup
    nb = new_notebook(cells=[
        new_code_cell(setup),
        new_code_cell('torch.save({"epoch": 0}, WORK / "checkpoint.pt")\nprint(WORK)'),
    ])
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()  # shuts its kernel down as Jupyter does: asks, and waits for it to exit
    work = Path(nb.cells[1].outputs[0].text.strip())
    assert work.name.startswith("course07-")
    assert not work.exists(), f"{work} is still there after the kernel shut down"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_random_numbers_continue_after_a_restore():
    torch.manual_seed(3)
    torch.rand(2, device="cuda")
    state = checkpoints.rng_state()
    expected = torch.rand(4, device="cuda")
    torch.rand(100, device="cuda")  # the generator moves on
    checkpoints.restore_rng_state(state)
    assert torch.equal(torch.rand(4, device="cuda"), expected)


def test_a_run_without_an_optimizer_saves_and_resumes_and_a_mismatch_is_named(tmp_path):
    from course_utils.checkpoints import load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    path = save_checkpoint(tmp_path / "ckpt.pt", 4, model, None)
    fresh = torch.nn.Linear(3, 2)
    assert load_checkpoint(path, fresh, None) == 5
    assert torch.equal(fresh.weight, model.weight)
    with pytest.raises(ValueError, match="holds no optimizer state"):
        load_checkpoint(path, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1))
    with_optimizer = save_checkpoint(tmp_path / "with.pt", 0, model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="holds the optimizer's state, but no optimizer was given"):
        load_checkpoint(with_optimizer, fresh, None)


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="POSIX file modes")
def test_a_checkpoint_gets_the_mode_the_log_beside_it_gets(tmp_path):
    """mkstemp's 0o600 would make the checkpoint the one file of a run that others cannot read."""
    from course_utils.checkpoints import save_atomically

    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    save_atomically({"epoch": 0}, tmp_path / "checkpoint.pt")
    mode = lambda path: path.stat().st_mode & 0o777  # noqa: E731
    assert mode(tmp_path / "checkpoint.pt") == mode(log)
    (tmp_path / "checkpoint.pt").chmod(0o640)  # a mode chosen for the file is kept on rewrite
    save_atomically({"epoch": 1}, tmp_path / "checkpoint.pt")
    assert mode(tmp_path / "checkpoint.pt") == 0o640


def test_the_example_project_has_a_readme_that_names_its_files_and_commands():
    import course_utils

    project = Path(course_utils.__file__).parent / "files" / "examples" / "digits_project"
    readme = (project / "README.md").read_text(encoding="utf-8")
    for path in project.glob("*.py"):
        if path.name != "__init__.py":
            assert f"`{path.name}`" in readme, path.name
    assert "`config.json`" in readme and "--resume" in readme and "evaluate.py" in readme
