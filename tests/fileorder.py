"""The order of the test files under two xdist workers (tests/conftest.py says why): pure.

1. Each file that must run **alone** (an exclusive test that times seconds: nothing may run beside it,
   not even a unit test), followed by a shared integration file: the other worker takes that one and
   waits for the stack lock, so nothing runs beside the alone one.
2. Each other exclusive file, longest first, followed by unit files that fit in its duration, longest
   first: while one worker holds the stack alone, the other runs them (they take no lock).
3. The shared integration files, longest first (a long file taken last keeps one worker busy while the
   other has nothing left: the suite's tail); then the unit files left, longest first, which even out the
   end.
"""

from __future__ import annotations


def order_files(
    files: list[str], exclusive: set[str], durations: dict[str, float], alone: frozenset[str] = frozenset()
) -> list[str]:
    """``files`` in the order above; ``durations`` in seconds per file (a file not in it: 1 s for a unit
    file, 30 s for an integration file)."""

    def took(f: str) -> float:
        return durations.get(f, 1.0 if f.startswith("tests/unit/") else 30.0)

    def unit(f: str) -> bool:
        return f.startswith("tests/unit/")

    units = sorted((f for f in files if unit(f)), key=lambda f: -took(f))
    shared = sorted((f for f in files if f not in exclusive and not unit(f)), key=lambda f: -took(f))
    out: list[str] = []
    for a in (f for f in files if f in alone):
        out += [a, shared.pop(0)] if shared else [a]
    for e in sorted((f for f in files if f in exclusive and f not in alone), key=lambda f: -took(f)):
        out.append(e)
        budget = took(e)
        for u in list(units):
            if took(u) <= budget:
                out.append(u)
                units.remove(u)
                budget -= took(u)
    return out + shared + units
