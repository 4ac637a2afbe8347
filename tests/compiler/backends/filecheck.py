"""A small FileCheck: `CHECK: text` lines must appear in order, `CHECK-NOT: text` nowhere
between the surrounding CHECKs, `CHECK-COUNT-n: text` exactly n times in the whole text."""

from __future__ import annotations

import re


def filecheck(text: str, patterns: str) -> None:
    pos = 0
    pending_not: list[str] = []
    for raw in patterns.strip().splitlines():
        line = raw.strip()
        if not line:
            continue
        kind, _, pat = line.partition(":")
        pat = pat.strip()
        if kind == "CHECK":
            found = text.find(pat, pos)
            if found < 0:
                raise AssertionError(f"CHECK: {pat!r} not found after offset {pos}:\n{_excerpt(text, pos)}")
            for bad in pending_not:
                if bad in text[pos:found]:
                    raise AssertionError(f"CHECK-NOT: {bad!r} found before {pat!r}")
            pending_not = []
            pos = found + len(pat)
        elif kind == "CHECK-NOT":
            pending_not.append(pat)
        elif (m := re.fullmatch(r"CHECK-COUNT-(\d+)", kind)) is not None:
            count = text.count(pat)
            if count != int(m.group(1)):
                raise AssertionError(f"CHECK-COUNT-{m.group(1)}: {pat!r} occurs {count} times")
        else:
            raise ValueError(f"unknown directive {kind!r}")
    for bad in pending_not:
        if bad in text[pos:]:
            raise AssertionError(f"CHECK-NOT: {bad!r} found after the last CHECK")


def _excerpt(text: str, pos: int) -> str:
    return text[pos : pos + 2000]
