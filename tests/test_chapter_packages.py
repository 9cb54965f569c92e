"""A chapter's exercises as a package (one module per exercise): every tool that finds a
chapter's files or loads them guarded sees every module of the package, not only one file."""

import sys
import textwrap

import pytest

from course_utils.exercises import chapter_sources
from course_utils.grading.guarded_code import GUARDED_SUFFIX, load_chapters


def _write(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def copy_with_a_package(tmp_path):
    """A package copy whose chapter ``zz_demo`` is a package of two modules."""
    exercises = tmp_path / "course_utils" / "exercises"
    _write(exercises / "zz_demo", {
        "__init__.py": "from course_utils.exercises.zz_demo.one import one  # noqa: F401\n",
        "common.py": "def _shared(x):\n    return x + 1\n",
        "one.py": """
            from course_utils.exercises.zz_demo.common import _shared

            def one(x):
                return _shared(x)
        """,
    })
    _write(exercises, {"zz_flat.py": "def flat(x):\n    return x\n"})
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith(("course_utils.exercises.zz_"))]:
        del sys.modules[name]


def test_chapter_sources_lists_a_module_or_every_module_of_a_package(copy_with_a_package):
    exercises = copy_with_a_package / "course_utils" / "exercises"
    assert [p.name for p in chapter_sources(exercises, "zz_demo")] == ["__init__.py", "common.py", "one.py"]
    assert [p.name for p in chapter_sources(exercises, "zz_flat")] == ["zz_flat.py"]
    assert chapter_sources(exercises, "zz_missing") == []


def test_every_module_of_a_chapter_package_is_loaded_guarded(copy_with_a_package):
    loaded = load_chapters(copy_with_a_package, ["zz_demo", "zz_flat"])
    package = loaded["zz_demo"]
    assert package.__path__ == [str(copy_with_a_package / "course_utils" / "exercises" / "zz_demo")]
    one = sys.modules["course_utils.exercises.zz_demo.one"]
    common = sys.modules["course_utils.exercises.zz_demo.common"]
    for function, name in ((one.one, "zz_demo.one"), (common._shared, "zz_demo._shared"),
                           (loaded["zz_flat"].flat, "zz_flat.flat")):
        constants = function.__code__.co_consts
        assert sys.audit in constants and name in constants, (name, constants)
    assert one.one.__code__.co_filename.startswith(str(copy_with_a_package))


def test_a_chapter_whose_module_was_imported_unguarded_is_refused(copy_with_a_package):
    sys.modules["course_utils.exercises.zz_demo.common"] = type(sys)("stand-in")
    with pytest.raises(RuntimeError, match="already imported unguarded: zz_demo"):
        load_chapters(copy_with_a_package, ["zz_demo"])


def test_the_prepared_copy_has_guarded_code_beside_every_module_and_names_them_all(tmp_path):
    from course_utils.grading import package_copy

    exercises = package_copy.prepared(tmp_path) / "course_utils" / "exercises"
    files = package_copy.exercise_files(package_copy.prepared(tmp_path))
    sources = [path for path in files if path.suffix == ".py"]
    assert sources and all(path.with_suffix(GUARDED_SUFFIX) in files for path in sources)
    assert all(path.with_suffix(GUARDED_SUFFIX).exists() for path in sources)
    for module in package_copy.chapter_modules():
        assert set(chapter_sources(exercises, module)) <= set(sources)


def test_each_exercise_is_found_by_its_name_in_a_module_and_a_catalogue_of_its_own():
    """A reader finds an exercise by its name in the file tree, and no module is a long read."""
    from pathlib import Path

    import course_utils.exercises
    from course_utils.exercises import CHAPTERS, chapter_exercises

    exercises = Path(course_utils.exercises.__file__).parent
    catalogues = Path(__file__).parent / "catalogue"
    for module in CHAPTERS.values():
        for exercise in chapter_exercises(module):
            assert (exercises / module / f"{exercise.name}.py").is_file(), exercise.id
            assert (catalogues / module / f"test_{exercise.name}.py").is_file(), exercise.id
        long = {path.name: n for path in (exercises / module).glob("*.py")
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > 500}
        assert not long, f"{module}: split these modules (over 500 lines): {long}"
