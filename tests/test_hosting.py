"""Advice fits the machine: Colab and Kaggle are told about menus, the course folder about ./course."""

from pathlib import Path

import pytest

from course_utils import hosting, progress_store
from course_utils.env import FALLBACK_CHECK, NvidiaSmiInfo, diagnose_build, run_checks

COLAB_ENV = {"COLAB_RELEASE_TAG": "release-colab_20261120-060128_RC00"}
KAGGLE_ENV = {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}
HUB_ENV = {"JUPYTERHUB_USER": "ada", "JUPYTERHUB_API_URL": "http://hub:8081/hub/api"}
T4 = NvidiaSmiInfo(gpu_names=["Tesla T4"], driver_version="550.54.15", cuda_version="12.4")


@pytest.mark.parametrize("environ, folder, kind", [
    (COLAB_ENV, None, hosting.COLAB),
    (KAGGLE_ENV, None, hosting.KAGGLE),
    (HUB_ENV, None, hosting.HUB),
    (HUB_ENV, Path("/home/ada/pytorch-course"), hosting.COURSE_FOLDER),  # a clone on a hub
    ({}, Path("/home/ada/pytorch-course"), hosting.COURSE_FOLDER),
    ({}, None, hosting.INSTALLED),
])
def test_where_tells_the_platforms_apart(environ, folder, kind):
    assert hosting.where(environ, folder).kind == kind


def test_this_checkout_is_the_course_folder():
    assert hosting.where({}).kind == hosting.COURSE_FOLDER


@pytest.mark.parametrize("environ, name, menu", [
    (COLAB_ENV, "Google Colab", "Runtime ▸ Change runtime type"),
    (KAGGLE_ENV, "Kaggle", "Settings ▸ Accelerator"),
])
def test_a_hosted_cpu_runtime_with_its_cuda_build_is_fine_and_a_gpu_is_a_menu_away(environ, name, menu):
    check = diagnose_build("12.4", False, None, torch_version="2.9.0+cu124", place=hosting.where(environ, None))
    assert check.status == "ok"
    assert f"this runtime of {name} has no GPU" in check.detail
    assert menu in check.detail
    assert "./course" not in check.detail + (check.fix or "")


def test_in_the_course_folder_the_same_facts_point_to_the_smaller_build():
    check = diagnose_build("12.4", False, None, torch_version="2.13.0",
                           place=hosting.where({}, Path("/course")))
    assert check.status == "warning"
    assert "COURSE_TORCH=cpu ./course setup" in check.fix


@pytest.mark.parametrize("environ", [KAGGLE_ENV, HUB_ENV, {}])
def test_off_the_course_folder_no_advice_names_the_course_script(environ):
    place = hosting.where(environ, None)
    for check in (
        diagnose_build("12.4", False, None, torch_version="2.9.0", place=place),
        diagnose_build(None, False, None, torch_version="2.9.0+rocm6.2", torch_hip_version="6.2", place=place),
        diagnose_build(None, False, T4, torch_version="2.9.0+cpu", place=place),
    ):
        assert "./course" not in check.detail + (check.fix or ""), (check.detail, check.fix)


def test_a_colab_gpu_runtime_passes_the_whole_health_check(monkeypatch):
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab")
    report = run_checks(gpu_info=T4, accelerators=[], cuda_available=True, torch_cuda_version="12.4")
    fallback = next(c for c in report.checks if c.name == FALLBACK_CHECK)
    assert fallback.status == "ok" and "Tesla T4" in fallback.detail


@pytest.mark.parametrize("environ, says", [
    (COLAB_ENV, "On Google Colab this file lives on the machine you were lent"),
    (KAGGLE_ENV, "On Kaggle this file lives on the machine you were lent"),
])
def test_the_progress_table_says_a_hosted_machine_forgets(monkeypatch, tmp_path, environ, says):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    report = progress_store.progress_report(tmp_path / "p.json", exercises={})
    assert says in str(report) and says in report._repr_html_()
    assert ("COURSE_PROGRESS_FILE" in report.note) == ("COLAB_RELEASE_TAG" in environ)


def test_the_progress_table_says_nothing_more_in_the_course_folder_or_on_a_hub(monkeypatch, tmp_path):
    for name, value in HUB_ENV.items():
        monkeypatch.setenv(name, value)
    assert progress_store.progress_report(tmp_path / "p.json", exercises={}).note == ""
