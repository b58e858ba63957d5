"""Request paths name objects through ``_segment``, which skips ``quote`` for a plain name: it
must give exactly what ``quote`` gives for every text, plain or not (a name the API server
would refuse still reaches it escaped, and is refused there with its own message)."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from gang.kube.transport import _segment

NAMES = ["g00001-003", "gang-bench", "a.b-c", "", "Upper", "with space", "a/b", "ü", "50%", "x?y#z"]


def test_the_table_of_names_is_quoted_as_quote_would() -> None:
    assert [_segment(n) for n in NAMES] == [quote(n) for n in NAMES]
    assert _segment("with space") == "with%20space"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.from_regex(r"[a-z0-9.-]{0,20}", fullmatch=True), st.text(max_size=20)))
def test_any_text_is_quoted_as_quote_would(text: str) -> None:
    assert _segment(text) == quote(text)
