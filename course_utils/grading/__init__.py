"""The instructor's batch grader: ``python -m course_utils.grading SUBMISSIONS --out RESULTS``.

A submission is never trusted. Its structure is ignored: the grader starts from the course's
own learner notebook and copies in only the learner's answer cells, matched by their nbgrader
``grade_id``. Each check cell is replaced by a probe that records plain data (JSON and ``.npz``,
never a pickle), collected right after the cell runs; the verdict is decided here, in the
grading process, where nothing the learner's code did can reach. The kernel runs with time,
memory, process and file-size limits, in its own working folder, with a scrubbed environment,
and, where ``bwrap`` (bubblewrap) exists, in a sandbox with no network, the course read-only and
the instructor's files out of sight.

One module per step: ``submissions`` (find and read), ``assemble`` (build what runs),
``sandbox`` and ``limits`` (how the kernel starts), ``execute`` (run and collect), ``scoring``
(judge), ``reports`` (JSON, CSV, HTML), ``batch`` (workers, cache, shards).
"""

GRADER_VERSION = "1"
