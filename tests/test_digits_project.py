"""course_utils/files/examples/digits_project: the chapter 07 layout runs from the command line, writes its log,
checkpoint and weights to the folder it is given, and resumes exactly.

Run by hand, as a file or as a module and from any folder, every misuse ends with one line on
stderr that says what to do, never a traceback."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils.env import pick_device
from course_utils.run_log import read_log
import course_utils

# The folder that holds examples/ (the project ships inside the package, for hosted learners).
ROOT = Path(course_utils.__file__).resolve().parent / "files"
sys.path.insert(0, str(ROOT))
from examples.digits_project import evaluate as evaluate_module  # noqa: E402
from examples.digits_project import train as train_module  # noqa: E402

PROJECT = ROOT / "examples" / "digits_project"
CONFIG = PROJECT / "config.json"


def _config(tmp_path, **changes):
    config = json.loads(CONFIG.read_text(encoding="utf-8"))
    config.update(changes)
    path = tmp_path / f"config_{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_the_command_line_run_writes_its_outputs_to_the_folder_given(tmp_path):
    out = tmp_path / "run"
    config = _config(tmp_path, epochs=2)
    done = subprocess.run(
        [sys.executable, "-m", "examples.digits_project.train", "--config", str(config), "--out", str(out)],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=120,
    )
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "config.json", "log.jsonl", "model.pt"]
    rows = read_log(out / "log.jsonl")
    assert [row["epoch"] for row in rows] == [0, 1]
    assert {"train_loss", "val_loss", "lr", "seconds", "peak_memory_bytes"} <= set(rows[0])
    assert rows[1]["val_loss"] < rows[0]["val_loss"]
    assert done.stdout.count("\n") == 2  # one printed line per epoch
    checkpoint = torch.load(out / "checkpoint.pt", weights_only=True)
    assert checkpoint["epoch"] == 1
    metrics = evaluate_module.main(["--config", str(config), "--weights", str(out / "model.pt")])
    assert abs(metrics["loss"] - rows[-1]["val_loss"]) < 1e-6
    assert metrics["accuracy"] > 0.5


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    train_module.main(["--config", str(_config(tmp_path, epochs=4)), "--out", str(straight)])
    train_module.main(["--config", str(_config(tmp_path, epochs=2)), "--out", str(interrupted)])
    train_module.main(["--config", str(_config(tmp_path, epochs=4)), "--out", str(interrupted), "--resume"])
    a = torch.load(straight / "model.pt", weights_only=True)
    b = torch.load(interrupted / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["epoch"] for r in read_log(interrupted / "log.jsonl")] == [0, 1, 2, 3]
    assert read_log(interrupted / "log.jsonl")[3]["val_loss"] == read_log(straight / "log.jsonl")[3]["val_loss"]


# --- run by hand: as a file or as a module, from a folder that is not the repository root ------


def _script(form, script, *args, cwd):
    """Run train.py or evaluate.py the way a learner would from ``cwd`` (not the root): as a file
    (``python /path/to/train.py``), or as a module with the root on PYTHONPATH, as documented."""
    command = [sys.executable, str(PROJECT / f"{script}.py")] if form == "file" else [
        sys.executable, "-m", f"examples.digits_project.{script}"]
    return _command(form, command + [str(a) for a in args], cwd=cwd)


def _command(form, command, cwd):
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(([str(ROOT)] if form == "module" else []) + others)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def _refused(done, script, code, *fragments):
    """One line on stderr, starting with the script's name, holding every fragment; no traceback."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith(f"{script}.py: "), done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, (fragment, done.stderr)


def _examples(help_text):
    """The example commands --help shows, with `python` meaning this interpreter."""
    lines = [line.strip() for line in help_text.splitlines() if line.startswith("  python ")]
    return [[sys.executable] + shlex.split(line)[1:] for line in lines]


@pytest.fixture(scope="module", params=["file", "module"])
def shipped_run(request, tmp_path_factory):
    """The first command train.py's --help shows, run verbatim from an empty folder: the
    shipped config (5 epochs, "mixed_precision": true) into runs/first."""
    form, cwd = request.param, tmp_path_factory.mktemp(f"elsewhere_{request.param}")
    shown = _script(form, "train", "--help", cwd=cwd)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    start, resume = _examples(shown.stdout)
    done = _command(form, start, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return {"form": form, "cwd": cwd, "help": shown.stdout, "done": done, "resume": resume, "start": start}


def test_help_shows_commands_that_work_from_another_folder(shipped_run):
    cwd, done = shipped_run["cwd"], shipped_run["done"]
    usage = shipped_run["help"].splitlines()[0]
    assert usage.startswith("usage: python -m examples.digits_project.train" if shipped_run["form"] == "module"
                            else f"usage: python {shlex.quote(str(PROJECT / 'train.py'))}")
    assert done.returncode == 0, done.stderr
    assert [row["epoch"] for row in read_log(cwd / "runs" / "first" / "log.jsonl")] == [0, 1, 2, 3, 4]
    shown = _script(shipped_run["form"], "evaluate", "--help", cwd=cwd)
    (example,) = _examples(shown.stdout)
    evaluated = _command(shipped_run["form"], example, cwd=cwd)
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout)["accuracy"] > 0.5


