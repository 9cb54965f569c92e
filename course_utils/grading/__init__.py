"""The instructor's batch grader: ``python -m course_utils.grading SUBMISSIONS --out RESULTS``.

A submission is never trusted. Its structure is ignored: the grader starts from the course's
own learner notebook and copies in only the learner's answer cells, matched by their nbgrader
``grade_id``. Each check cell is replaced by a probe that records plain data (JSON and ``.npz``,
never a pickle) and sends it through a pipe the kernel cannot read; the verdict is decided here,
in the grading process, where nothing the learner's code did can reach. The kernel runs with
time, memory, process and file-size limits, in its own working folder, with a scrubbed
environment, in a ``bwrap`` (bubblewrap) sandbox that is an allow-list: no network, and of the
file system only the system's libraries, its Python, a copy of the course's package and its own
run folder. Inside it, the grader's own code is guarded from the learner's (``kernel_guard``).
Where bubblewrap cannot make a sandbox (not installed, not Linux, user namespaces switched off:
a trial run tells), the grader refuses to grade, unless told ``--no-sandbox``
(``Batch.no_sandbox`` in Python).

One module per step: ``submissions`` (find and read), ``assemble`` (build what runs),
``sandbox`` and ``limits`` (how the kernel starts), ``kernel_probe``, ``guarded_code`` and
``kernel_guard`` (what runs in the kernel), ``records`` (the probes' pipe), ``execute`` (run and
collect), ``scoring`` (judge), ``versions`` (what graded a result), ``reports``,
``class_report``, ``lms``, ``merge`` and ``regrade`` (what the instructor gets), ``batch``
(workers, reruns, cache, shards), ``gradescope``.
"""

GRADER_VERSION = "2"
