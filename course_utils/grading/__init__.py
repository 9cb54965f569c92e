"""The instructor's batch grader: ``python -m course_utils.grading SUBMISSIONS --out RESULTS``.

A submission is never trusted. Its structure is ignored: the grader starts from the course's
own learner notebook and copies in only the learner's answer cells, matched by their nbgrader
``grade_id``. Each check cell is replaced by a probe that records plain data (JSON and ``.npz``,
never a pickle), collected right after the cell runs; the verdict is decided here, in the
grading process, where nothing the learner's code did can reach. The kernel runs with time,
memory, process and file-size limits, in its own working folder, with a scrubbed environment,
in a ``bwrap`` (bubblewrap) sandbox with no network, the course read-only and the instructor's
files out of sight. Where bubblewrap cannot make a sandbox (not installed, not Linux, user
namespaces switched off: a trial run tells), the grader refuses to grade, unless told
``--no-sandbox`` (``Batch.no_sandbox`` in Python).

One module per step: ``submissions`` (find and read), ``assemble`` (build what runs),
``sandbox`` and ``limits`` (how the kernel starts), ``execute`` (run and collect), ``scoring``
(judge), ``reports`` (JSON, CSV, HTML), ``batch`` (workers, cache, shards).
"""

GRADER_VERSION = "1"
