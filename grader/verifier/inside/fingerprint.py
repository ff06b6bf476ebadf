"""Fingerprints of exported programs, for finding copied work (the instructor's, never a verdict).

Two students who share code share a compiled program even when every name, comment and blank
line differs: JAX traces away Python names, and what is left is the module's text, its
locations (file, line, function names) and a few attributes that carry source names. This
module normalises that text so that only the program remains:

- every location goes: `loc(...)` (nested, with strings inside) and the `#loc... = ...` lines;
- attributes that carry source names go: `jax.result_info`, `jax.arg_info`,
  `mhlo.frontend_attributes`, `sym_name` (and the `{}` they leave);
- operations that change nothing are folded away: `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`
  and `x / 1`, where the 0 or 1 is a constant, maybe broadcast, reshaped or converted, and chains
  of them (`(x * 1.0 + 0.0) / 1.0` is `x`): each use of their result reads `x`, and the constants
  and broadcasts left unused go (`_fold_identities`), so a copy with `+ 0.0` or `* 1.0` after
  most operations is the program it copied;
- the module's own name goes (`module @jit_tax_switch` is the function's name); functions other
  than `@main` are renamed `@f1`, `@f2`... in order of first appearance (helpers' names are the
  student's);
- each `stablehlo.constant` line goes, and its uses read `<cK>` instead, where K is the rank of
  its (literal, type) among the module's distinct constants, sorted: the constants' order in the
  module (which follows the order the student wrote them in) no longer matters, their values and
  where each one is used still do; the sorted list is part of the digest;
- the operations of each block are put in one order decided by the program alone (`_canonical`):
  what each value is computed from, depth first from what the block returns, operands in order,
  so independent lines written in another order give the same text; functions follow `@main` in
  the order they are first called. A text this does not parse keeps its order;
- SSA names are renamed `%v0`, `%v1`... in order of definition, per function, each definition a
  new name (MLIR's own names count the constants removed above, `%arg`/`%iterArg` suffixes shift
  with them, and a loop's `cond` and `do` reuse the same ones);
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


_IDENTITY_LITERAL = {
    "0": re.compile(r'^dense<-?0(?:\.0*)?(?:e[+-]?\d+)?>$|^dense<0x0+>$|^dense<0x80+>$'),
    "1": re.compile(r'^dense<1(?:\.0*)?(?:e[+-]?0+)?>$'),
}
_SHAPED = re.compile(r'^(' + _SSA + r') = stablehlo\.(?:broadcast_in_dim|broadcast|reshape|convert) (' + _SSA + r')(?:,| :)')
_OPERAND = _SSA + r'(?:#\d+)?'  # `%5#2`: the third result of %5
_ARITHMETIC = re.compile(r'^(' + _SSA + r') = stablehlo\.(add|subtract|multiply|divide) (' + _OPERAND + r'), ('
                         + _OPERAND + r') : \S+$')
_FOLDS = {"add": ("0", "0"), "subtract": (None, "0"), "multiply": ("1", "1"), "divide": (None, "1")}
"""op -> (the constant that leaves the right operand as it is on the left, and the left on the right)."""


def _identity_of(literal: str) -> str | None:
    for kind, pattern in _IDENTITY_LITERAL.items():
        if pattern.match(literal):
            return kind
    return None


def _defined_names(line: str) -> set[str]:
    """The values a line defines: its results, and the arguments it declares (a block's, a loop's)."""
    results = _RESULTS.match(line)
    names = set(re.findall(_SSA, results.group(1))) if results else set()
    return names | {m.group(1) for m in _DECLARED.finditer(line) if m.group(1)}


def _fold_identities(lines: list[str]) -> list[str]:
    """The lines with `x + 0`, `x - 0`, `x * 1`, `x / 1` (and 0 + x, 1 * x) folded: the op goes and
    its result's uses read `x`; the 0 or 1 is a `stablehlo.constant` of that value (any dtype,
    splat) or a broadcast, reshape or conversion of one. Then the 0 and 1 definitions nothing uses
    any more go. Names are followed in text order, the latest definition of a name being the one
    its uses mean (sibling regions may reuse a name)."""
    if not any(" = stablehlo.add " in line or " = stablehlo.subtract " in line or " = stablehlo.multiply " in line
               or " = stablehlo.divide " in line for line in lines):
        return lines
    identity: dict[str, str] = {}  # value -> "0" or "1"
    alias: dict[str, str] = {}  # folded result -> the value it is
    out: list[str] = []
    candidates: set[int] = set()  # lines of out that define a 0 or a 1

    def use(m: re.Match) -> str:
        token = m.group()
        return alias.get(token, token) if token.startswith("%") else token

    for line in lines:
        if line.startswith("func.func "):
            identity, alias = {}, {}
        for name in _defined_names(line):
            identity.pop(name, None)
            alias.pop(name, None)
        results = _RESULTS.match(line)
        if alias:
            if results:  # its results keep their names; only the uses are followed
                line = line[:results.end()] + _NAMES.sub(use, line[results.end():])
            else:
                line = _NAMES.sub(use, line)
        constant = _CONSTANT.match(line)
        if constant is not None:
            kind = _identity_of(constant.group(2))
            if kind is not None:
                identity[constant.group(1)] = kind
                candidates.add(len(out))
            out.append(line)
            continue
        shaped = _SHAPED.match(line)
        if shaped is not None and shaped.group(2) in identity:
            identity[shaped.group(1)] = identity[shaped.group(2)]
            candidates.add(len(out))
            out.append(line)
            continue
        arithmetic = _ARITHMETIC.match(line)
        if arithmetic is not None:
            result, op, left, right = arithmetic.groups()
            keeps_left, keeps_right = _FOLDS[op][1], _FOLDS[op][0]
            if identity.get(right) == keeps_left:
                alias[result] = left
                if left in identity:
                    identity[result] = identity[left]
                continue
            if keeps_right is not None and identity.get(left) == keeps_right:
                alias[result] = right
                if right in identity:
                    identity[result] = identity[right]
                continue
        out.append(line)
    return _drop_unused(out, candidates)


def _drop_unused(lines: list[str], candidates: set[int]) -> list[str]:
    """The lines without those of `candidates` whose value nothing uses (its name appears on no
    other line of its function: each function has names of its own), repeated until none goes (a
    broadcast of a 0 goes, then the 0)."""
    while candidates:
        counts: dict[tuple[int, str], int] = {}
        function = [0] * len(lines)
        number = 0
        for i, line in enumerate(lines):
            number += line.startswith("func.func ")
            function[i] = number
            for m in _NAMES.finditer(line):
                if m.group().startswith("%"):
                    key = (number, m.group())
                    counts[key] = counts.get(key, 0) + 1
        unused = {i for i in candidates if counts.get((function[i], lines[i].split(" ", 1)[0]), 0) <= 1}
        if not unused:
            break
        keep = [i for i in range(len(lines)) if i not in unused]
        renumber = {old: new for new, old in enumerate(keep)}
        lines = [lines[i] for i in keep]
        candidates = {renumber[i] for i in candidates - unused}
    return lines


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
    """SSA names renamed %v0, %v1... in order of definition, afresh in each function: each
    definition (a result, a block's or a loop's argument) takes the next name and its uses
    follow it, so that two regions that reuse MLIR's names (a loop's `cond` and `do`) do not
    carry the numbers of the text's original order."""
    names: dict[str, str] = {}
    count = 0
    out = []
    for line in lines:
        if line.startswith("func.func "):
            names, count = {}, 0
        results = _RESULTS.match(line)
        defined = {m.start(1) for m in _DECLARED.finditer(line) if m.group(1)}
        if results:
            defined |= {m.start() for m in re.finditer(_SSA, results.group(1))}
        parts, start = [], 0
        for m in _NAMES.finditer(line):
            token = m.group()
            if not token.startswith("%"):
                continue
            if m.start() in defined or token not in names:
                names[token], count = f"%v{count}", count + 1
            parts += [line[start:m.start()], names[token]]
            start = m.end()
        out.append("".join(parts) + line[start:])
    return out


