"""A moved virtual environment: every file that named the old folder names the new one."""

import os
import stat

from course_utils.venv_move import relocate


def make_venv(root, name=".venv"):
    venv = root / name
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\ncommand = /usr/bin/python3 -m venv {venv}\n")
    (venv / "bin" / "jupyter-lab").write_text(f"#!{venv}/bin/python\nimport sys\n")
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{venv}"\nexport VIRTUAL_ENV\n')
    (venv / "bin" / "tool").write_bytes(b"\x7fELF\0binary " + str(venv).encode())
    os.chmod(venv / "bin" / "jupyter-lab", 0o755)
    return venv


def test_scripts_activate_and_config_name_the_new_folder(tmp_path):
    old = make_venv(tmp_path / "old")
    new_root = tmp_path / "elsewhere" / "course"
    new_root.parent.mkdir()
    os.rename(tmp_path / "old", new_root)
    new = new_root / ".venv"
    changed = relocate(str(old), new)
    assert sorted(p.name for p in changed) == ["activate", "jupyter-lab", "pyvenv.cfg"]
    assert (new / "bin" / "jupyter-lab").read_text().startswith(f"#!{new}/bin/python\n")
    assert f'VIRTUAL_ENV="{new}"' in (new / "bin" / "activate").read_text()
    assert f"-m venv {new}\n" in (new / "pyvenv.cfg").read_text()
    assert os.stat(new / "bin" / "jupyter-lab").st_mode & stat.S_IXUSR, "scripts stay executable"
    assert str(old).encode() in (new / "bin" / "tool").read_bytes(), "binaries are left alone"


def test_running_it_twice_changes_nothing_more_even_when_the_new_path_holds_the_old(tmp_path):
    old = make_venv(tmp_path / "c")  # /tmp/.../c/.venv
    new_root = tmp_path / "x" / tmp_path.relative_to("/") / "c"  # ends with the old path
    new_root.parent.mkdir(parents=True)
    os.rename(tmp_path / "c", new_root)
    new = new_root / ".venv"
    relocate(str(old), new)
    once = (new / "bin" / "jupyter-lab").read_text()
    assert relocate(str(old), new) == []
    assert (new / "bin" / "jupyter-lab").read_text() == once
    assert once.count(f"{new}/bin/python") == 1 and once.endswith("\nimport sys\n")


def test_a_folder_whose_name_starts_like_the_old_one_is_not_touched(tmp_path):
    venv = make_venv(tmp_path / "course")
    (venv / "bin" / "other").write_text(f"#!{venv}2/bin/python\n")
    relocate(str(venv), tmp_path / "course" / ".venv")
    assert (venv / "bin" / "other").read_text() == f"#!{venv}2/bin/python\n"


def test_a_new_path_with_a_space_starts_scripts_through_sh(tmp_path):
    import subprocess
    import sys

    old = tmp_path / "old" / ".venv"
    (old / "bin").mkdir(parents=True)
    (old / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.symlink(sys.executable, old / "bin" / "python")
    script = old / "bin" / "hello"
    script.write_text(f"#!{old}/bin/python\nimport sys\nprint('hello', sys.argv[1:])\n")
    script.chmod(0o755)
    new_root = tmp_path / "my course"
    os.rename(tmp_path / "old", new_root)
    relocate(str(old), new_root / ".venv")
    out = subprocess.run([str(new_root / ".venv/bin/hello"), "a b"], capture_output=True, text=True)
    assert out.stdout == "hello ['a b']\n", out.stderr
