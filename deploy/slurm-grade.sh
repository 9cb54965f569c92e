#!/bin/bash
# Grade a class as a Slurm job array: array task I grades shard I+1 of N (`--shard K/N`, K = I+1)
# into RESULTS/shard-K. deploy/README.md, "Slurm", has the whole story.
#
# From the course folder (a clone on a file system the compute nodes share, `./course setup`
# done; the nodes need bubblewrap and unprivileged user namespaces, or the grader refuses):
#
#   sbatch deploy/slurm-grade.sh [SUBMISSIONS [RESULTS [GRADER OPTIONS...]]]
#   e.g.  sbatch deploy/slurm-grade.sh submissions results --exam
#
# SUBMISSIONS defaults to submissions, RESULTS to results (relative to the folder sbatch was run in).
#
# N, the number of shards, is SHARDS below, and --array must be 0-(N-1). For 8 shards, change
# both lines (--array=0-7 and SHARDS=8), or leave the file alone and say it when submitting:
#   sbatch --array=0-7 --export=ALL,SHARDS=8 deploy/slurm-grade.sh
# Re-running some shards only is the same command with their indices: --array=1,3 (N unchanged).
#
# After every task has finished, join the shards into one gradebook, feedback folder and class
# report, the same as grading the class in one run:
#   .venv/bin/python -m course_utils.grading merge results/shard-* --out results/all
# or let Slurm do it, in a job that starts only if every task succeeded:
#   jobid=$(sbatch --parsable deploy/slurm-grade.sh submissions results)
#   sbatch --dependency=afterok:$jobid --wrap '.venv/bin/python -m course_utils.grading merge results/shard-* --out results/all'
#
# Per task: --workers is --cpus-per-task (learners graded at once); each of them runs a kernel
# that may use up to --memory-mb (default 3072 MB) of memory, hence about 4 GB per CPU.
# The process limit is counted inside each kernel's sandbox, so tasks of one user can share a
# node (deploy/README.md, "Known limits", says what older kernels need).
#
# Every shard's results lie in RESULTS on the shared file system: the grader is told to hide
# the whole of RESULTS (--hide), not only its own shard-K, from the submissions it runs.
#SBATCH --job-name=grade
#SBATCH --array=0-3
#SBATCH --cpus-per-task=4
#SBATCH --mem=16G
#SBATCH --time=02:00:00
#SBATCH --output=grade-%A_%a.out

set -euo pipefail

SHARDS="${SHARDS:-4}"
SUBMISSIONS="${1:-submissions}"
RESULTS="${2:-results}"
shift "$(( $# < 2 ? $# : 2 ))"
# The course this job grades with: the folder sbatch was run in (Slurm runs a copy of this
# script from its spool folder, so the script's own place says nothing).
COURSE="${COURSE:-${SLURM_SUBMIT_DIR:-$PWD}}"
GRADER_PYTHON="${GRADER_PYTHON:-$COURSE/.venv/bin/python}"

if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
    echo "slurm-grade.sh: SLURM_ARRAY_TASK_ID is not set: submit this as a job array (sbatch deploy/slurm-grade.sh)" >&2
    exit 2
fi
case "$SHARDS" in
    '' | *[!0-9]* | 0) echo "slurm-grade.sh: SHARDS=$SHARDS is not a number of shards" >&2; exit 2 ;;
esac
if [ "$SLURM_ARRAY_TASK_ID" -ge "$SHARDS" ]; then
    echo "slurm-grade.sh: array task $SLURM_ARRAY_TASK_ID has no shard: SHARDS=$SHARDS, so --array must be 0-$((SHARDS - 1))" >&2
    exit 2
fi

K=$((SLURM_ARRAY_TASK_ID + 1))
echo "slurm-grade.sh: task $SLURM_ARRAY_TASK_ID of job ${SLURM_ARRAY_JOB_ID:-?} on $(hostname): shard $K/$SHARDS into $RESULTS/shard-$K"

# The grader makes its run folders in $TMPDIR/course-grading-UID (one per user). Two tasks of
# one user may share a node: each task gets a temporary folder of its own, removed when it ends.
TMPDIR="$(mktemp -d "${TMPDIR:-/tmp}/grade-${SLURM_JOB_ID:-job}-XXXXXX")"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

"$GRADER_PYTHON" -m course_utils.grading "$SUBMISSIONS" \
    --out "$RESULTS/shard-$K" --shard "$K/$SHARDS" --workers "${SLURM_CPUS_PER_TASK:-1}" \
    --hide "$RESULTS" "$@"
