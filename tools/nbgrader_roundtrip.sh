#!/usr/bin/env bash
# Proves that solutions/ works, unchanged, as nbgrader source: generate_assignment accepts it,
# autograde gives the solutions full marks, and gives the learner notebooks (notebooks/) and
# nbgrader's own released versions zero. See tools/README.md.
#
# Usage: tools/nbgrader_roundtrip.sh
# Needs the course's .venv (`./course setup`). Makes or reuses .nbgrader-venv in the course
# folder for nbgrader itself; everything else happens in a temporary folder, removed on exit.
# Environment: PYTHON=/path/to/python3.X for .nbgrader-venv (default python3);
#              KEEP_TMP=1 keeps the temporary nbgrader course folder and prints where it is.
set -euo pipefail

NBGRADER_VERSION="0.9.6"
ASSIGNMENT="course"
STUDENTS="full blank released"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
COURSE_VENV="$ROOT/.venv"
KERNELS="$COURSE_VENV/share/jupyter"
NBG_VENV="$ROOT/.nbgrader-venv"
NBG="$NBG_VENV/bin"

say() { printf '%s\n' "$*"; }
die() { printf 'nbgrader_roundtrip: %s\n' "$*" >&2; exit 1; }

# ---- preconditions -------------------------------------------------------------------------
if [ ! -x "$COURSE_VENV/bin/python" ] || [ ! -f "$KERNELS/kernels/pytorch-course/kernel.json" ]; then
    die "the course's .venv or its kernel 'pytorch-course' is missing; run ./course setup first."
fi
"$COURSE_VENV/bin/python" -c 'import course_utils, torch, ipykernel' 2>/dev/null ||
    die "the course's .venv cannot import course_utils, torch and ipykernel; run ./course setup first."
