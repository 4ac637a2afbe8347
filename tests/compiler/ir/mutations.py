"""Damage to an IR's text, for the parsers' fuzz tests: deletions, insertions, replacements, truncation."""

from __future__ import annotations

from hypothesis import strategies as st

MUTATIONS = st.tuples(
    st.sampled_from(["delete", "insert", "replace", "truncate"]), st.integers(0, 10**6), st.text(min_size=1, max_size=3)
)


def mutate(text: str, mutations: list[tuple[str, int, str]]) -> str:
    """`text` with each mutation (kind, where, chunk) applied in turn."""
    for kind, where, chunk in mutations:
        i = where % (len(text) + 1)
        if kind == "delete":
            text = text[:i] + text[i + len(chunk) :]
        elif kind == "insert":
            text = text[:i] + chunk + text[i:]
        elif kind == "replace":
            text = text[:i] + chunk + text[i + len(chunk) :]
        else:
            text = text[:i]
    return text