class _Unparsed(Exception):
    """A module text `_canonical` does not understand: its order is kept."""


_BRACKETS = re.compile(_STRING + r'|[{}()]')
_RESULTS = re.compile(r'^(' + _SSA + r'(?::\d+)?(?:, ' + _SSA + r'(?::\d+)?)*) = ')
_DECLARED = re.compile(_STRING + '|(' + _SSA + r')(?=: | = )')  # `%a: type` (block), `%a = %init` (loop)
_FRAME = re.compile(r'^(?:\}|[a-z_]+(?:\(| \{))')  # a region op's further line: `cond {`, `reducer(...) {`
_RETURN = re.compile(r'^"?[\w.]*\breturn\b')


def _balance(line: str) -> tuple[int, int]:
    """(the line's net count of open brackets, the lowest count reached along it), strings skipped."""
    if '"' not in line and not line.startswith(("}", ")")):  # most lines: counted, they close nothing first
        return line.count("{") + line.count("(") - line.count("}") - line.count(")"), 0
    depth = low = 0
    for m in _BRACKETS.finditer(line):
        token = m.group()
        if token in "{(":
            depth += 1
        elif token in "})":
            depth -= 1
            low = min(low, depth)
    return depth, low


def _items(lines: list[str]) -> list[list[str]]:
    """A block's operations, each with the lines of its regions."""
    items: list[list[str]] = []
    depth = 0
    for line in lines:
        if depth == 0 and not (items and _FRAME.match(line)):
            items.append([line])
        else:
            items[-1].append(line)
        depth += _balance(line)[0]
        if depth < 0:
            raise _Unparsed
    if depth:
        raise _Unparsed
    return items