shopt -s nullglob
SOLUTIONS=("$ROOT"/solutions/*.ipynb)
shopt -u nullglob
[ "${#SOLUTIONS[@]}" -gt 0 ] || die "no notebooks in $ROOT/solutions"
for nb in "${SOLUTIONS[@]}"; do
    [ -f "$ROOT/notebooks/$(basename "$nb")" ] ||
        die "notebooks/$(basename "$nb") is missing; regenerate the learner notebooks first."
done

# ---- nbgrader's own virtual environment (reused when it already has this version) -----------
if ! "$NBG/python" -c "import sys, nbgrader; sys.exit(nbgrader.__version__ != '$NBGRADER_VERSION')" 2>/dev/null; then
    say "Making $NBG_VENV with nbgrader==$NBGRADER_VERSION …"
    rm -rf "$NBG_VENV"
    "${PYTHON:-python3}" -m venv "$NBG_VENV"
    log="$NBG_VENV/pip-install.log"
    { "$NBG/python" -m pip install --upgrade pip &&
      "$NBG/python" -m pip install "nbgrader==$NBGRADER_VERSION"; } >"$log" 2>&1 ||
        { tail -n 40 "$log" >&2; die "pip install nbgrader==$NBGRADER_VERSION failed (log: $log)"; }
fi
say "nbgrader $("$NBG/python" -c 'import nbgrader; print(nbgrader.__version__)') in $NBG_VENV"

# ---- a throwaway nbgrader course, isolated from any user or system Jupyter config -----------
TMP="$(mktemp -d "${TMPDIR:-/tmp}/nbgrader-roundtrip.XXXXXX")"
cleanup() {
    if [ "${KEEP_TMP:-}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
COURSE_DIR="$TMP/course"
mkdir -p "$COURSE_DIR" "$TMP/jupyter-config" "$TMP/jupyter-runtime" "$TMP/home"

# nbgrader runs `alembic` (its gradebook migrations) as a bare command, so its venv goes on PATH.
export PATH="$NBG:$PATH"
export JUPYTER_PATH="$KERNELS"                 # finds the kernel "pytorch-course" first
export JUPYTER_CONFIG_DIR="$TMP/jupyter-config"
export JUPYTER_RUNTIME_DIR="$TMP/jupyter-runtime"
# The course's own switches must not decide the outcome: nbgrader sets NBGRADER_EXECUTION.
unset COURSE_STRICT COURSE_EXPECT NBGRADER_EXECUTION
export COURSE_PROGRESS_FILE="$TMP/home/progress.json"   # never touch a learner's progress
export PYTHONDONTWRITEBYTECODE=1

# The kernel nbgrader will start must be the course's, pointing at the course's Python.
"$NBG/python" - "$KERNELS/kernels/pytorch-course" "$COURSE_VENV/bin/python" <<'EOF'
import os, sys
from jupyter_client.kernelspec import KernelSpecManager
want_dir, want_python = sys.argv[1], sys.argv[2]
spec = KernelSpecManager().get_kernel_spec("pytorch-course")
if os.path.realpath(spec.resource_dir) != os.path.realpath(want_dir):
    sys.exit(f"kernel pytorch-course resolves to {spec.resource_dir}, not {want_dir}")
if os.path.realpath(spec.argv[0]) != os.path.realpath(want_python):
    sys.exit(f"kernel pytorch-course runs {spec.argv[0]}, not {want_python}; run ./course setup")
EOF

cat > "$COURSE_DIR/nbgrader_config.py" <<EOF
c = get_config()
c.CourseDirectory.course_id = "pytorch-course"
c.CourseDirectory.root = r"$COURSE_DIR"
c.ExecutePreprocessor.timeout = 1800
EOF

nbgrader() { (cd "$COURSE_DIR" && "$NBG/nbgrader" "$@"); }

# ---- source: solutions/ copied unchanged -----------------------------------------------------
mkdir -p "$COURSE_DIR/source/$ASSIGNMENT"
for nb in "${SOLUTIONS[@]}"; do
    cp "$nb" "$COURSE_DIR/source/$ASSIGNMENT/"
    cmp -s "$nb" "$COURSE_DIR/source/$ASSIGNMENT/$(basename "$nb")" ||
        die "the source copy of $(basename "$nb") differs from solutions/"
done
say "source/$ASSIGNMENT: ${#SOLUTIONS[@]} notebook(s) from solutions/, byte-identical"

phase() { say "== $* (at ${SECONDS}s)"; }
phase "nbgrader generate_assignment $ASSIGNMENT"
nbgrader generate_assignment "$ASSIGNMENT" ||
    die "nbgrader generate_assignment refused solutions/ (see above)"

# ---- three submissions (autograde adds the students to the gradebook) -----------------------
for student in $STUDENTS; do
    dest="$COURSE_DIR/submitted/$student/$ASSIGNMENT"
    mkdir -p "$dest"
    for nb in "${SOLUTIONS[@]}"; do
        name="$(basename "$nb")"
        case "$student" in
            full) cp "$nb" "$dest/$name" ;;
            blank) cp "$ROOT/notebooks/$name" "$dest/$name" ;;
            released) cp "$COURSE_DIR/release/$ASSIGNMENT/$name" "$dest/$name" ;;
        esac
    done
    date -u '+%Y-%m-%d %H:%M:%S UTC' > "$dest/timestamp.txt"
done

phase "nbgrader autograde $ASSIGNMENT"
autograde_rc=0
nbgrader autograde "$ASSIGNMENT" || autograde_rc=$?

# ---- scores from the gradebook ------------------------------------------------------------------
phase "scores"
report_rc=0
"$NBG/python" - "$COURSE_DIR/gradebook.db" "$ASSIGNMENT" "${SOLUTIONS[@]}" <<'EOF' || report_rc=$?
import os, sys
from nbgrader.api import Gradebook, MissingEntry

db, assignment, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
notebooks = [os.path.splitext(os.path.basename(p))[0] for p in paths]
expect = {"full": "max", "blank": 0, "released": 0}
ok = True
with Gradebook(f"sqlite:///{db}") as gb:
    width = max(len(n) for n in notebooks + ["total"])
    for student, wanted in expect.items():
        total = total_max = 0.0
        print(f"{student}:")
        for name in notebooks:
            try:
                nb = gb.find_submission_notebook(name, assignment, student)
            except MissingEntry:
                print(f"  {name:<{width}}  NOT AUTOGRADED")
                ok = False
                continue
            total += nb.score
            total_max += nb.max_score
            lost = [g.name for g in nb.grades if g.score < g.max_score]
            note = f"   (not full marks: {', '.join(lost)})" if lost and wanted == "max" else ""
            print(f"  {name:<{width}}  {nb.score:g} / {nb.max_score:g}{note}")
        print(f"  {'total':<{width}}  {total:g} / {total_max:g}")
        target = total_max if wanted == "max" else wanted
        if total_max == 0 or total != target:
            print(f"  ✗ expected {target:g}")
            ok = False
sys.exit(0 if ok else 1)
EOF

if [ "$autograde_rc" -ne 0 ]; then
    die "nbgrader autograde exited with status $autograde_rc (see above)"
fi
[ "$report_rc" -eq 0 ] || die "the scores are not as expected (see above)"
say "OK after ${SECONDS}s: full marks for solutions/, zero for notebooks/ and for nbgrader's release/"
