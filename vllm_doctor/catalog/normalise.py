"""What the catalog reads a record as: an exception's several arguments joined back into one message.

Python prints an exception raised with several arguments as the tuple of them: ``str(exc)`` is
``str(exc.args)``, so ``raise RuntimeError("Quantization scheme is not supported for ", f"the
current GPU. Min capability: {m}. ", f"Current capability: {c}.")`` (vLLM 0.5.5-0.28,
``model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
_check_scheme_supported`` and ``quark/quark.py``; a comma where implicit concatenation was
meant) ends its traceback with::

    RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 75. ', 'Current capability: 70.')

and ``repr(exc)`` (``Worker failed with error 'RuntimeError(...)'``, ``original error: ...``) with
``RuntimeError('Quantization scheme ...', 'the current GPU. ...', ...)``. The words of one
message are then split by ``', '`` wherever vLLM's source split its arguments, and no pattern
written for the message can read them.

:func:`join_arg_tuples` joins each such tuple back: a parenthesised, comma-separated run of two
or more Python string literals becomes the joined text (decoded as Python would: escapes such
as ``\\n`` and ``\\'``), or, right after a name (the repr form ``Name('a', 'b')``), one string
literal ``Name('ab')``. A tuple cut by the end of the text (a log store's line cap, a paste cut
short) is joined as far as it goes, down to its first argument. Anything else is left as it is.
"""

from __future__ import annotations

import ast

import regex

_STR = r"'(?:[^'\\\n]|\\.)*+'|\"(?:[^\"\\\n]|\\.)*+\""
#: An unterminated last literal: the text ends inside it.
_OPEN = r"'(?:[^'\\\n]|\\.)*+\\?\Z|\"(?:[^\"\\\n]|\\.)*+\\?\Z"
_TUPLE = regex.compile(
    r"(?:(?<=[\w.])(?P<call>\()|\()\s*(?:"
    r"(?P<items>(?:" + _STR + r")(?P<more>(?:\s*,\s*(?:" + _STR + r"))+)?)"
    r"(?:(?(more)\s*,?\s*(?P<closed>\))|(?!))"  # closed: two items or more
    r"|\s*,\s*(?P<open>" + _OPEN + r")"  # cut inside a later item
    r"|\s*,?\s*\Z)"  # cut after an item
    r"|(?P<open0>" + _OPEN + r"))"  # cut inside the first item
)
_ITEM = regex.compile(_STR)


def might_hold_arg_tuple(text: str) -> bool:
    """A cheap test: False when ``text`` surely holds no tuple of string literals (``repr``
    opens one with ``('`` or ``("``)."""
    return "('" in text or '("' in text


def _literal(item: str) -> str:
    value = ast.literal_eval(item)
    if not isinstance(value, str):  # pragma: no cover - _STR admits string literals only
        raise ValueError(item)
    return value


def _open_literal(item: str) -> str:
    """The text of a string literal the end of the text cut short (a dangling backslash dropped)."""
    body = item[1:]
    if body.endswith("\\") and not body.endswith("\\\\"):
        body = body[:-1]
    return _literal(item[0] + body + item[0])


def _joined(m: "regex.Match") -> str:
    try:
        parts = [_literal(x) for x in _ITEM.findall(m["items"] or "")]
        if m["open"] or m["open0"]:
            parts.append(_open_literal(m["open"] or m["open0"]))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return m.group(0)  # not Python literals after all: leave the text as it is
    text = "".join(parts)
    if not m["call"]:
        return text
    if not m["closed"]:
        return "(" + repr(text)[:-1]  # cut short: left open, as printed
    return "(" + repr(text) + ")"


def join_arg_tuples(text: str) -> str:
    """``text`` with every tuple repr of two or more string literals joined into one message.

    ``"RuntimeError: ('a ', 'b 7.')"`` -> ``"RuntimeError: a b 7."``;
    ``"RuntimeError('a ', 'b 7.')"`` -> ``"RuntimeError('a b 7.')"``; a tuple the text ends in
    (``"('a ', 'b 7"``) -> ``"a b 7"``. Text without such a tuple is returned unchanged (the
    same object). Never raises.
    """
    if not might_hold_arg_tuple(text):
        return text
    return _TUPLE.sub(_joined, text)
