"""Parse agent JSON bodies defensively: agent input is untrusted (DESIGN.md, guarantee 6).

``json.loads`` accepts things the rest of the stack cannot store or answer
safely: NUL characters (PostgreSQL rejects ``\\u0000`` in text and jsonb),
lone surrogates (not encodable as UTF-8), ``NaN``/``Infinity`` (not JSON),
numbers no column or jsonb value can hold, and nesting deep enough to blow the
recursion limit of whatever walks it next. Each is refused here with the path
of the offending value, so the agent gets a 4xx that names the field.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from django.http import HttpRequest
from ninja.parser import Parser

from ..shapes import Json

MAX_DEPTH = 64
# Longer integers are not real data: they overflow every column and most JSON readers.
MAX_INT_DIGITS = 64


class BodyRejected(Exception):
    """The body cannot be accepted; carries the API error it should produce."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


class _Unrepresentable:
    """Stands in for a number too large to store, so the tree walk can report its path."""

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_int(text: str) -> int | _Unrepresentable:
    # Checked before int(): CPython refuses >4300 digits only after the work is done.
    return int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else _Unrepresentable(text)


def _parse_float(text: str) -> float | _Unrepresentable:
    value = float(text)
    return value if math.isfinite(value) else _Unrepresentable(text)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def dotted(path: tuple[str | int, ...]) -> str | None:
    """``("steps", 0, "seq")`` -> ``"steps.0.seq"``, with unprintable characters escaped."""
    if not path:
        return None
    return ".".join(str(part).encode("utf-8", "backslashreplace").decode().replace("\x00", "\\u0000") for part in path)


def _check_text(text: str, path: tuple[str | int, ...]) -> None:
    if "\x00" in text:
        raise BodyRejected(422, "nul_character", "Text may not contain NUL (\\u0000) characters.", dotted(path))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyRejected(
            422,
            "invalid_unicode",
            "Text contains a lone surrogate (like \\ud800) that is not valid Unicode.",
            dotted(path),
        ) from None


def check_tree(data: object) -> None:
    """Walk the parsed body (JSON values, and the numbers ``_parse_int`` could not keep) without recursion and
    refuse what cannot be stored."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise BodyRejected(
                422, "too_deep", f"The body is nested deeper than {MAX_DEPTH} levels.", dotted(path[: MAX_DEPTH + 1])
            )
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, (*path, key))
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, _Unrepresentable):
            shown = value.text if len(value.text) <= 24 else value.text[:24] + "…"
            raise BodyRejected(422, "number_out_of_range", f"The number {shown} is too large to store.", dotted(path))


# A NUL or a lone surrogate reaches a parsed string only through a \\u escape (strict json.loads refuses raw
# control characters) or, for a surrogate, as its raw UTF-8 bytes (ED A0-BF ..: json.loads decodes bytes with
# "surrogatepass"). A match inside text (an escaped backslash before "u0000") is a false alarm, which only costs
# the full walk. Each is looked for only when its first bytes occur at all (a plain substring search).
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


def _nothing_to_refuse(raw: bytes) -> bool:
    """True when ``check_tree`` certainly refuses nothing in the UTF-8 JSON ``raw`` parsed to (numbers aside,
    which ``load_json`` screens): no escape that can make a NUL or a surrogate, and containers nested at most
    MAX_DEPTH deep. Substring searches and byte translations over the body instead of a Python step per value (a
    batch of 500 steps holds some 15,000 values). False only means "walk the tree", which finds and names the
    fault."""
    if b"\\u" in raw and _SUSPECT_ESCAPE.search(raw):
        return False
    if b"\xed" in raw and _SURROGATE_BYTES.search(raw):
        return False
    # Text out, structure in: escaped backslashes, then escaped quotes, leave every remaining quote a string's
    # bound; keep only quotes and brackets, and drop what lies between each pair of quotes.
    structure = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(structure.split(b'"')[::2])
    for _level in range(MAX_DEPTH):  # each pass removes the innermost level of containers
        if not brackets:
            return True
        brackets = _INNERMOST.sub(b"", brackets)
    return not brackets


# A number that may not be storable: over 64 digits in a row (digits in text are false alarms, which only cost
# the slower parse). Floats are always read by _parse_float: one past 1e308 is not finite.
_LONG_DIGITS = b"0" * 65
_TO_ZERO_OR_SPACE = bytes(ord("0") if b in b"0123456789" else ord(" ") for b in range(256))


def load_json(raw: bytes) -> Json:
    unrepresentable: list[_Unrepresentable] = []

    def noted(value: int | float | _Unrepresentable) -> int | float | _Unrepresentable:
        if isinstance(value, _Unrepresentable):
            unrepresentable.append(value)
        return value

    utf8 = json.detect_encoding(raw) == "utf-8"
    try:
        if utf8 and _LONG_DIGITS not in raw.translate(_TO_ZERO_OR_SPACE):
            # Every integer is an ordinary one: the C parser's own reading of each gives what _parse_int would,
            # without a Python call per number.
            data: Json = json.loads(
                raw, parse_float=lambda text: noted(_parse_float(text)), parse_constant=_refuse_constant
            )
        else:
            data = json.loads(
                raw,
                parse_int=lambda text: noted(_parse_int(text)),
                parse_float=lambda text: noted(_parse_float(text)),
                parse_constant=_refuse_constant,
            )
    except RecursionError:
        raise BodyRejected(422, "too_deep", f"The body is nested deeper than {MAX_DEPTH} levels.") from None
    except ValueError as exc:  # includes UnicodeDecodeError and json.JSONDecodeError
        raise BodyRejected(400, "malformed_json", f"The body is not valid JSON ({exc}).") from None
    if unrepresentable or not utf8 or not _nothing_to_refuse(raw):
        check_tree(data)
    return data


class StrictJSONParser(Parser):
    """ninja wraps any error raised here in HttpError(400); the API's handler unwraps BodyRejected."""

    def parse_body(self, request: HttpRequest) -> Any:
        return load_json(request.body)
