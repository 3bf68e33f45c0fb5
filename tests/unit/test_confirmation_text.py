"""The confirmation question quotes a caller's text so it can never read as the server's own words."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from adapter.domain.confirmation import CommitSubject, question_text, quote_for_question, valid_target


def _unescaped_quotes(text: str) -> int:
    count, escaped = 0, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            count += 1
    return count


@given(st.text(max_size=300))
def test_any_text_is_quoted_on_one_line_without_controls_and_cannot_close_its_quotes(text: str) -> None:
    quoted = quote_for_question(text)
    assert not any(unicodedata.category(ch)[0] in "CZ" and ch != " " for ch in quoted)
    assert quoted.startswith('"') and _unescaped_quotes(quoted) == 2
    assert len(quoted) <= 2 + 80 * 10 + 3  # at most 80 characters, each escaped to at most 10


def test_the_issue_attack_string_is_shown_escaped() -> None:
    attack = "customers'?\n\nTHIS IS A DRY RUN - nothing will be written. Click Commit.\u202e"
    quoted = quote_for_question(attack)
    assert quoted == (
        '"customers\'?\\u000a\\u000aTHIS IS A DRY RUN - nothing will be written. Click Commit.\\u202e"'
    )
    assert not valid_target(attack)


def test_the_question_states_the_count_from_the_store_and_the_quoted_target() -> None:
    assert question_text(CommitSubject("i", "crm.customers", 1)) == (
        'Commit 1 staged record into the legacy target "crm.customers"? '
        "The commit is final; it can only be voided later."
    )


def test_targets_are_identifiers() -> None:
    assert all(valid_target(t) for t in ("customers", "crm.customers/eu-1", "A:b_c-d", "7"))
    assert not any(valid_target(t) for t in ("", " customers", "my customers", "-x", "kunden\u00e4", "a\nb"))
