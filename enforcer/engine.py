"""The one state machine that runs every :class:`~enforcer.formats.FormatSpec`.

The matcher stands at a *place* of the format's graph. In a place with text, a text token
advances the place's text rule (:mod:`enforcer.text_rules`); a control token is allowed only on
one of the place's edges, only once the text is complete, and only if the edge's guard holds.
Every step is a tuple pushed on a stack, so ``rollback`` is a pop. Nothing raises while
decoding: a refused token returns False and leaves the state unchanged.

State tuple: ``(place, text_state, counter, tool, written, value, start)`` - ``tool`` is the
called tool (``None`` before the call names one), ``written`` the bitmask of argument keys written in this
call, ``value`` the current argument as ``key * 8 + type``, ``start`` the position of the
first token of the current text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .arguments import VALUE_TYPES, arguments_json
from .automaton import DEAD
from .ids import as_token_id
from .matcher import Matcher, write_bitmask_row
from .text_rules import DfaRule

if TYPE_CHECKING:  # the compiled tools make matchers: tools.py imports this module, not the reverse
    from .tools import CompiledTools


_CALL_OPENERS = ("header", "tag", "named")
"""Kinds of text that name a call (entering one starts a call's arguments afresh)."""
_NAMED = -2
"""A recorded part that is a whole :class:`~enforcer.formats.NamedJson` call text (-1: JSON
arguments)."""


class ToolCallMatcher(Matcher):
    """Per-sequence cursor over a :class:`CompiledTools`. Not thread-safe; one per sequence;
    microseconds per token."""

    __slots__ = ("_tools", "_stack", "_tokens", "_calls")

    def __init__(self, tools: CompiledTools, place: int, counter: int) -> None:
        self._tools = tools
        self._stack: list[tuple] = [tools.enter(place, counter, None, 0, 0, 0)]
        self._tokens: list[int] = []
        self._calls: list[tuple[int, int, tuple, int]] = []  # (counter, tool, parts, tokens when complete)

    # ---- advancing -----------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when it is not allowed here, including
        anything after the stop token and any id that is not an integer in
        ``range(vocab_size)`` (see :func:`~enforcer.ids.as_token_id`)."""
        if type(token_id) is not int:
            token_id = as_token_id(token_id)
            if token_id is None:
                return False
        if not 0 <= token_id < self._tools.vocabulary.vocab_size:
            return False
        nxt = self._next(self._stack[-1], token_id)
        if nxt is None:
            return False
        self._stack.append(nxt)
        self._tokens.append(token_id)
        if self._tools.ends_call[nxt[0]] and nxt[0] != self._stack[-2][0]:
            self._record_call()
        return True

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens."""
        if num_tokens < 0 or num_tokens > len(self._tokens):
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._tokens)} accepted")
        if not num_tokens:
            return
        del self._stack[-num_tokens:]
        del self._tokens[-num_tokens:]
        keep = len(self._tokens)
        while self._calls and self._calls[-1][3] > keep:
            self._calls.pop()

    def _next(self, state: tuple, t: int) -> tuple | None:
        place, tstate, counter, tool, written, value, start = state
        tools = self._tools
        exits = tools.exits(place, tool, written)
        target = exits.get(t)
        rule = tools.rule(state)
        if target is None:
            if rule is None:
                return None
            tstate = rule.step(tstate, t)
            if tstate == DEAD:
                return None
            after = tools.after_text[place]
            return (after if after >= 0 else place, tstate, counter, tool, written, value, start)
        if rule is not None:
            if not rule.accepting(tstate):
                return None
            kind = tools.kinds[place]
            if kind == "word" and target < 0:
                target = rule.payload(tstate)
            elif kind == "header":
                tool = tools.tool_from_header(self._text(start), counter)
                if tool is None:
                    return None
            elif kind == "tag":
                tool = rule.payload(tstate)
            elif kind == "named":
                tool = tools.tool_from_named_json(self._text(start))
                if tool is None:
                    return None
            elif kind == "argtag":
                key, type_index = rule.payload(tstate)
                written |= 1 << key
                value = key * 8 + type_index
        if tools.kinds[target] in _CALL_OPENERS:
            written = 0
        if tools.ends_call[target]:
            counter += 1
        return tools.enter(target, counter, tool, written, value, len(self._tokens) + 1)

    def _text(self, start: int) -> str:
        data = self._tools.vocabulary.byte_tokens
        return b"".join(data[t] for t in self._tokens[start:]).decode("utf-8", "replace")

    def _record_call(self) -> None:
        """A call just completed: walk back to its header and keep its argument spans.
        ``_stack[k]`` is the state after ``k`` tokens, so a text state at ``k`` followed by another
        place means the token at position ``k`` ended that text."""
        tools = self._tools
        parts: list[tuple[int, int, int, int]] = []  # (value, start, end, tag start); value -1: JSON
        counter = self._stack[-2][2]
        tool = self._stack[-1][3]  # the edge that ended the call knows its tool (a named-JSON text names it last)
        for pos in range(len(self._stack) - 2, -1, -1):
            place, _, _, _, _, value, start = self._stack[pos]
            kind = tools.kinds[place]
            if kind == "named":
                parts.append((_NAMED, start, pos, -1))
                break
            if kind in ("header", "tag"):
                break
            if self._stack[pos + 1][0] != place:
                if kind == "json":
                    parts.append((-1, start, pos, -1))
                elif kind == "value":
                    parts.append((value, start, pos, self._stack[start - 1][6]))
        parts.reverse()
        self._calls.append((counter, tool, tuple(parts), len(self._tokens)))

    # ---- masks ---------------------------------------------------------------------------

    def _mask_words(self) -> tuple[np.ndarray, tuple]:
        return self._tools.mask(self._stack[-1])

    def mask_words(self, compute: bool = True) -> np.ndarray | None:
        if not compute:
            return self._tools.cached_mask(self._stack[-1])
        return self._mask_words()[0]

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed tokens into row ``index`` of a packed int32 bitmask (numpy array
        or torch tensor of shape ``(batch, ceil(vocab_size / 32))``); bit ``i % 32`` of word
        ``i // 32`` is set iff ``accept_token(i)`` would return True (after the stop token: no
        bit). ``ValueError`` before writing for another dtype or shape, or an ``index`` that is
        not a row (:func:`~enforcer.matcher.check_bitmask`)."""
        words, key = self._mask_words()
        if isinstance(bitmask, np.ndarray):
            write_bitmask_row(bitmask, index, words)
        else:
            write_bitmask_row(bitmask, index, words, self._tools.cached_torch(key, words))

    def allowed_token_ids(self) -> list[int]:
        """The ids ``accept_token`` would accept now, ascending (empty after the stop token)."""
        words, _ = self._mask_words()
        return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist()

    # ---- status --------------------------------------------------------------------------

    def is_accepting(self) -> bool:
        """The turn may end here (the stop token is allowed) or has ended."""
        state = self._stack[-1]
        if self.is_finished:
            return True
        tools = self._tools
        if tools.stop_id not in tools.exits(state[0], state[3], state[4]):
            return False
        rule = tools.rule(state)
        return rule is None or rule.accepting(state[1])

    @property
    def is_finished(self) -> bool:
        """The stop token was accepted: nothing more may follow."""
        return bool(self._tokens) and self._tokens[-1] == self._tools.stop_id and \
            self._stack[-1][0] == self._tools.done

    @property
    def in_tool_section(self) -> bool:
        return self._tools.in_section[self._stack[-1][0]]

    @property
    def call_index(self) -> int:
        """The counter the next (or current) call carries."""
        return self._stack[-1][2]

    @property
    def error(self) -> str | None:
        """Why no token can follow, if that is the case (never raised)."""
        if self.is_finished:
            return None
        words, _ = self._mask_words()
        if not words.any():
            rule = self._tools.rule(self._stack[-1])
            exhausted = rule.dfa.exhausted if isinstance(rule, DfaRule) else None
            return exhausted or "no token of the vocabulary can continue from this state"
        return None

    @property
    def calls(self) -> list[dict]:
        """Completed calls so far, in OpenAI's ``tool_calls`` shape."""
        tools = self._tools
        data = tools.vocabulary.byte_tokens
        out = []
        for counter, tool, parts, _ in self._calls:
            def text(s: int, e: int) -> str:
                return b"".join(data[t] for t in self._tokens[s:e]).decode("utf-8", "replace")

            if parts and parts[0][0] == _NAMED:
                args = tools.named_json_arguments(text(parts[0][1], parts[0][2]), tool)
            elif parts and parts[0][0] < 0:
                args = text(parts[0][1], parts[0][2])
            else:
                keys = tools.arguments[tool].keys
                args = arguments_json(
                    (keys[v >> 3].name if v >> 3 < len(keys) else tools.extra_key_name(text(tag, s - 1), v & 7),
                     VALUE_TYPES[v & 7], text(s, e)) for v, s, e, tag in parts)
            name = tools.tool_names[tool]
            out.append({"id": tools.format.call_id.format(name=name, index=counter), "type": "function",
                        "function": {"name": name, "arguments": args}})
        return out

    @property
    def token_ids(self) -> list[int]:
        return list(self._tokens)
