"""Finding nbgrader's ``### BEGIN SOLUTION`` / ``### BEGIN HIDDEN TESTS`` regions in a cell.

Both kinds are scanned together: a region of one kind opened inside a region of the other
would be cut differently by each clear step (and by nbgrader), so nesting is refused here,
once, before anything is removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_utils.authoring.errors import Where

SOLUTION = "SOLUTION"
HIDDEN_TESTS = "HIDDEN TESTS"

# A marker is a line of its own: indentation, the marker in capitals, nothing after it.
# nbgrader matches the capitals exactly, so a marker in other case is refused, not guessed at.
_MARKER_PATTERN = (
    r"^(?P<indent>[ \t]*)###[ \t]*"
    r"(?P<edge>BEGIN|END)[ \t]+(?P<kind>SOLUTION|HIDDEN[ \t]+TESTS)\s*$"
)
MARKER_LINE = re.compile(_MARKER_PATTERN)
MARKER_LINE_ANY_CASE = re.compile(_MARKER_PATTERN, re.IGNORECASE)

# nbgrader itself treats ANY line containing one of these (exact case) as a marker. A line
# that nbgrader would cut but we would keep is refused, so the two never disagree.
NBGRADER_DELIMITERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


@dataclass(frozen=True)
class Marker:
    line: int  # 0-based line number within the cell's source
    edge: str  # "BEGIN" or "END"
    kind: str  # SOLUTION or HIDDEN_TESTS
    indent: str

    def __str__(self) -> str:
        return f"### {self.edge} {self.kind} (line {self.line + 1} of the cell)"


@dataclass(frozen=True)
class Region:
    kind: str
    begin: Marker
    end: Marker


def parse_marker(line: str, line_number: int) -> Marker | None:
    match = MARKER_LINE.match(line)
    if match is None:
        return None
    kind = SOLUTION if match["kind"] == SOLUTION else HIDDEN_TESTS
    return Marker(line_number, match["edge"], kind, match["indent"])


def mentions_marker(line: str) -> bool:
    """True for a marker line, and for any line nbgrader would take for one."""
    return parse_marker(line, 0) is not None or any(d in line for d in NBGRADER_DELIMITERS)


def find_regions(source: str, where: Where) -> list[Region]:
    """The regions of a code cell, in order; raises AuthoringError on any malformed marker."""
    regions: list[Region] = []
    opened: Marker | None = None
    for number, line in enumerate(source.split("\n")):
        marker = parse_marker(line, number)
        if marker is None and MARKER_LINE_ANY_CASE.match(line):
            raise where.error(
                f"line {number + 1} of the cell, {line.strip()!r}, is a marker in the wrong case; "
                "nbgrader only knows markers in capitals (### BEGIN SOLUTION), so it would leave "
                "this region in the learner's notebook. Write it in capitals."
            )
        if marker is None:
            for delimiter in NBGRADER_DELIMITERS:
                if delimiter in line:
                    raise where.error(
                        f"line {number + 1} of the cell mentions {delimiter!r} but is not a marker "
                        f"line; nbgrader would still cut the cell there. Put the marker alone on "
                        f"its line (e.g. '### {delimiter}'), or reword the line."
                    )
            continue
        if marker.edge == "BEGIN":
            if opened is not None:
                raise where.error(
                    f"{marker} is inside the {opened.kind} region opened by {opened}; "
                    f"regions cannot be nested. Close the first region before opening another."
                )
            opened = marker
        else:
            if opened is None:
                raise where.error(f"{marker} has no matching ### BEGIN {marker.kind} above it.")
            if opened.kind != marker.kind:
                raise where.error(
                    f"{marker} has no matching ### BEGIN {marker.kind}: the open region is "
                    f"{opened.kind}, opened by {opened}."
                )
            regions.append(Region(marker.kind, opened, marker))
            opened = None
    if opened is not None:
        raise where.error(f"{opened} is never closed: add ### END {opened.kind} after the region.")
    return regions
