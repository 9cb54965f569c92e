"""Warnings the learner's code raises while a check runs it: said once, where the learner can act.

A check calls an answer many times (every input, a second call), so a warning the answer
raises (torch's "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed",
"Converting a tensor with requires_grad=True to a scalar") would print once per call, above
the verdict, and often with a file and line inside the course's own code (the check's call
counter), which the learner cannot change. Here each distinct warning is shown once, with the
learner's own line when the warning names one, and without any line when it names the
course's or torch's files.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # course_utils/


def _outside_the_learners_code(filename: str) -> bool:
    name = os.path.abspath(filename or "")
    return name.startswith(_OURS) or f"{os.sep}torch{os.sep}" in name or not filename


@contextlib.contextmanager
def warnings_said_once():
    """Collect the warnings raised inside; afterwards show each distinct one once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen: dict[tuple[str, str], list] = {}
            for warning in caught:
                text = str(warning.message).strip()
                first_line = text.splitlines()[0] if text else ""
                # torch appends where in its C++ sources it warned: nothing a learner can use
                first_line = first_line.split(" (Triggered internally at", 1)[0]
                seen.setdefault((warning.category.__name__, first_line), []).append(warning)
    for (category, first_line), found in seen.items():
        times = f" ({len(found)} times)" if len(found) > 1 else ""
        where = found[0]
        if _outside_the_learners_code(where.filename):
            place = "while the check ran your code"
        else:
            place = f"at {os.path.basename(where.filename)}:{where.lineno}"
        print(f"{category} {place}{times}: {first_line}", file=sys.stderr)
