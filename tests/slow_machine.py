"""One knob for every time limit in the tests, for slow or busy machines.

    COURSE_TEST_TIME_SCALE=3 ./course test

multiplies each limit a test sets (a check's time limit, the grader's cell timeout, the
"far too slow" bound on a reference check) by 3. Limits stop runaway work; they never measure
speed, so a slower machine needs a larger scale, never a different test.
"""

import os


def time_scale() -> float:
    text = os.environ.get("COURSE_TEST_TIME_SCALE", "").strip() or "1"
    try:
        factor = float(text)
    except ValueError:
        raise ValueError(f"COURSE_TEST_TIME_SCALE must be a number, not {text!r}") from None
    if not factor > 0:
        raise ValueError(f"COURSE_TEST_TIME_SCALE must be above 0, not {text!r}")
    return factor


def scaled(seconds: float) -> float:
    return seconds * time_scale()
