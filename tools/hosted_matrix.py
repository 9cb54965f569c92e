"""Every chapter, alone on a simulated hosted Jupyter, on other torch versions than the pinned one.

The course claims any torch from 2.6 on. ``./course test`` runs each chapter on a simulated
hosted machine with the pinned torch (tests/test_hosted.py); this runs the same simulation on
the versions you name, both variants by default: the learner notebook (every check must say
"not attempted") and the learner notebook with every displayed solution pasted in (every check
must pass). A platform of each torch version is made once in ``.course/venvs/hosted-torch-X``
(PyPI's Linux torch is a CUDA build: a few GB the first time; it runs on the CPU).

    .venv/bin/python tools/hosted_matrix.py 2.6.0 2.15.0
    .venv/bin/python tools/hosted_matrix.py 2.6.0 --chapters 04_training_loop --variants pasted
    .venv/bin/python tools/hosted_matrix.py --profile colab-like --profile kaggle-like

A ``--profile`` is a platform's own package set (torch, numpy, matplotlib, ipywidgets,
ipykernel: tests/hosted_profiles.py), not our pins with another torch.

On a machine whose pip is capped to the torch it has on disk (a constraints file in pip's
configuration), run it with ``PIP_CONFIG_FILE=/dev/null``. Prints one line per run and a
summary; exits 1 if any run failed. ``--json FILE`` keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import hosted_machine as hosted  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("torch", nargs="*", help="torch versions, e.g. 2.6.0 2.15.0")
    parser.add_argument("--profile", action="append", default=[], metavar="NAME",
                        help="a platform's package set from tests/hosted_profiles.py (colab-like, kaggle-like)")
    parser.add_argument("--chapters", nargs="*", help="default: every chapter")
    parser.add_argument("--variants", nargs="*", default=["learner", "pasted"], choices=["learner", "pasted"])
    parser.add_argument("--json", type=Path, help="write every run's figures to this file")
    parser.add_argument("--keep", type=Path, help="keep each run's folder (the executed notebook) here")
    args = parser.parse_args(argv)
    if not args.torch and not args.profile:
        parser.error("name a torch version or a --profile")
    platforms = [("torch", version) for version in args.torch] + [("profile", name) for name in args.profile]
    chapters = args.chapters or sorted(p.stem for p in (hosted.ROOT / "notebooks").glob("*.ipynb"))
    results, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="hosted-matrix-") as scratch:
        scratch = Path(scratch)
        wheel = hosted.build_wheel(scratch / "wheel")
        for kind, version in platforms:
            started = time.perf_counter()
            platform = (hosted.platform_python(version) if kind == "torch"
                        else hosted.platform_python(profile=version))
            print(f"{kind} {version}: platform ready in {time.perf_counter() - started:.0f} s "
                  f"({platform})", flush=True)
            for chapter in chapters:
                for variant in args.variants:
                    folder = scratch / f"{version}-{chapter}-{variant}"
                    row = {kind: version, "chapter": chapter, "variant": variant}
                    try:
                        run = hosted.run_alone(hosted.chapter_notebook(chapter, variant), chapter,
                                               platform=platform, wheel=wheel, folder=folder,
                                               settings=hosted.chapter_settings(variant))
                        row.update(ok=True, seconds=round(run.seconds, 1),
                                   setup_seconds=round(run.setup_seconds, 1),
                                   torch_seen=run.report["torch"][0], installed=run.installed,
                                   warnings=run.warnings())
                        if row["warnings"]:  # a learner reads a red warning as an error
                            failed += 1
                            row["ok"] = False
                            print("    warnings shown to the learner:\n      " + "\n      ".join(row["warnings"]))
                    except Exception as error:  # the run's own error: show it, go on
                        failed += 1
                        row.update(ok=False, error=f"{type(error).__name__}: {error}"[-4000:])
                        traceback.print_exc()
                    if args.keep:
                        shutil.copytree(folder / "work", args.keep / folder.name, dirs_exist_ok=True)
                    results.append(row)
                    status = (f"passed in {row['seconds']} s (set-up cell {row['setup_seconds']} s, "
                              f"torch {row['torch_seen']})" if row["ok"] else
                              "FAILED (warnings)" if row.get("warnings") else "FAILED")
                    print(f"  {chapter:<22} {variant:<8} {status}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
