"""Is a JupyterLab serving this course right now? ``./course update`` asks before it pulls.

A tab that JupyterLab has open keeps the version it loaded. After an update, saving that tab
makes JupyterLab ask whether to overwrite the file that "changed on disk", and its highlighted
button, Overwrite, puts the old version back over the new one. So the update says, before and
after, which servers are running on the course and what to do in their open tabs.

Jupyter servers write a runtime file each (``jpserver-PID.json`` in Jupyter's runtime folder)
with their process id, root folder and URL; a server counts when its process is alive and its
root folder is the course folder or holds it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _runtime_folder() -> Path:
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:  # no Jupyter in this environment: then no server of it either
        return Path(os.environ.get("JUPYTER_RUNTIME_DIR", "/nonexistent"))
    return Path(jupyter_runtime_dir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return False
    return True


def labs_serving(root: Path) -> list[dict]:
    """The running Jupyter servers whose root folder is ``root`` or holds it."""
    root = Path(root).resolve()
    found = []
    for path in sorted(_runtime_folder().glob("jpserver-*.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
            served = Path(info.get("root_dir") or info.get("notebook_dir") or "").resolve()
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid) and (served == root or served in root.parents):
            found.append({"pid": pid, "url": info.get("url", ""), "root_dir": str(served)})
    return found


def warning(root: Path, when: str) -> str:
    """What to tell the learner ("" when no server runs on the course)."""
    labs = labs_serving(root)
    if not labs:
        return ""
    where = ", ".join(f"{lab['url'] or 'a server'} (process {lab['pid']})" for lab in labs)
    if when == "before":
        return (
            f"JupyterLab is running on this course: {where}. Its open tabs keep the version "
            "they loaded. After the update, in each open chapter use File > Reload Notebook from "
            "Disk before you save; if JupyterLab says the file changed on disk, choose Revert, "
            "not Overwrite (Overwrite puts the old version back)."
        )
    return (
        f"Reminder: JupyterLab is still running ({where}). Reload each open chapter from disk "
        "(File > Reload Notebook from Disk) before you save it."
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("before", "after"):
        print("usage: python -m course_utils.running_labs ROOT before|after", file=sys.stderr)
        return 2
    text = warning(Path(argv[0]), argv[1])
    if text:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
