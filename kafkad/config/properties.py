"""Java `.properties` syntax (java.util.Properties.load), with the line each entry started on.

Logical lines: a physical line ending in an odd number of backslashes continues on the next one, whose
leading whitespace is dropped. Lines whose first non-blank character is `#` or `!` are comments. The key
ends at the first unescaped `=`, `:` or whitespace; then blanks, at most one `=`/`:`, and blanks are
skipped. Escapes: `\\t \\n \\r \\f \\uXXXX`, and `\\x` means `x` for any other character.
"""

from __future__ import annotations

from dataclasses import dataclass

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_BLANKS = " \t\f"


class PropertiesSyntaxError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class PropertyEntry:
    key: str
    value: str
    line: int  # 1-based number of the first physical line of the entry


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(_BLANKS) if pending else raw
        if not pending:
            stripped = line.lstrip(_BLANKS)
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending.append(line[:-1])
            continue
        pending.append(line)
        out.append((start, "".join(pending)))
        pending = []
    if pending:
        out.append((start, "".join(pending)))
    return out


def _unescape(s: str, line: int) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u":
            digits = s[i + 2 : i + 6]
            try:
                if len(digits) != 4:
                    raise ValueError(digits)
                out.append(chr(int(digits, 16)))
            except ValueError:
                raise PropertiesSyntaxError(line, f"malformed \\uXXXX escape: \\u{digits}") from None
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)


def _split(logical: str) -> tuple[str, str]:
    i = 0
    n = len(logical)
    while i < n:
        c = logical[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANKS:
            break
        i += 1
    key = logical[:i]
    j = i
    while j < n and logical[j] in _BLANKS:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _BLANKS:
            j += 1
    return key, logical[j:]


def parse_properties(text: str) -> list[PropertyEntry]:
    """Every entry in file order (a repeated key appears twice; the caller keeps the last)."""
    entries: list[PropertyEntry] = []
    for line, logical in _logical_lines(text):
        raw_key, raw_value = _split(logical)
        entries.append(PropertyEntry(_unescape(raw_key, line), _unescape(raw_value, line), line))
    return entries
