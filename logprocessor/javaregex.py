"""What the Spark compiler needs to know about a Java regex's capturing groups (pure).

Spark's ``regexp_extract`` gives ``""`` for a group that took no part in the match, where the original
(``Matcher.group(k)``) gives ``null`` (regexExtract inserts that ``null``, spec §3.13). No Spark function
tells the two apart, so the compiler reads the pattern instead: a group that always takes part when the
pattern matches is never null; a group that may not take part (inside an alternation, under ``?``, ``*`` or
``{0,..}``, inside a lookaround) and whose content cannot match the empty string is null exactly when its
text is ``""``. Only a group that may be skipped *and* may match ``""`` stays ambiguous: the compiler gives
``""`` for it (docs/logs.md, How rules run on Spark).

The parser follows ``java.util.regex.Pattern``'s syntax far enough to count and classify groups: escapes
(``\\Q..\\E``, ``\\p{..}``, ``\\x{..}``, ``\\k<name>``, back references), nested character classes, every
group form (``(?:``, ``(?<name>``, lookarounds, ``(?>``, inline flags with the ``x`` comments mode), and
quantifiers with their lazy and possessive forms. It never rejects a pattern: the JVM does that
(``compile.java_regex_errors``).
"""

from __future__ import annotations

from dataclasses import dataclass

END = "\uffff"  # what _Parser.peek gives past the end: in none of the sets the parser tests


@dataclass(frozen=True)
class Group:
    """One capturing group, numbered from 1 in the order of its opening parenthesis."""

    optional: bool  # may take no part in a successful match
    can_be_empty: bool  # its content can match the empty string


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0
        self.comments = False  # the x flag: whitespace and #... comments are not part of the pattern
        self.groups: list[list[bool]] = []  # [optional, can_be_empty] per group, filled as parsed

    def peek(self, k: int = 0) -> str:
        """The character k ahead, or END past the end (so ``peek() in "?*"`` is False there)."""
        j = self.i + k
        return self.s[j] if j < len(self.s) else END

    def alternation(self) -> tuple[bool, list[int]]:
        """Branches separated by ``|`` up to ``)`` or the end: (can be empty, groups inside)."""
        empties, inside = [], []
        first = len(self.groups)
        while True:
            empty, groups = self.sequence()
            empties.append(empty)
            inside += groups
            if self.peek() != "|":
                break
            self.i += 1
        if len(empties) > 1:
            for g in range(first, len(self.groups)):
                self.groups[g][0] = True
        return any(empties), inside

    def sequence(self) -> tuple[bool, list[int]]:
        empty, inside = True, []
        while self.i < len(self.s) and self.peek() not in "|)":
            if self.comments and self.skip_comment():
                continue
            atom_empty, groups = self.atom()
            low = self.quantifier()
            if low == 0:
                atom_empty = True
                for g in groups:
                    self.groups[g][0] = True
            empty = empty and atom_empty
            inside += groups
        return empty, inside

    def skip_comment(self) -> bool:
        c = self.peek()
        if c.isspace():
            self.i += 1
            return True
        if c == "#":
            while self.i < len(self.s) and self.s[self.i] != "\n":
                self.i += 1
            return True
        return False

    def quantifier(self) -> int | None:
        """Reads a quantifier after an atom: its minimum (None when there is none)."""
        c = self.peek()
        low: int | None
        if c in "?*":
            low = 0
            self.i += 1
        elif c == "+":
            low = 1
            self.i += 1
        elif c == "{" and self.s.find("}", self.i) > self.i:
            end = self.s.index("}", self.i)
            body = self.s[self.i + 1 : end]
            head = body.split(",")[0].strip()
            if not head.isdigit():
                return None  # a literal "{" (Java refuses it; the JVM check says so)
            low = int(head)
            self.i = end + 1
        else:
            return None
        if self.peek() in ("?", "+"):
            self.i += 1  # lazy or possessive: the same minimum
        return low

    def atom(self) -> tuple[bool, list[int]]:
        c = self.peek()
        if c == "(":
            return self.group()
        if c == "[":
            self.char_class()
            return False, []
        if c == "\\":
            return self.escape(), []
        self.i += 1
        return c in "^$", []

    def group(self) -> tuple[bool, list[int]]:
        self.i += 1  # (
        capture, look = True, False
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == "<" and self.peek(2) not in "=!":
                self.i = self.s.index(">", self.i) + 1  # (?<name>
            elif nxt in ":>":
                capture = False
                self.i += 2
            elif nxt in "=!" or (nxt == "<" and self.peek(2) in "=!"):
                capture, look = False, True
                self.i += 3 if nxt == "<" else 2
            else:  # inline flags: (?flags) or (?flags:...)
                j = self.i + 1
                while j < len(self.s) and self.s[j] not in ":)":
                    j += 1
                flags = self.s[self.i + 1 : j]
                on = flags.split("-")[0]
                if "x" in on:
                    self.comments = True
                elif "x" in flags:
                    self.comments = False
                self.i = j + 1
                if j >= len(self.s) or self.s[j] == ")":
                    return True, []
                capture = False
        index = len(self.groups)
        if capture:
            self.groups.append([False, False])
        first = len(self.groups)
        empty, inside = self.alternation()
        if self.peek() == ")":
            self.i += 1
        if look:
            for g in range(first, len(self.groups)):
                self.groups[g][0] = True
            return True, inside
        if capture:
            self.groups[index][1] = empty
            return empty, [index, *inside]
        return empty, inside

    def char_class(self) -> None:
        self.i += 1  # [
        if self.peek() == "^":
            self.i += 1
        depth = 1
        while self.i < len(self.s) and depth:
            c = self.peek()
            if c == "\\":
                self.escape()
                continue
            if c == "[":
                depth += 1
            elif c == "]":
                depth -= 1
            self.i += 1

    def escape(self) -> bool:
        """Reads ``\\...``; True when it can match the empty string (an anchor or a back reference)."""
        self.i += 1
        c = self.peek()
        self.i += 1
        if c == "Q":
            end = self.s.find("\\E", self.i)
            end = len(self.s) if end < 0 else end
            quoted = self.s[self.i : end]
            self.i = min(end + 2, len(self.s))
            return quoted == ""
        if c in "pPxN" and self.peek() == "{":
            self.i = self.s.find("}", self.i) + 1 or len(self.s)
            return False
        if c == "k" and self.peek() == "<":
            self.i = self.s.find(">", self.i) + 1 or len(self.s)
            return True
        if c == "b" and self.peek() == "{":
            self.i = self.s.find("}", self.i) + 1 or len(self.s)
            return True
        if c.isdigit() and c != "0":
            while self.peek().isdigit():
                self.i += 1
            return True  # a back reference: the group's text, maybe empty
        if c == "0":  # octal \0n, \0nn, \0mnn
            while self.peek() in "01234567":
                self.i += 1
            return False
        if c == "x":
            self.i += 2
        elif c == "u":
            self.i += 4
        elif c == "c":
            self.i += 1
        return c in "bBAGzZ"


def groups(pattern: str) -> tuple[Group, ...]:
    """The capturing groups of a Java regex, in number order."""
    parser = _Parser(pattern)
    while parser.i < len(parser.s):
        parser.alternation()
        if parser.peek() == ")":  # an unbalanced ")" (Java refuses it); go on counting
            parser.i += 1
    return tuple(Group(optional, empty) for optional, empty in parser.groups)
