"""The one state machine that runs every :class:`~enforcer.formats.FormatSpec`.

The matcher stands at a *place* of the format's graph. In a place with text, a text token
advances the place's text rule (:mod:`enforcer.text_rules`); a control token is allowed only on
one of the place's edges, only once the text is complete, and only if the edge's guard holds.
Every step pushes a :class:`Frame` and a text state on a stack, so ``rollback`` is a pop. Nothing
raises while decoding: a refused token returns False and leaves the state unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .arguments import VALUE_TYPES, arguments_json
from .automaton import DEAD
from .formats.base import call_id
from .ids import as_token_id
from .item_memory import START, Scan, remembered_words, scan
from .matcher import Matcher, write_row
from .text_rules import DfaRule

if TYPE_CHECKING:  # the compiled tools make matchers: tools.py imports this module, not the reverse
    from .tools import CompiledTools


class Argument(NamedTuple):
    """The argument a split-argument call is writing: its key (index into the tool's
    :class:`~enforcer.arguments.SplitArguments` keys; ``len(keys)``: an undeclared key) and the
    JSON type its tag named (index into ``VALUE_TYPES``)."""

    key: int
    type: int


class Frame(NamedTuple):
    """The place a matcher stands at and what the turn knows there (immutable), made by
    :meth:`CompiledTools.enter` when a control token is taken or the first free text moves to
    another place, with the place's rule and exits resolved then. A text token keeps the frame
    and moves only the text rule's int state, which the matcher keeps beside it: no record is
    built per text token."""

    place: int
    """Index of the format place (:attr:`CompiledTools.places`)."""
    counter: int
    """The call counter the current (or next) call carries."""
    tool: int | None
    """Index of the called tool; None until a call names one."""
    written: int
    """Bitmask of the argument keys written in this call (split-argument formats)."""
    value: Argument | None
    """The argument being written (None: outside an argument's value and tag)."""
    start: int
    """Position of the first token of this place's text."""
    rule: Any
    """The place's text rule for this frame (None: no text here)."""
    exits: dict[int, int]
    """Control token id -> the place it leads to, for the edges whose guard holds here."""
    after_text: int
    """The place a text token moves to (-1: this one)."""
    mask_key: tuple
    """What the masks of this frame are cached by (with the text state)."""


class MatcherState(NamedTuple):
    """Where a matcher stands: its frame and its text rule's state (:attr:`ToolCallMatcher.state`)."""

    frame: Frame
    text_state: int


class _Part(NamedTuple):
    """One recorded span of a completed call's text, token positions ``[start, end)``: the kind
    of the place that held it (``"json"``: the JSON arguments, ``"named"``: a whole named-JSON
    call text, ``"value"``: one argument's value, with its ``argument`` and the position of its
    tag's text)."""

    kind: str
    start: int
    end: int
    argument: Argument | None = None
    tag: int = -1


class _Call(NamedTuple):
    """A completed call: its counter, tool index, text spans, and the token count at completion."""

    counter: int
    tool: int
    parts: tuple[_Part, ...]
    tokens: int


_CALL_OPENERS = ("header", "tag", "named")
"""Kinds of text that name a call: entering one starts a call's arguments afresh, and the state
of its rule that completes the text names the tool (the rule's payload; the text is never read
again)."""


class ToolCallMatcher(Matcher):
    """Per-sequence cursor over a :class:`CompiledTools`. Not thread-safe; one per sequence;
    microseconds per token."""

    __slots__ = ("_tools", "_stack", "_tokens", "_calls", "_scans", "_masked")

    def __init__(self, tools: CompiledTools, place: int, counter: int) -> None:
        self._tools = tools
        self._stack: list[tuple[Frame, int]] = [(tools.enter(place, counter, None, 0, None, 0), 0)]
        """(frame, text rule state) after ``k`` tokens, at ``k`` (a pair: a text token shares its
        frame with the previous step)."""
        self._tokens: list[int] = []
        self._calls: list[_Call] = []
        self._scans: list[Scan | None] = [None]
        """The item memory of the JSON arguments being written after ``k`` tokens (None: not
        inside arguments whose schema has a ``uniqueItems`` plan)."""
        self._masked: tuple[Scan, Frame, int, np.ndarray] | None = None
        """The last mask with the item memory's refusals cleared, and where it was computed."""

    # ---- advancing -----------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when it is not allowed here, including
        anything after the stop token and any id that is not an integer in
        ``range(vocab_size)`` (see :func:`~enforcer.ids.as_token_id`)."""
        if type(token_id) is not int:
            token_id = as_token_id(token_id)
            if token_id is None:
                return False
        tools = self._tools
        if not 0 <= token_id < tools.vocab_size:
            return False
        frame, text_state = self._stack[-1]
        nxt = self._next(frame, text_state, token_id)
        if nxt is None:
            return False
        remembered = None
        plan = tools.unique_plan(nxt[0]) if tools.remembers_items else None
        if plan is not None:  # JSON arguments with unique arrays: the token's text, if any, is theirs
            text = nxt[0] is frame or token_id not in frame.exits
            before = self._scans[-1] if nxt[0] is frame else START
            remembered = scan(plan, before, self._tools.vocabulary.byte_tokens[token_id], commit=True) if text else before
            if remembered is None or before is None:
                return False
        self._stack.append(nxt)
        self._scans.append(remembered)
        self._tokens.append(token_id)
        after = nxt[0]
        if after is not frame and self._tools.ends_call[after.place] and after.place != frame.place:
            self._record_call()
        return True

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens."""
        if num_tokens < 0 or num_tokens > len(self._tokens):
            raise ValueError(f"cannot roll back {num_tokens} tokens; {len(self._tokens)} accepted")
        if not num_tokens:
            return
        del self._stack[-num_tokens:]
        del self._scans[-num_tokens:]
        del self._tokens[-num_tokens:]
        keep = len(self._tokens)
        while self._calls and self._calls[-1].tokens > keep:
            self._calls.pop()

    def _next(self, frame: Frame, tstate: int, t: int) -> tuple[Frame, int] | None:
        """(frame, text state) after token ``t``, or None when ``t`` is not allowed."""
        target = frame.exits.get(t)
        rule = frame.rule
        if target is None:
            if rule is None:
                return None
            tstate = rule.step(tstate, t)
            if tstate == DEAD:
                return None
            if frame.after_text < 0:
                return frame, tstate
            _, counter, tool, written, value, start = frame[:6]
            return self._tools.enter(frame.after_text, counter, tool, written, value, start), tstate
        place, counter, tool, written, value = frame[:5]
        tools = self._tools
        if rule is not None:
            if not rule.accepting(tstate):
                return None
            kind = tools.kinds[place]
            if kind == "word" and target < 0:
                target = rule.payload(tstate)
            elif kind in _CALL_OPENERS:  # the rule's accepting state names the tool
                tool = rule.payload(tstate)
            elif kind == "argtag":
                key, type_index = rule.payload(tstate)
                written |= 1 << key
                value = Argument(key, type_index)
        if tools.kinds[target] in _CALL_OPENERS:
            written = 0
        if tools.ends_call[target]:
            counter += 1
        return tools.enter(target, counter, tool, written, value, len(self._tokens) + 1), 0

    def _record_call(self) -> None:
        """A call just completed: walk back to its header and keep its argument spans.
        ``_stack[k][0]`` is the frame after ``k`` tokens, so a frame at ``k`` followed by another
        place means the token at position ``k`` ended that place's text."""
        tools = self._tools
        parts: list[_Part] = []
        stack = self._stack
        counter = stack[-2][0].counter
        tool = stack[-1][0].tool  # the edge that ended the call knows its tool (a named-JSON text names it last)
        pos = len(stack) - 2
        while pos >= 0:
            frame = stack[pos][0]
            place, start = frame.place, frame.start
            kind = tools.kinds[place]
            if kind == "named":
                parts.append(_Part(kind, start, pos))
                break
            if kind in ("header", "tag"):
                break
            if stack[pos + 1][0].place != place:
                if kind == "json":
                    parts.append(_Part(kind, start, pos))
                elif kind == "value":
                    parts.append(_Part(kind, start, pos, frame.value, stack[start - 1][0].start))
            # a text's tokens keep its frame, one run from its start: nothing is learnt inside
            # it, so the walk jumps over it (cost per place of the call, not per token)
            pos = start - 1 if start < pos and stack[start][0] is frame else pos - 1
        parts.reverse()
        self._calls.append(_Call(counter, tool, tuple(parts), len(self._tokens)))

    # ---- masks ---------------------------------------------------------------------------

    def mask_words(self, compute: bool = True) -> np.ndarray | None:
        words = self._tools.mask(*self._stack[-1]) if compute else self._tools.cached_mask(*self._stack[-1])
        remembered = self._scans[-1]
        if words is None or remembered is None:
            return words
        frame, text_state = self._stack[-1]
        masked = self._masked
        if masked is not None and masked[0] is remembered and masked[1] is frame and masked[2] == text_state:
            return masked[3]
        plan = self._tools.unique_plan(frame)
        if plan is not None:
            words = remembered_words(plan, remembered, words, self._tools.vocabulary)
        self._masked = (remembered, frame, text_state, words)
        return words

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        if self._scans[-1] is not None:  # the item memory may refuse some tokens: its mask
            write_row(bitmask, index, self.mask_words(), self._tools.words, True)
            return
        allowed = self._tools.allowed(*self._stack[-1])
        write_row(bitmask, index, allowed, self._tools.words, type(allowed) is not tuple)

    def few_allowed_ids(self, compute: bool = True) -> tuple[int, ...] | None:
        if self._scans[-1] is not None:  # the item memory may refuse some of them
            return None
        frame, text_state = self._stack[-1]
        return self._tools.few_ids(frame, text_state, compute)

    @property
    def words_per_row(self) -> int:
        return self._tools.words

    def allowed_token_ids(self) -> list[int]:
        """The ids ``accept_token`` would accept now, ascending (empty after the stop token)."""
        words = self.mask_words()
        return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist()

    # ---- status --------------------------------------------------------------------------

    def is_accepting(self) -> bool:
        """The turn may end here (the stop token is allowed) or has ended."""
        if self.is_finished:
            return True
        frame, text_state = self._stack[-1]
        tools = self._tools
        if tools.stop_id not in frame.exits:
            return False
        rule = frame.rule
        return rule is None or rule.accepting(text_state)

    @property
    def is_finished(self) -> bool:
        """The stop token was accepted: nothing more may follow."""
        return bool(self._tokens) and self._tokens[-1] == self._tools.stop_id and \
            self._stack[-1][0].place == self._tools.done

    @property
    def in_tool_section(self) -> bool:
        return self._tools.in_section[self._stack[-1][0].place]

    @property
    def call_index(self) -> int:
        """The counter the next (or current) call carries."""
        return self._stack[-1][0].counter

    @property
    def state(self) -> MatcherState:
        """Where the matcher stands now (a fresh record; for inspection and steering)."""
        return MatcherState(*self._stack[-1])

    @property
    def error(self) -> str | None:
        """Why no token can follow, if that is the case (never raised)."""
        if self.is_finished:
            return None
        words = self.mask_words()
        if not words.any():
            rule = self._stack[-1][0].rule
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

            if parts and parts[0].kind == "named":
                args = tools.named_json_arguments(text(parts[0].start, parts[0].end), tool)
            elif parts and parts[0].kind == "json":
                args = text(parts[0].start, parts[0].end)
            else:
                keys = tools.arguments[tool].keys
                args = arguments_json(
                    (keys[a.key].name if a.key < len(keys) else tools.extra_key_name(text(tag, s - 1), a.type),
                     VALUE_TYPES[a.type], text(s, e)) for _, s, e, a, tag in parts)
            name = tools.tool_names[tool]
            out.append({"id": call_id(name, counter, tools.format.call_id), "type": "function",
                        "function": {"name": name, "arguments": args}})
        return out

    @property
    def token_ids(self) -> list[int]:
        return list(self._tokens)