def test_mixed_precision_off_cuda_says_the_run_is_float32(shipped_run):
    stderr = shipped_run["done"].stderr
    if pick_device().type == "cuda":  # float16 with a GradScaler: nothing to say
        assert "mixed_precision" not in stderr
    else:
        assert stderr.count("\n") == 1 and stderr.startswith("train.py: note: ")
        assert '"mixed_precision": true applies on a CUDA GPU only' in stderr
        assert "trains in float32" in stderr


def test_a_second_run_into_a_folder_that_holds_one_is_refused(shipped_run):
    log = shipped_run["cwd"] / "runs" / "first" / "log.jsonl"
    before = log.read_bytes()
    again = _command(shipped_run["form"], shipped_run["start"], cwd=shipped_run["cwd"])
    _refused(again, "train", 1, "--out runs/first already holds a run", "add --resume", "another or an empty --out")
    assert log.read_bytes() == before  # nothing appended, nothing deleted


def test_resuming_a_run_that_has_its_epochs_says_so(shipped_run):
    log = shipped_run["cwd"] / "runs" / "first" / "log.jsonl"
    before = log.read_bytes()
    resumed = _command(shipped_run["form"], shipped_run["resume"], cwd=shipped_run["cwd"])
    _refused(resumed, "train", 0, "runs/first has already trained 5 epochs", "asks for 5: nothing to resume")
    assert resumed.stdout == ""
    assert log.read_bytes() == before


@pytest.mark.parametrize("form", ["file", "module"])
def test_resuming_without_a_checkpoint_names_the_path_looked_for(form, tmp_path):
    done = _script(form, "train", "--config", CONFIG, "--out", "never_ran", "--resume", cwd=tmp_path)
    _refused(done, "train", 1, f"no checkpoint at {Path('never_ran') / 'checkpoint.pt'}", "leave out --resume")
    assert not (tmp_path / "never_ran").exists()


def test_an_unreadable_or_invalid_config_names_the_file_and_the_problem(tmp_path):
    settings = json.loads(CONFIG.read_text(encoding="utf-8"))
    (tmp_path / "cut.json").write_text(CONFIG.read_text(encoding="utf-8")[:40], encoding="utf-8")
    (tmp_path / "typo.json").write_text(json.dumps({**settings, "learning_rate": 0.1}), encoding="utf-8")
    (tmp_path / "negative.json").write_text(json.dumps({**settings, "lr": -1}), encoding="utf-8")
    (tmp_path / "short.json").write_text(json.dumps({k: v for k, v in settings.items() if k != "hidden"}))
    cases = [  # (form, script, arguments, what the one line must say)
        ("file", "train", ["--config", "cut.json"], ["the config cut.json is not valid JSON"]),
        ("module", "train", ["--config", "absent.json"], ["cannot read the config absent.json", "No such file"]),
        ("file", "train", ["--config", "typo.json"], ["the config typo.json has unknown settings 'learning_rate'"]),
        ("module", "train", ["--config", "negative.json"], ["the config negative.json: 'lr' must be a number > 0, not -1"]),
        ("file", "evaluate", ["--config", "short.json", "--weights", "model.pt"], ["the config short.json lacks 'hidden'"]),
        ("module", "evaluate", ["--config", CONFIG, "--weights", "absent.pt"], ["no weights at absent.pt"]),
    ]
    for form, script, arguments, fragments in cases:
        if script == "train":
            arguments = arguments + ["--out", "run"]
        _refused(_script(form, script, *arguments, cwd=tmp_path), script, 1, *fragments)
    assert not (tmp_path / "run").exists()


def test_resuming_with_other_settings_than_the_run_started_with_is_refused(tmp_path):
    train_module.main(["--config", str(_config(tmp_path, epochs=1, hidden=8)), "--out", str(tmp_path / "run")])
    changed = _config(tmp_path, epochs=2, hidden=8, lr=0.05)
    done = _script("file", "train", "--config", changed, "--out", "run", "--resume", cwd=tmp_path)
    _refused(done, "train", 1, "differs from the run's", "in lr (0.01 -> 0.05)", 'change only "epochs"')
    assert [row["epoch"] for row in read_log(tmp_path / "run" / "log.jsonl")] == [0]
