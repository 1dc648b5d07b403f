"""The parser's screen over the raw body (``_nothing_to_refuse``) may only skip the tree walk when the walk would
refuse nothing: on every body, ``load_json`` answers exactly as parsing and then walking always did."""

import json
import random

import pytest

from workflows.api.json_body import (
    MAX_DEPTH,
    BodyRejected,
    _nothing_to_refuse,
    _parse_float,
    _parse_int,
    _refuse_constant,
    check_tree,
    load_json,
)

SEED = 20261202
HAZARDS = [
    "\\u0000",
    "\\uD800",
    "\\udfff",
    "\\ud83d\\ude00",
    "\\\\u0000",
    '\\"[{',
    "[[{{",
    "é",
    "\\n",
    "x",
    "RAW",
    "\\\\",
    '\\\\\\"]',
    "]}",
    "[",
    "\\t{",
]


def walked(raw: bytes) -> object:
    """What the parser answered before the screen: parse, then always walk."""
    try:
        data = json.loads(raw, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant)
    except RecursionError:
        return ("too_deep", None)
    except ValueError:
        return ("malformed_json", None)
    try:
        check_tree(data)
    except BodyRejected as exc:
        return (exc.code, exc.field)
    return data


def screened(raw: bytes) -> object:
    try:
        return load_json(raw)
    except BodyRejected as exc:
        return (exc.code, exc.field)


def random_body(rng: random.Random) -> str:
    def value(depth: int) -> str:
        pick = rng.random()
        if depth < 70 and pick < 0.45:
            if rng.random() < 0.5:
                return "[" + ",".join(value(depth + 1) for _ in range(rng.randint(0, 2))) + "]"
            items = (f'"{rng.choice(HAZARDS)}{i}": {value(depth + 1)}' for i in range(rng.randint(0, 2)))
            return "{" + ",".join(items) + "}"
        if pick < 0.7:
            return '"' + "".join(rng.choice(HAZARDS) for _ in range(rng.randint(0, 3))) + '"'
        return rng.choice(["1", "-2.5e3", "1e400", "-1E+400", "1e-400", "9" * 70, "9" * 64, "1e99", "true", "3.0"])

    return value(0)


def test_the_screen_never_changes_an_answer():
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    for _ in range(3000):
        raw = random_body(rng).encode().replace(b"RAW", b"\xed\xa0\x80")  # a surrogate as raw UTF-8 bytes
        assert screened(raw) == walked(raw), raw[:200]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (b'{"a": [1, {"b": "c"}]}', True),
        (b'{"a": "\\u0000"}', False),
        (b'{"\\uDA00": 1}', False),
        (b'{"a": "\\\\u0000"}', False),  # an escaped backslash: a false alarm, walked
        (b'{"a": "\xed\xa0\x80"}', False),  # a surrogate as raw UTF-8 bytes
        (b'{"a": "[[[[{{"}', True),  # brackets inside text are not nesting
        (("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode(), True),
        (("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).encode(), False),
    ],
)
def test_the_screen_passes_only_bodies_it_can_vouch_for(raw, clean):
    assert _nothing_to_refuse(raw) is clean


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": [1e400]}',
        b'{"a": 1' + b"0" * 70 + b"}",
        '{"a": [1e400]}'.encode("utf-16"),  # not UTF-8: numbers and text are read the slow way
        '{"a": "\\u0000"}'.encode("utf-32"),
        ('{"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}").encode("utf-16"),
        # Escapes next to string bounds must not hide the nesting from the screen.
        ('{"a": "x\\"", "b": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + ', "c": "\\""}').encode(),
        ('{"a": "x\\\\", "b": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + ', "c": "\\\\"}').encode(),
        ('{"a": "\\\\\\"", "b": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + ', "c": "\\\\\\""}').encode(),
    ],
)
def test_what_the_screen_cannot_vouch_for_is_refused_as_before(raw):
    assert isinstance(walked(raw), tuple)
    assert screened(raw) == walked(raw)
