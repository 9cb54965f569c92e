"""The README is the learner's page: set-up, chapters, how to work, updating, which kernel."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def sections(text):
    return re.findall(r"^## (.+)$", text, re.M)


def test_a_learner_reads_set_up_chapters_and_how_to_work_first():
    assert sections(README)[:3] == ["Start", "Chapters", "How you work through a chapter"]
    start = README.split("## Start", 1)[1].split("## Chapters", 1)[0]
    assert "./course lab" in start
    assert "CPU build" in start and "COURSE_TORCH" in start, "the torch build is chosen up front"


def test_updating_and_other_editors_are_covered():
    assert "./course update" in README and "my-work/backups/" in README
    editors = README.split("## VS Code, or a Jupyter of your own", 1)[1].split("\n## ", 1)[0]
    assert "Python (PyTorch course)" in editors and ".venv" in editors


def test_the_instructors_material_has_its_own_page_linked_from_the_readme():
    """The README keeps instructors to one short section (practice and exam releases), linked
    to INSTRUCTORS.md; the learner's part of the README never mentions grading."""
    assert "(INSTRUCTORS.md)" in README
    instructors = (ROOT / "INSTRUCTORS.md").read_text(encoding="utf-8")
    before, section = README.split("\n## For instructors\n", 1)
    section, after = section.split("\n## ", 1)
    learners_part = before + after
    for topic in ("course_utils.authoring release", "course_utils.grading", "nbgrader_roundtrip"):
        assert topic in instructors and topic not in learners_part
    assert "--exam" in section and "practice" in section and "(INSTRUCTORS.md)" in section
    assert len(section.splitlines()) <= 15, "a few lines; the details are in INSTRUCTORS.md"
    assert "./course test" in README, "the README names the test command CI runs"


def test_the_time_a_chapter_takes_matches_the_chapters_own():
    import json
    import re

    minutes = []
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
        minutes.append(int(re.search(r"\*\*Time:\*\* about (\d+) minutes", first).group(1)))
    assert f"Each chapter takes {min(minutes)} to {max(minutes)} minutes" in README


def test_macos_means_apple_silicon_and_intel_macs_are_told_where_to_go():
    start = README.split("## Start", 1)[1].split("## Chapters", 1)[0]
    assert "macOS on Apple silicon" in start and "Intel Mac" in start and "2.2.2" in start
    assert "| macOS |" not in start


def test_the_readme_says_what_happens_to_the_kernel_of_a_closed_tab():
    course = (ROOT / "course").read_text(encoding="utf-8")
    assert '"cull_idle_timeout": 1800' in course and '"cull_connected": false' in course
    assert "stops by itself after 30\nidle minutes" in README and "Shut Down Kernel" in README


def test_the_output_marker_that_learner_notebooks_show_is_explained():
    import json

    learner = json.loads((ROOT / "notebooks" / "00_environment.ipynb").read_text(encoding="utf-8"))
    marked = ["".join(c["source"]) for c in learner["cells"] if "".join(c["source"]).startswith("# NBVAL_CHECK_OUTPUT")]
    assert marked, "chapter 00 ships cells with the marker"
    first = "".join(learner["cells"][0]["source"])
    assert "`# NBVAL_CHECK_OUTPUT`" in first and "the comment changes nothing" in first
    assert "`# NBVAL_CHECK_OUTPUT` arrive with an output already" in README


def test_intel_macs_are_pointed_to_conda_forge_which_the_conda_section_uses():
    start = README.split("## Start", 1)[1].split("## Chapters", 1)[0]
    assert "conda-forge builds PyTorch itself, Intel Macs included" in " ".join(start.split())
    assert "[with conda](#with-conda)" in start and "### With conda" in README
    environment = (ROOT / "environment.yml").read_text(encoding="utf-8")
    assert "channels:\n  - conda-forge\n  - nodefaults" in environment


def test_the_driver_rule_agrees_with_chapter_00s_minor_version_compatibility():
    import json

    details = " ".join(README.split("## Install details", 1)[1].split("### With conda", 1)[0].split())
    chapter = json.loads((ROOT / "solutions" / "00_environment.ipynb").read_text(encoding="utf-8"))
    chapter = " ".join(" ".join("".join(c["source"]) for c in chapter["cells"]).split())
    assert "needs a driver whose" not in details  # the old rule, with no leeway at all
    for both in ("minor-version compatibility", "for CUDA 12, any driver from 525 on", "for CUDA 13, from 580 on"):
        assert both in details and both in chapter


def test_the_cpu_builds_installed_size_is_what_the_readme_says():
    import pytest
    import torch

    if torch.version.cuda or torch.version.hip or "+cpu" not in torch.__version__:
        pytest.skip("the README's size is the CPU build's; this is another build")
    folder = Path(torch.__file__).parent
    megabytes = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    assert 650 < megabytes < 850, megabytes  # the README: "about 750 MB installed"
    assert "a download of under 200 MB, about 750 MB installed" in README
