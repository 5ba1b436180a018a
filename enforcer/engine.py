"""The one state machine that runs every :class:`~enforcer.formats.FormatSpec`.

States (``tool_choice="auto"``)::

    FREE --section_begin--> CALL[seg 0] --...segments of one call...--> AFTER_CALL
    AFTER_CALL --call_begin--> CALL[seg 1] (counter + 1; only with parallel calls)
    AFTER_CALL --section_end--> AFTER_SECTION --stop--> DONE

FREE is text (and reasoning); a section may open inside reasoning. Inside a call, text segments
(the call header, the JSON arguments) are byte DFAs whose masks come from shared tables; a
structural token is allowed only where the template puts it, and only as its id. Every step is a
tuple pushed on a stack, so ``rollback`` is a pop. Nothing raises while decoding: a refused token
returns False and leaves the state unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .automaton import DEAD
from .formats import CallHeader, Token
from .matcher import Matcher, write_bitmask_row
from .tools import CompiledTools

FREE, CALL, AFTER_CALL, AFTER_SECTION, DONE = range(5)
_IN_THINK, _THOUGHT, _STARTED = 1, 2, 4

# state tuple: (phase, segment, dfa_state, counter, tool, flags, segment_start)


class ToolCallMatcher(Matcher):
    """Per-sequence cursor over a :class:`CompiledTools`. Not thread-safe; one per sequence;
    microseconds per token."""

    __slots__ = ("_tools", "_stack", "_tokens", "_calls", "_byte_tokens", "_kinds")

    def __init__(self, tools: CompiledTools, counter: int, in_think: bool, thought: bool) -> None:
        self._tools = tools
        flags = (_IN_THINK if in_think else 0) | (_THOUGHT if thought else 0)
        self._stack: list[tuple] = [(FREE, 0, 0, counter, -1, flags, 0)]
        self._tokens: list[int] = []
        self._calls: list[tuple[int, str, int, int]] = []  # (counter, name, args_start, args_end)
        self._byte_tokens = tools.vocabulary.byte_tokens
        self._kinds = tuple("token" if isinstance(s, Token) else "header" if isinstance(s, CallHeader)
                            else "args" for s in tools.format.call)

    # ---- advancing -----------------------------------------------------------------------

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) when it is not allowed here."""
        nxt = self._next(self._stack[-1], token_id)
        if nxt is None:
            return False
        self._stack.append(nxt)
        self._tokens.append(token_id)
        if nxt[0] == AFTER_CALL and self._stack[-2][0] == CALL:
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
        while self._calls and self._calls[-1][3] >= keep:
            self._calls.pop()

    def _next(self, state: tuple, t: int) -> tuple | None:
        phase, seg, dstate, counter, tool, flags, seg_start = state
        tools = self._tools
        if phase == FREE:
            return self._next_free(state, t)
        if phase == CALL:
            kind = self._kinds[seg]
            if kind == "token":
                if t != tools.segment_ids[seg]:
                    return None
                return self._after_token(state)
            if kind == "header":
                dfa, _ = tools.header(counter)
            else:
                dfa = tools.schemas[tool].dfa
            if t == tools.segment_ids[seg + 1]:
                if not dfa.accepting_list[dstate]:
                    return None
                if kind == "header":
                    text = b"".join(self._byte_tokens[i] for i in self._tokens[seg_start:])
                    name = tools.name_from_header(text.decode("utf-8", "replace"), counter)
                    if name is None:
                        return None
                    tool = tools.tool_index(name)
                return self._after_token((phase, seg + 1, 0, counter, tool, flags, seg_start))
            data = self._byte_tokens[t] if 0 <= t < len(self._byte_tokens) else None
            if not data:
                return None
            rows = dfa.rows
            for b in data:
                row = rows[dstate]
                if row is None:
                    row = dfa.row(dstate)
                dstate = row[b]
                if dstate == DEAD:
                    return None
            return (phase, seg, dstate, counter, tool, flags, seg_start)
        if phase == AFTER_CALL:
            if t == tools.section_end_id:
                return (AFTER_SECTION, 0, 0, counter, -1, flags, 0)
            if t == tools.segment_ids[0] and tools.parallel_tool_calls is True:
                return self._enter_segment(1, counter, flags)
            return None
        if phase == AFTER_SECTION:
            if t == tools.stop_id:
                return (DONE, 0, 0, counter, -1, flags, 0)
            return None
        return None

    def _enter_segment(self, seg: int, counter: int, flags: int, tool: int = -1) -> tuple:
        return (CALL, seg, 0, counter, tool, flags, len(self._tokens) + 1)

    def _after_token(self, state: tuple) -> tuple:
        """The state after the token segment ``state[1]`` was accepted."""
        phase, seg, _, counter, tool, flags, _ = state
        if seg + 1 == len(self._kinds):
            return (AFTER_CALL, 0, 0, counter + 1, -1, flags, 0)
        return self._enter_segment(seg + 1, counter, flags, tool)

    def _next_free(self, state: tuple, t: int) -> tuple | None:
        _, _, _, counter, _, flags, _ = state
        tools = self._tools
        in_think, thought, started = bool(flags & _IN_THINK), bool(flags & _THOUGHT), bool(flags & _STARTED)
        text_ok, specials = tools.free_allowed_specials(in_think, thought, not started)
        if t in specials:
            if t == tools.section_begin_id:
                return (CALL, 0, 0, counter, -1, flags | _STARTED, 0)
            if t == tools.stop_id:
                return (DONE, 0, 0, counter, -1, flags | _STARTED, 0)
            if t == tools.think_begin_id:
                return (FREE, 0, 0, counter, -1, (flags | _IN_THINK | _STARTED), 0)
            if t == tools.think_end_id:
                return (FREE, 0, 0, counter, -1, (flags & ~_IN_THINK) | _THOUGHT | _STARTED, 0)
        if not text_ok or t in tools.structural_ids or t == tools.stop_id or \
                t == tools.think_begin_id or t == tools.think_end_id:
            return None
        if not 0 <= t < tools.vocabulary.vocab_size:
            return None
        data = self._byte_tokens[t]
        if data is None:
            if t not in tools.vocabulary.special_ids or tools.tool_choice in ("required", "named"):
                return None  # forced calls: only text while reasoning
        return (FREE, 0, 0, counter, -1, flags | _STARTED, 0)

    def _record_call(self) -> None:
        """A call just ended: remember its name and argument span. ``_stack[k]`` is the state
        after ``k`` tokens, so the last argument state at index ``k`` means the token at
        position ``k`` closed the arguments."""
        for pos in range(len(self._stack) - 2, -1, -1):
            phase, seg, _, counter, tool, _, start = self._stack[pos]
            if phase == CALL and self._kinds[seg] == "args":
                self._calls.append((counter, self._tools.tool_names[tool], start, pos))
                return

    # ---- masks ---------------------------------------------------------------------------

    def _mask_words(self) -> tuple[np.ndarray, tuple]:
        phase, seg, dstate, counter, tool, flags, _ = self._stack[-1]
        tools = self._tools
        if phase == FREE:
            key = ("free", bool(flags & _IN_THINK), bool(flags & _THOUGHT), not flags & _STARTED)
            return tools.free_mask(*key[1:]), key
        if phase == CALL:
            kind = self._kinds[seg]
            if kind == "token":
                ids = (tools.segment_ids[seg],)
            elif kind == "header":
                dfa, table = tools.header(counter)
                key = ("header", counter, dstate)
                return tools.text_mask("header", counter, table, dstate, bool(dfa.accepting_list[dstate]),
                                       tools.segment_ids[seg + 1]), key
            else:
                schema = tools.schemas[tool]
                key = ("args", tool, dstate)
                return tools.text_mask("args", tool, schema.masks, dstate, bool(schema.dfa.accepting_list[dstate]),
                                       tools.segment_ids[seg + 1]), key
        elif phase == AFTER_CALL:
            ids = (tools.section_end_id, tools.segment_ids[0]) if tools.parallel_tool_calls else (tools.section_end_id,)
        elif phase == AFTER_SECTION:
            ids = (tools.stop_id,)
        else:
            ids = ()
        return tools.token_mask(ids), ("ids", tuple(sorted(ids)))

    def fill_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed tokens into row ``index`` of a packed int32 bitmask (numpy array
        or torch tensor of shape ``(batch, ceil(vocab_size / 32))``)."""
        words, key = self._mask_words()
        if isinstance(bitmask, np.ndarray):
            write_bitmask_row(bitmask, index, words)
        else:
            write_bitmask_row(bitmask, index, words, self._tools.cached_torch(key, words))

    def allowed_token_ids(self) -> list[int]:
        words, _ = self._mask_words()
        return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little")).tolist()

    # ---- status --------------------------------------------------------------------------

    def is_accepting(self) -> bool:
        """The turn may end here (the stop token is allowed) or has ended."""
        phase = self._stack[-1][0]
        if phase == DONE:
            return True
        if phase == AFTER_SECTION:
            return True
        if phase == FREE:
            return self._tools.tool_choice in ("auto", "none")
        return False

    @property
    def is_finished(self) -> bool:
        """The stop token was accepted: nothing more may follow."""
        return self._stack[-1][0] == DONE

    @property
    def in_tool_section(self) -> bool:
        return self._stack[-1][0] in (CALL, AFTER_CALL, AFTER_SECTION)

    @property
    def call_index(self) -> int:
        """The counter the next (or current) call carries."""
        return self._stack[-1][3]

    @property
    def error(self) -> str | None:
        """Why no token can follow, if that is the case (never raised)."""
        if self.is_finished:
            return None
        words, _ = self._mask_words()
        if not words.any():
            return "no token of the vocabulary can continue from this state"
        return None

    @property
    def calls(self) -> list[dict]:
        """Completed calls so far, in OpenAI's ``tool_calls`` shape."""
        out = []
        fmt = self._tools.format
        for counter, name, start, end in self._calls:
            args = b"".join(self._byte_tokens[t] for t in self._tokens[start:end]).decode("utf-8", "replace")
            call_id = fmt.call[self._tools.header_segment].template.format(name=name, index=counter)
            out.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})
        return out

    @property
    def token_ids(self) -> list[int]:
        return list(self._tokens)
