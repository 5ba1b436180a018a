"""Tool declarations and the K2 chat layout: rendered text, encoded with the Kimi-shaped
tokenizer, read back by id."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from enforcer.declarations import (
    DEFAULT_SYSTEM_PROMPT,
    count_tool_calls,
    read_tool_declaration,
    render_chat,
    render_tool_declaration,
)
from enforcer.errors import InvalidToolsError
from enforcer.formats import kimi_k2 as k2
from enforcer.parser import parse_tool_calls

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "unit": {"type": "string", "enum": ["c", "f"]},
                "city": {"type": "string", "description": "城市 🌆"},
            },
            "required": ["city"],
        },
    },
}

SEARCH = {
    "type": "function",
    "function": {
        "name": "mcp.web-search",
        "description": "Search the web.\nReturns links.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for"},
                "limit": {"type": "integer", "default": 5},
                "safe": {"type": ["boolean", "null"]},
                "lang": {"enum": ["en", "zh"], "description": "Language"},
                "filters": {
                    "type": "object",
                    "description": "Filters",
                    "properties": {
                        "site": {"type": "string"},
                        "after": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                    },
                    "required": ["site"],
                },
                "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                "x-trace": {"$ref": "#/$defs/trace"},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["query"],
            "$defs": {"trace": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
        },
    },
}

NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
COUNT = {
    "type": "function",
    "function": {"name": "count", "parameters": {"type": "object", "additionalProperties": {"type": "integer"}}},
}

S, M, E = k2.IM_SYSTEM, k2.IM_MIDDLE, k2.IM_END
U, A = k2.IM_USER, k2.IM_ASSISTANT
SB, SE, CB, AB, CE = k2.SECTION_BEGIN, k2.SECTION_END, k2.CALL_BEGIN, k2.ARGUMENT_BEGIN, k2.CALL_END


def encode(tok, text: str) -> list[int]:
    """Prompt-time encoding: the tokenizer maps marker text to marker ids."""
    return tok.encode(text, add_special_tokens=False)


# ------------------------------------------------------------------------------------------
# render_tool_declaration


def test_json_declaration_is_compact_sorted_and_keeps_unicode():
    assert render_tool_declaration([WEATHER]) == (
        '[{"function":{"description":"Weather for a city.","name":"get_weather","parameters":'
        '{"properties":{"city":{"description":"城市 🌆","type":"string"},"unit":{"enum":["c","f"],'
        '"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]'
    )


def test_typescript_declaration():
    assert render_tool_declaration([SEARCH, NOW, COUNT], style="typescript") == "\n".join(
        [
            "namespace functions {",
            "// Search the web.",
            "// Returns links.",
            "type mcp.web-search = (_: {",
            "  // What to search for",
            "  query: string,",
            "  // default: 5",
            "  limit?: number,",
            "  safe?: boolean | null,",
            "  // Language",
            '  lang?: "en" | "zh",',
            "  // Filters",
            "  filters?: {",
            "    site: string,",
            "    after?: string | number,",
            "  },",
            "  tags?: (string | number)[],",
            '  "x-trace"?: {',
            "    id: string,",
            "  },",
            "  meta?: Record<string, string>,",
            "}) => any;",
            "",
            "type now = () => any;",
            "",
            "type count = (_: Record<string, number>) => any;",
            "}",
        ]
    )


def test_typescript_recursive_reference_stops():
    tree = {
        "type": "function",
        "function": {
            "name": "walk",
            "parameters": {
                "type": "object",
                "properties": {"node": {"$ref": "#/$defs/node"}},
                "required": ["node"],
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                    }
                },
            },
        },
    }
    text = render_tool_declaration([tree], style="typescript")
    assert "children?: any[]," in text
    assert "node: {" in text


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("get_weather", "must be a list"),
        ([42], r"tools\[0\] must be an object"),
        ([{"type": "retrieval"}], "is not 'function'"),
        ([{"type": "function"}], "lacks a 'function' object"),
        ([{"type": "function", "function": {"name": ""}}], r"tools\[0\].function.name"),
        ([{"type": "function", "function": {"name": "f", "parameters": []}}], "tool 'f': parameters"),
        ([{"type": "function", "function": {"name": "f", "parameters": {"default": {1, 2}}}}], "JSON-serialisable"),
    ],
)
def test_bad_tools_are_named(tools, message):
    with pytest.raises(InvalidToolsError, match=message):
        render_tool_declaration(tools)


def test_unknown_style():
    with pytest.raises(ValueError, match="'yaml'"):
        render_tool_declaration([WEATHER], style="yaml")


# ------------------------------------------------------------------------------------------
# render_chat

DIALOG = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "r1",
        "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ],
        "incomplete_tool_call": None,
    },
    {"role": "tool", "tool_call_id": "call_abc", "content": "18°C"},
    {"role": "assistant", "content": "It is 18°C.", "reasoning_content": "r3"},
    {"role": "user", "name": "bob",
     "content": [{"type": "text", "text": "And Oslo "}, {"type": "text", "text": "and Rome?"}]},
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "r5",
        "tool_calls": [
            {"id": "search:0", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "functions.get_weather:2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        ],
        "incomplete_tool_call": None,
    },
    {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "20°C"},
    {"role": "tool", "tool_call_id": "search:0", "content": "5°C"},
]


def expected_dialog(think1: str, think3: str, think5: str) -> str:
    declaration = render_tool_declaration([WEATHER])
    return "".join(
        [
            f"{S}tool_declare{M}{declaration}{E}",
            f"{S}system{M}{DEFAULT_SYSTEM_PROMPT}{E}",
            f"{U}user{M}Weather in Paris?{E}",
            f'{A}assistant{M}{think1}{SB}{CB}functions.get_weather:0{AB}{{"city": "Paris"}}{CE}{SE}{E}',
            f"{S}tool{M}## Return of functions.get_weather:0\n18°C{E}",
            f"{A}assistant{M}{think3}It is 18°C.{E}",
            f"{U}bob{M}And Oslo and Rome?{E}",
            f'{A}assistant{M}{think5}{SB}{CB}functions.get_weather:1{AB}{{"city": "Oslo"}}{CE}'
            f'{CB}functions.get_weather:2{AB}{{"city": "Rome"}}{CE}{SE}{E}',
            f"{S}tool{M}## Return of functions.get_weather:2\n20°C{E}",
            f"{S}tool{M}## Return of functions.get_weather:1\n5°C{E}",
            f"{A}assistant{M}",
        ]
    )


def test_chat_layout_instruct():
    assert render_chat(DIALOG, [WEATHER]) == expected_dialog("", "", "")


def test_chat_layout_thinking_keeps_reasoning_of_the_current_turn_only():
    empty = f"{k2.THINK_BEGIN}{k2.THINK_END}"
    current = f"{k2.THINK_BEGIN}r5{k2.THINK_END}"
    assert render_chat(DIALOG, [WEATHER], thinking=True) == expected_dialog(empty, empty, current)


def test_chat_without_tools_and_with_own_system_message():
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert render_chat(messages, add_generation_prompt=False) == f"{S}system{M}Be brief.{E}{U}user{M}Hi{E}"
    assert render_chat([], []) == f"{S}system{M}{DEFAULT_SYSTEM_PROMPT}{E}{A}assistant{M}"


def test_chat_typescript_declaration():
    text = render_chat([{"role": "user", "content": "t"}], [NOW], tool_style="typescript")
    assert text.startswith(f"{S}tool_declare{M}namespace functions {{\ntype now = () => any;\n}}{E}")


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ("hello", "must be a list"),
        ([{"content": "x"}], r"messages\[0\] must be an object with a string 'role'"),
        ([{"role": "tool", "content": "x"}], r"messages\[0\] \(tool\): a tool result needs"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "only text content"),
        ([{"role": "user", "content": 5}], "content must be"),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], r"tool_calls\[0\] needs function.name"),
        ([{"role": "assistant", "tool_calls": {"id": "x"}}], "tool_calls must be a list"),
    ],
)
def test_bad_messages_are_named(messages, message):
    with pytest.raises(ValueError, match=message):
        render_chat(messages)


# ------------------------------------------------------------------------------------------
# Encoded prompts: read back by id


@pytest.mark.parametrize("tokenizer", ["kimi_tokenizer", "kimi_slow_tokenizer"])
def test_round_trip_declaration(request, kimi_vocab, tokenizer):
    tools = [WEATHER, SEARCH, NOW, COUNT]
    ids = encode(request.getfixturevalue(tokenizer), render_chat(DIALOG, tools))
    assert kimi_vocab.token_id(k2.IM_SYSTEM) in ids
    assert read_tool_declaration(ids, kimi_vocab) == tools


def test_count_tool_calls_gives_the_next_counter(kimi_tokenizer, kimi_vocab):
    ids = encode(kimi_tokenizer, render_chat(DIALOG, [WEATHER]))
    assert count_tool_calls(ids, kimi_vocab) == 3
    assert count_tool_calls(encode(kimi_tokenizer, render_chat(DIALOG[:1], [WEATHER])), kimi_vocab) == 0


def test_rendered_history_calls_parse_back(kimi_tokenizer, kimi_vocab):
    ids = encode(kimi_tokenizer, render_chat(DIALOG[:6], [WEATHER], add_generation_prompt=False))
    middle = kimi_vocab.token_id(k2.IM_MIDDLE)
    last_turn = ids[len(ids) - ids[::-1].index(middle) :]
    assert parse_tool_calls(last_turn, kimi_vocab) == {
        "content": None,
        "reasoning_content": None,
        "tool_calls": [
            {"id": "functions.get_weather:1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
            {"id": "functions.get_weather:2", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
        ],
        "incomplete_tool_call": None,
    }


def test_declaration_after_another_system_message(kimi_tokenizer, kimi_vocab):
    text = f"{S}system{M}[1]{E}" + render_chat([{"role": "user", "content": "x"}], [NOW])
    assert read_tool_declaration(encode(kimi_tokenizer, text), kimi_vocab) == [NOW]


def test_marker_text_in_a_description_is_not_misread(kimi_tokenizer, kimi_vocab):
    for marker in (k2.IM_END, k2.CALL_BEGIN):
        tool = {"type": "function", "function": {"name": "f", "description": f"emits {marker} sometimes"}}
        ids = encode(kimi_tokenizer, render_chat([], [tool]))
        assert read_tool_declaration(ids, kimi_vocab) is None


def test_no_declaration_or_not_readable(kimi_tokenizer, kimi_vocab):
    def read(text: str):
        return read_tool_declaration(encode(kimi_tokenizer, text), kimi_vocab)

    assert read(render_chat([{"role": "user", "content": "hi"}])) is None
    assert read(f"{U}user{M}tool_declare{M}[]{E}") is None
    assert read(f"{S}tool_declare{M}[1, 2") is None
    assert read(f"{S}tool_declare{M}not json{E}") is None
    assert read(f'{S}tool_declare{M}{{"a": 1}}{E}') is None
    assert read(f"{S}tool_declared{M}[]{E}") is None
    assert read(f"{S}tool_declare{M}[]{E}") == []
    assert read(render_chat([], [SEARCH], tool_style="typescript")) is None


def test_weird_ids_never_raise(kimi_tokenizer, kimi_vocab):
    system, middle, end = (kimi_vocab.token_id(n) for n in (S, M, E))
    name = encode(kimi_tokenizer, "tool_declare")
    for body in ([-1], [kimi_vocab.vocab_size + 5], [None], [2**70], [1.5]):
        assert read_tool_declaration([system, *name, middle, *body, end], kimi_vocab) is None
    assert read_tool_declaration([system, -1, middle], kimi_vocab) is None
    assert read_tool_declaration([system], kimi_vocab) is None
    assert read_tool_declaration([], kimi_vocab) is None


tool_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,20}", fullmatch=True)
# No "<" or "[": text that spells a special token ("[EOS]", "<|im_end|>") is encoded to its id at
# prompt time and cannot be read back (test_marker_text_in_a_description_is_not_misread).
free_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<["), max_size=30)


@st.composite
def random_tools(draw):
    tools = []
    for name in draw(st.lists(tool_names, min_size=1, max_size=4, unique=True)):
        prop = st.fixed_dictionaries(
            {"type": st.sampled_from(["string", "integer", "boolean"]), "description": free_text}
        )
        properties = draw(st.dictionaries(free_text, prop, max_size=3))
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": draw(free_text),
                    "parameters": {"type": "object", "properties": properties, "required": sorted(properties)[:1]},
                },
            }
        )
    return tools


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tools=random_tools(), user=free_text)
def test_round_trip_random_tools(kimi_tokenizer, kimi_vocab, tools, user):
    ids = encode(kimi_tokenizer, render_chat([{"role": "user", "content": user}], tools, thinking=True))
    assert read_tool_declaration(ids, kimi_vocab) == tools
    assert json.loads(render_tool_declaration(tools)) == tools
