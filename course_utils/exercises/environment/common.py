"""What chapter 00's exercises share: the chapter's name, the probes' helper
``_shown_already`` and the judges' ``_cases_record``."""

from __future__ import annotations

from course_utils.exercises import plain

CHAPTER = "environment"


def _shown_already(cases, judge) -> bool:
    """True when the calls recorded so far already show a mistake.

    A probe calls the answer on many inputs; when a later call raises, the mistake an earlier
    call showed (an input changed in place, say) is the one to report, not the error it led to.
    """
    try:
        return bool(cases) and judge(plain.to_plain(cases)) is not None
    except Exception:  # a judge that needs every call's record cannot decide on a part
        return False


def _cases_record(record) -> dict:
    """A probe's record as ``{"cases": [...]}`` (with ``"raised"`` where a later call raised).

    A record that is a bare list of cases (the form a probe made before it stopped computing
    right answers, and that tests still build by hand) becomes one holding no error.
    """
    return {"cases": record} if isinstance(record, list) else record
