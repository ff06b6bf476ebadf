"""Fingerprints of exported programs, for finding copied work (the instructor's, never a verdict).

Two students who share code share a compiled program even when every name, comment and blank
line differs: JAX traces away Python names, and what is left is the module's text, its
locations (file, line, function names) and a few attributes that carry source names. This
module normalises that text so that only the program remains:

- every location goes: `loc(...)` (nested, with strings inside) and the `#loc... = ...` lines;
- attributes that carry source names go: `jax.result_info`, `jax.arg_info`,
  `mhlo.frontend_attributes`, `sym_name` (and the `{}` they leave);
- the module's own name goes (`module @jit_tax_switch` is the function's name); functions other
  than `@main` are renamed `@f1`, `@f2`... in order of first appearance (helpers' names are the
  student's);
- each `stablehlo.constant` line goes, and its uses read `<cK>` instead, where K is the rank of
  its (literal, type) among the module's distinct constants, sorted: the constants' order in the
  module (which follows the order the student wrote them in) no longer matters, their values and
  where each one is used still do; the sorted list is part of the digest;
- SSA names are renamed `%v0`, `%v1`... in order of first appearance, per function (MLIR's own
  names count the constants removed above, and `%arg`/`%iterArg` suffixes shift with them);
- runs of blanks become one, blank lines go.

`digest` is the sha256 of the normalised text and its constants: identical programs, identical
digests. `shingles` are 64-bit hashes of every NGRAM consecutive operations, each written with
its types and attributes but without its value names or constant values (a copy with a tweaked
constant or one extra op keeps most of them), the MAX_SHINGLES smallest (a bottom-k sketch:
the Jaccard similarity of two sketches estimates that of the full sets, exactly when both are
smaller than k).

Standard library only: the verifier's runtime loads this file by path, inside its sandbox, and
the grader imports it as `grader.verifier.inside.fingerprint`. Python 3.10 (the student pack).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

MAX_TEXT_CHARS = 16_000_000  # a longer module text is not fingerprinted (None)
MAX_SHINGLES = 256
NGRAM = 4
MAX_LITERAL = 80  # a longer constant literal is kept as its sha256

_STRING = r'"(?:[^"\\\n]|\\.)*"'
_SYMBOL = r'@(?:' + _STRING + r'|[A-Za-z_$.][\w$.-]*)'
_SSA = r'%(?:[A-Za-z_$.-][\w$.-]*|\d+)'
_LOC = re.compile(_STRING + r'|\bloc\(|[()]')
_SOURCE_ATTRS = re.compile(
    _STRING + r'|(?:\bjax\.result_info|\bjax\.arg_info|\bmhlo\.frontend_attributes|\bsym_name) = ')
_VALUE = re.compile(_STRING + r'|\{')
_BRACES = re.compile(_STRING + r'|[{}]')
_SYMBOLS = re.compile(_STRING + '|' + _SYMBOL)
_NAMES = re.compile(_STRING + '|' + _SSA + r'|<c\d+>')
_FUNC = re.compile(r'^func\.func (?:(?:public|private|nested) )?(' + _SYMBOL + r')')
_MODULE = re.compile(r'^module ' + _SYMBOL)
_CONSTANT = re.compile(r'^(' + _SSA + r') = stablehlo\.constant (.+) : (\S+)$')
_EMPTY = [(re.compile(r'\{[ \t]*,[ \t]*'), '{'), (re.compile(r',[ \t]*\}'), '}'), (re.compile(r',[ \t]*,'), ','),
          (re.compile(r' ?\battributes \{[ \t]*\}'), ''), (re.compile(r' ?\{[ \t]*\}'), '')]  # on one line


def _strip_locations(text: str) -> str:
    """The text without `loc(...)` (balanced, strings skipped) and without `#loc` alias lines."""
    if "loc(" not in text:  # the verifier prints its modules without them
        return text
    out, start, depth, cut = [], 0, 0, 0
    for m in _LOC.finditer(text):
        token = m.group()
        if depth == 0:
            if token == "loc(":
                depth, cut = 1, m.start()
                while cut > start and text[cut - 1] in " \t":
                    cut -= 1
        elif token == "(" or token == "loc(":
            depth += 1
        elif token == ")":
            depth -= 1
            if depth == 0:
                out.append(text[start:cut])
                start = m.end()
    out.append(text[start:] if depth == 0 else text[start:cut])
    lines = "".join(out).split("\n")
    return "\n".join(line for line in lines if not line.lstrip().startswith("#loc"))


def _strip_source_attributes(text: str) -> str:
    """The text without the attributes that carry source names: `name = "..."` or `name = {...}`
    (strings skipped, dictionaries balanced), and without the separators and `{}` they leave."""
    out, start, pos = [], 0, 0
    while (m := _SOURCE_ATTRS.search(text, pos)) is not None:
        pos = m.end()
        if m.group().startswith('"'):
            continue
        value = _VALUE.match(text, pos)
        if value is None:
            continue
        end = _balanced(text, value.end()) if value.group() == "{" else value.end()
        out.append(text[start:m.start()])
        start = pos = end
    out.append(text[start:])
    return _outside_strings("".join(out), _drop_empty)


def _balanced(text: str, pos: int) -> int:
    """The end of the dictionary whose `{` ends at `pos` (the text's end if it never closes)."""
    depth = 1
    for m in _BRACES.finditer(text, pos):
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
        if depth == 0:
            return m.end()
    return len(text)


def _drop_empty(code: str) -> str:
    for pattern, replacement in _EMPTY:
        code = pattern.sub(replacement, code)
    return code


def _outside_strings(text: str, fn: Callable[[str], str]) -> str:
    parts = re.split("(" + _STRING + ")", text)
    return "".join(part if i % 2 else fn(part) for i, part in enumerate(parts))


def _rename_symbols(lines: list[str]) -> list[str]:
    """The module's name dropped; defined functions other than @main renamed @f1, @f2... in
    order of first appearance. Other symbols (custom-call targets) stay."""
    defined = {m.group(1) for m in map(_FUNC.match, lines) if m} - {"@main"}
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        token = m.group()
        if token not in defined:
            return token
        return names.setdefault(token, f"@f{len(names) + 1}")

    renamed = [_MODULE.sub("module", line) for line in lines]
    return [_SYMBOLS.sub(rename, line) for line in renamed]


def _constant_key(literal: str, kind: str) -> str:
    if len(literal) > MAX_LITERAL:
        literal = "sha256:" + hashlib.sha256(literal.encode("utf-8")).hexdigest()
    return f"{literal} : {kind}"


def _inline_constants(lines: list[str]) -> tuple[list[str], list[str]]:
    """(lines without constant definitions, their uses reading <cK>; the sorted constants)."""
    keys = {i: _constant_key(m.group(2), m.group(3)) for i, m in enumerate(map(_CONSTANT.match, lines)) if m}
    constants = sorted(set(keys.values()))
    rank = {key: f"<c{k}>" for k, key in enumerate(constants)}
    out: list[str] = []
    bound: dict[str, str] = {}  # SSA name -> placeholder, the latest definition (it dominates its uses)

    def use(m: re.Match) -> str:
        return bound.get(m.group(), m.group())

    for i, line in enumerate(lines):
        if line.startswith("func.func "):
            bound = {}
        if i in keys:
            bound[line.split(" ", 1)[0]] = rank[keys[i]]
            continue
        out.append(_NAMES.sub(use, line) if bound else line)
    return out, constants


def _rename_values(lines: list[str]) -> list[str]:
    """SSA names renamed %v0, %v1... in order of first appearance, afresh in each function."""
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        token = m.group()
        if not token.startswith("%"):
            return token
        return names.setdefault(token, f"%v{len(names)}")

    out = []
    for line in lines:
        if line.startswith("func.func "):
            names = {}
        out.append(_NAMES.sub(rename, line))
    return out


def normalise(text: str) -> tuple[str, list[str]]:
    """(the normalised module text, its sorted distinct constants as `literal : type`)."""
    text = _strip_source_attributes(_strip_locations(text))
    lines = [" ".join(line.split()) for line in text.split("\n")]
    lines = _rename_symbols([line for line in lines if line])
    lines, constants = _inline_constants(lines)
    return "\n".join(_rename_values(lines)) + "\n", constants


def op_tokens(normalised: str) -> list[str]:
    """One token per line that says something (not only brackets): the line with its value
    names and constants blanked (`v`, `c`), so that a token is an op with its types."""
    tokens = []
    for line in normalised.split("\n"):
        if not re.search("[A-Za-z]", line):
            continue
        tokens.append(_NAMES.sub(_blank, line))
    return tokens


def _blank(m: re.Match) -> str:
    token = m.group()
    return token if token.startswith('"') else ("c" if token.startswith("<") else "v")


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def shingles(tokens: list[str], n: int = NGRAM, k: int = MAX_SHINGLES) -> list[int]:
    """The k smallest distinct hashes of n consecutive tokens (the whole sequence when shorter), sorted."""
    if not tokens:
        return []
    windows = {"\n".join(tokens[i:i + n]) for i in range(max(1, len(tokens) - n + 1))}
    return sorted({_hash64(w) for w in windows})[:k]


def fingerprint(text: str) -> dict | None:
    """{"digest", "shingles"} of a module's text; None when the text is too long to be worth it."""
    if len(text) > MAX_TEXT_CHARS:
        return None
    normalised, constants = normalise(text)
    digest = hashlib.sha256((normalised + "-- constants\n" + "\n".join(constants)).encode("utf-8")).hexdigest()
    return {"digest": digest, "shingles": shingles(op_tokens(normalised))}