def _with_canonical_regions(item: list[str]) -> list[str]:
    """An operation whose regions' blocks are each in canonical order (its own lines stay)."""
    out: list[str] = []
    body: list[str] = []
    depth, floor = 0, None
    for line in item:
        net, low = _balance(line)
        if floor is not None and depth + low >= floor:
            body.append(line)
        else:
            out += _canonical_block(body) if body else []
            body = []
            out.append(line)
            floor = depth + net if line.endswith("{") else None
        depth += net
    return out + (_canonical_block(body) if body else [])


def _names(item: list[str]) -> tuple[list[str], set[str]]:
    """(the values an operation uses from outside it, in order of appearance; those it defines)."""
    inside: set[str] = set()
    for line in item:
        results = _RESULTS.match(line)
        if results:
            inside.update(re.findall(_SSA, results.group(1)))
        inside.update(m.group(1) for m in _DECLARED.finditer(line) if m.group(1))
    used: dict[str, None] = {}
    for line in item:
        for m in _NAMES.finditer(line):
            token = m.group()
            if token.startswith("%") and token not in inside:
                used[token] = None
    results = _RESULTS.match(item[0])
    return list(used), set(re.findall(_SSA, results.group(1))) if results else set()


def _canonical_block(lines: list[str]) -> list[str]:
    """A block's operations depth first from what it returns (each after what it uses, operands
    in order), then any left over in their order, the block's label first and its return last."""
    items = [_with_canonical_regions(item) if len(item) > 1 else item for item in _items(lines)]
    label = [items.pop(0)] if items and items[0][0].startswith("^") else []
    if any(item[0].startswith("^") for item in items):
        raise _Unparsed  # a region of several blocks
    last = [items.pop()] if items and _RETURN.match(items[-1][0]) else []
    definer: dict[str, int] = {}
    uses: list[list[str]] = []
    for i, item in enumerate(items):
        used, defined = _names(item)
        uses.append(used)
        definer.update(dict.fromkeys(defined, i))
    order: list[int] = []
    state = [0] * len(items)  # 0 not seen, 1 on the way, 2 placed

    def place(root: int) -> None:
        if state[root]:
            return
        state[root] = 1
        stack = [(root, iter(uses[root]))]
        while stack:
            i, pending = stack[-1]
            for name in pending:
                j = definer.get(name)
                if j is not None and not state[j]:
                    state[j] = 1
                    stack.append((j, iter(uses[j])))
                    break
            else:
                stack.pop()
                state[i] = 2
                order.append(i)

    for name in _names(last[0])[0] if last else []:
        if name in definer:
            place(definer[name])
    for i in range(len(items)):
        place(i)
    return [line for item in label + [items[i] for i in order] + last for line in item]


def _canonical(lines: list[str]) -> list[str]:
    """The module with every function's blocks in canonical order, and its functions in the
    order they are first called from `@main` (unreached ones after, as they were)."""
    try:
        if len(lines) < 2 or not lines[0].startswith("module") or lines[-1] != "}":
            raise _Unparsed
        functions = [_with_canonical_regions(f) for f in _items(lines[1:-1])]
        named = {}
        for f in functions:
            m = _FUNC.match(f[0])
            if m is None:
                raise _Unparsed
            named[m.group(1)] = f
        order = ["@main"] if "@main" in named else []
        for name in order:
            for m in _SYMBOLS.finditer("\n".join(named[name][1:])):
                if m.group() in named and m.group() not in order:
                    order.append(m.group())
        order += [name for name in named if name not in order]
        return [lines[0], *(line for name in order for line in named[name]), lines[-1]]
    except (_Unparsed, IndexError, RecursionError):
        return lines


def normalise(text: str) -> tuple[str, list[str]]:
    """(the normalised module text, its sorted distinct constants as `literal : type`)."""
    text = _strip_source_attributes(_strip_locations(text))
    lines = [" ".join(line.split()) for line in text.split("\n")]
    lines, constants = _inline_constants(_fold_identities([line for line in lines if line]))
    lines = _rename_symbols(_canonical(lines))
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
