"""JSON from the kernel, read with bounds: sized, measured, then parsed.

The kernel is the student's process, so any JSON it sends may be hostile: a 5,000-digit integer,
nesting 100,000 levels deep, 8 MiB of `[],` (2.8 million Python lists). `loads_bounded` refuses a
text over its size, then counts its depth and values without parsing it (`shape_of`, linear time),
and only then parses it, with numbers capped at MAX_NUMBER_CHARS characters. A refusal is a
`MessageRejected` with one sentence saying why.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_MESSAGE_NODES = 100_000
"""JSON values in a header, a parent header, metadata, or the content of a message that is not an
observation (a traceback of 100,000 lines is not an honest one)."""
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 100

# Strings (an unterminated one runs to the end: every match attempt succeeds, so this stays
# linear), then JSON whitespace, then every run of scalar characters: what remains is one '0' per
# string or scalar, and the brackets, commas and colons.
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.S)
_SPACE = re.compile(r"[ \t\n\r]+")
_SCALARS = re.compile(r"[^\[\]{},:]+")
_ONLY_BRACKETS = str.maketrans("", "", "0,:")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class MessageRejected(Exception):
    """A message from the kernel that the grader will not accept; `reason` says why. Defined here,
    where the first refusal is made, and raised by the session and the sockets too."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"the kernel sent a message the grader could not accept: {self.reason}"


def describe_size(n: int) -> str:
    """A size as a reason says it: "52.0 MiB", "4.0 KiB", "12 bytes"."""
    if n >= 2**20:
        return f"{n / 2**20:.1f} MiB"
    if n >= 2**10:
        return f"{n / 2**10:.1f} KiB"
    return f"{n} bytes"


class _Refused(Exception):
    pass


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        digits = len(text.lstrip("-"))
        raise _Refused(f"an integer of {digits} digits (at most {MAX_NUMBER_CHARS} are accepted)")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS} are accepted)")
    return float(text)


def _parse_constant(text: str) -> Any:
    raise _Refused(f"{text}, which JSON does not allow")


def shape_of(text: str) -> tuple[int, int]:
    """(depth, values) of a JSON text, without parsing it; linear time, and brackets inside
    strings do not count. `values` counts what `json.loads` would build (every string, number,
    literal, list and object; not the keys) and is exact for valid JSON: one value, plus one per
    comma, plus one per container that is not empty."""
    skeleton = _SCALARS.sub("0", _SPACE.sub("", _STRINGS.sub("0", text)))
    opened = skeleton.count("[") + skeleton.count("{")
    values = 1 + skeleton.count(",") + opened - skeleton.count("[]") - skeleton.count("{}")
    brackets = skeleton.translate(_ONLY_BRACKETS)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0), values


def depth_of(text: str) -> int:
    """How deeply the JSON text nests (brackets inside strings do not count); linear time."""
    return shape_of(text)[0]


def decode_bounded(data: bytes | memoryview | bytearray, *, limit: int, what: str) -> str:
    """The text of at most `limit` bytes, decoded as jupyter_client decodes it."""
    size = len(data)
    if size > limit:
        raise MessageRejected(f"its {what} is {describe_size(size)}, "
                              f"more than the {describe_size(limit)} accepted")
    return bytes(data).decode("utf-8", "replace")  # as jupyter_client decodes


def measure(text: str, *, what: str, max_nodes: int) -> int:
    """The values of a text that nests at most MAX_DEPTH levels and holds at most `max_nodes` values
    (nothing is built to count them)."""
    depth, values = shape_of(text)
    if depth > MAX_DEPTH:
        raise MessageRejected(f"its {what} is nested {depth} levels deep "
                              f"(at most {MAX_DEPTH} are accepted)")
    if values > max_nodes:
        raise MessageRejected(f"its {what} holds {values:,} values (at most {max_nodes:,} are accepted)")
    return values


def parse_measured(text: str, *, what: str) -> Any:
    """A text that `measure` accepted, parsed, with every number at most MAX_NUMBER_CHARS long."""
    try:
        return json.loads(text, parse_int=_parse_int, parse_float=_parse_float,
                          parse_constant=_parse_constant)
    except _Refused as exc:
        raise MessageRejected(f"its {what} holds {exc}") from None
    except RecursionError:
        raise MessageRejected(f"its {what} is nested too deeply") from None
    except ValueError as exc:
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise MessageRejected(f"its {what} is not valid JSON ({first})") from None


def loads_bounded(data: bytes | memoryview | bytearray, *, limit: int, what: str,
                  max_nodes: int = MAX_MESSAGE_NODES) -> Any:
    """JSON from the kernel: at most `limit` bytes, MAX_DEPTH levels, `max_nodes` values (counted
    before anything is built), MAX_NUMBER_CHARS per number."""
    text = decode_bounded(data, limit=limit, what=what)
    measure(text, what=what, max_nodes=max_nodes)
    return parse_measured(text, what=what)
