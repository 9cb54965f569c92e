"""What a check says, kept apart from how it decides: one table of templates per exercise.

A judge decides that an answer made a mistake (an id) and which facts show it (named fields);
the words come from its exercise's table: ``MESSAGES("python-loop", line=...)``. So the wording
can be read, reviewed and translated in one place (the Chinese edition renders the same ids from
its own catalogue), and a test can hold every table to its promises: each template's fields are
filled, each id a judge returns is in its table, and a message's advice is not what the answer it
judges already does (``Message.advises``).
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass
from typing import Iterator, Mapping

from course_utils.exercises.core import Mistake


@dataclass(frozen=True)
class Message:
    """A template, and the code it tells the learner to write (``advises``: source snippets
    such as ``"torch.manual_seed(seed)"``). An answer that already holds every snippet it
    advises was misjudged: the message blames what the code already does."""

    text: str
    advises: tuple[str, ...] = ()

    def __post_init__(self):
        for snippet in self.advises:
            ast.parse(snippet, mode="eval")  # advice is code, or it cannot be compared with code


def fields_of(template: str) -> set[str]:
    """The named fields a template fills, ``{line}`` and ``{got!r}`` alike."""
    names = set()
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"a template's field must be a plain name, not {{{name}}}: {template!r}")
        names.add(name)
    return names


class Messages(Mapping[str, Message]):
    """An exercise's messages, by mistake id. ``table(id, **fields)`` is the ``Mistake`` a judge
    returns; ``table.text(id, **fields)`` the words alone (a hint, a note, a passed message)."""

    def __init__(self, owner: str, templates: Mapping[str, str | Message]):
        self.owner = owner
        self._table = {id: template if isinstance(template, Message) else Message(template)
                       for id, template in templates.items()}
        for id, message in self._table.items():
            fields_of(message.text)  # a malformed template fails when its module is imported

    def __getitem__(self, id: str) -> Message:
        return self._table[id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def text(self, id: str, **fields) -> str:
        if id not in self._table:
            raise KeyError(f"{self.owner} has no message {id!r}")
        template = self._table[id].text
        wanted = fields_of(template)
        if set(fields) != wanted:
            raise TypeError(f"{self.owner}'s message {id!r} fills {sorted(wanted)}, was given {sorted(fields)}")
        return template.format(**fields)

    def __call__(self, id: str, **fields) -> Mistake:
        return Mistake(id, self.text(id, **fields))

    def hints(self) -> list[str]:
        """The texts of ``hint-1``, ``hint-2``, ... in order: an exercise's hints, from its table."""
        found, number = [], 1
        while f"hint-{number}" in self._table:
            found.append(self.text(f"hint-{number}"))
            number += 1
        return found

    def notes(self, clues: Mapping[str, str]) -> list[tuple[str, str, str]]:
        """``Exercise(error_notes=...)`` from ``{note id: clue in the error's message}``: each
        note's words from the table, under its id."""
        return [(clue, self.text(id), id) for id, clue in clues.items()]


def _calls_in(source: str) -> set[str]:
    """Every call in ``source``, written out the one way ``ast.unparse`` writes it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def advice_already_followed(message: Message, source: str) -> bool:
    """Whether ``source`` already holds every call ``message`` advises (so the message cannot
    be why the answer is wrong). A message that advises nothing is never already followed."""
    if not message.advises:
        return False
    calls = _calls_in(source)
    return all(ast.unparse(ast.parse(snippet, mode="eval").body) in calls for snippet in message.advises)
