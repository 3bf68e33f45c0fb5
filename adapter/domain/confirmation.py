"""What a person confirms before a commit, and how the question names it.

The question is the server's, not the model's: a tool caller chooses the ``target``, so the text a
person reads must never let that choice pass for the server's own words. Two rules keep it so:

* a target must match :data:`TARGET_PATTERN` (an identifier: letters, digits and ``_ . : / -``),
  checked when the import begins;
* whatever a stored target holds (rows written before that rule, or a port that relaxes it), the
  question quotes it with :func:`quote_for_question`: every control, format (bidirectional
  overrides, zero-width characters) and separator character except the plain space is escaped,
  quotes and backslashes too, and it is cut at a bounded length. No newline, no reordering, no
  closing quote can come from the caller.

A confirmation is bound to its :class:`CommitSubject`. Staged records are added at the end (all or
none) or replaced by position (``replace_records``, which moves the import's ``revision``), so the
import id, its record count and its revision name exactly the staged content the person was shown;
the target is part of it too.

When a person is to be asked but there is nothing to ask about (the import is committing, committed,
empty, ...), the commit runs with :data:`NOTHING_CONFIRMED`: it may answer from the record or
refuse, but if the import became committable in the meantime it must not start unasked.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "NOTHING_CONFIRMED",
    "TARGET_PATTERN",
    "CommitSubject",
    "ConfirmationRules",
    "FormRequired",
    "Subject",
    "VoidSubject",
    "question_text",
    "quote_for_question",
    "subject_from_state",
    "valid_target",
]

TARGET_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$"
"""A target is an identifier of the legacy system: ASCII letters and digits, then also ``_ . : / -``."""

_TARGET = re.compile(TARGET_PATTERN)
_QUOTED_MAX = 80


@dataclass(frozen=True, slots=True)
class CommitSubject:
    """What a confirmation question described, and so the only thing its answer may commit."""

    import_id: str
    target: str
    record_count: int
    revision: int = 0
    """How often staged records were replaced (``imports.revision``): a replacement keeps the count."""

    def to_state(self) -> dict[str, object]:
        return {
            "import_id": self.import_id,
            "target": self.target,
            "record_count": self.record_count,
            "revision": self.revision,
        }

    @classmethod
    def from_state(cls, data: dict[str, object]) -> CommitSubject:
        """Raises KeyError, TypeError or ValueError for a state that does not hold a subject."""
        import_id, target, count = data["import_id"], data["target"], data["record_count"]
        revision = data.get("revision", 0)
        if not isinstance(import_id, str) or not isinstance(target, str) or type(count) is not int:
            raise TypeError("not a commit subject")
        if type(revision) is not int:
            raise TypeError("not a revision")
        return cls(import_id, target, count, revision)


NOTHING_CONFIRMED = CommitSubject(import_id="", target="", record_count=0)
"""The ``expect`` of a commit (or an abort) for which a question was due but nothing could be asked:
it matches no import (ids are never empty), so the commit answers a replay or refuses, and never
starts; the abort does only what needs no question, and never voids."""


@dataclass(frozen=True, slots=True)
class VoidSubject:
    """What a person confirms before an abort may void a batch in the legacy system: the import, its
    target and record count, and the batch (None while its commit is still running or unknown: the
    abort stops it, and voids what lands)."""

    import_id: str
    target: str
    record_count: int
    legacy_batch_id: str | None

    def to_state(self) -> dict[str, object]:
        return {
            "kind": "void",
            "import_id": self.import_id,
            "target": self.target,
            "record_count": self.record_count,
            "legacy_batch_id": self.legacy_batch_id,
        }


Subject = CommitSubject | VoidSubject
"""What one confirmation round names: a commit, or a void."""


def subject_from_state(data: dict[str, object]) -> Subject:
    """A round's subject from its state. Raises KeyError, TypeError or ValueError for anything else."""
    if data.get("kind", "commit") == "commit":
        return CommitSubject.from_state(data)
    if data["kind"] != "void":
        raise ValueError("not a subject")
    commit = CommitSubject.from_state(data)
    batch = data["legacy_batch_id"]
    if batch is not None and not isinstance(batch, str):
        raise TypeError("not a batch id")
    return VoidSubject(commit.import_id, commit.target, commit.record_count, batch)


class FormRequired(Exception):
    """``always`` is the policy and the client cannot show a form: refused before anything changes."""


@dataclass(frozen=True, slots=True)
class ConfirmationRules:
    """``ADAPTER_CONFIRM_COMMIT``, ``ADAPTER_CONFIRM_MAX_ROUNDS``, ``ADAPTER_CONFIRM_MAX_SECONDS``."""

    mode: Literal["when-supported", "always", "never"] = "when-supported"
    max_rounds: int = 3
    max_seconds: int = 600

    def should_ask(self, can_show_form: bool) -> bool:
        """Whether this request gets a question; FormRequired when it must and cannot."""
        if self.mode == "never":
            return False
        if can_show_form:
            return True
        if self.mode == "always":
            raise FormRequired()
        return False


def valid_target(target: str) -> bool:
    return _TARGET.fullmatch(target) is not None


def quote_for_question(text: str, limit: int = _QUOTED_MAX) -> str:
    """``text`` in double quotes, safe to show inside a sentence of ours (see the module docstring)."""
    shown = text if len(text) <= limit else text[:limit]
    escaped = "".join(_escape(ch) for ch in shown)
    return f'"{escaped}"' + ("..." if len(text) > limit else "")


def _escape(ch: str) -> str:
    if ch in '"\\':
        return "\\" + ch
    if ch == " ":
        return ch
    category = unicodedata.category(ch)
    if category[0] in "CZ":  # controls, formats (bidi, zero-width), surrogates, unassigned, separators
        code = ord(ch)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return ch


def question_text(subject: Subject) -> str:
    """The confirmation question: the numbers come from the store, the target and batch are quoted."""
    noun = "record" if subject.record_count == 1 else "records"
    target = quote_for_question(subject.target)
    if isinstance(subject, VoidSubject):
        if subject.legacy_batch_id is None:
            return (
                f"Abort the import of {subject.record_count} {noun} into the legacy target {target} while it "
                "is being committed? If the batch lands anyway, it is voided in the legacy system."
            )
        return (
            f"Void the committed batch {quote_for_question(subject.legacy_batch_id)} of "
            f"{subject.record_count} {noun} in the legacy target {target}? Voiding cannot be undone."
        )
    return (
        f"Commit {subject.record_count} staged {noun} into the legacy target "
        f"{target}? The commit is final; it can only be voided later."
    )
