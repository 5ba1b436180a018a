"""Ask a server started with ``serve.sh`` for tool calls, with the plain ``openai`` client.

    python integrations/vllm/client.py [--url http://127.0.0.1:8000/v1] [--tool-choice required]
                                       [--tools weather] [--stream]

Nothing in the request is specific to the enforcer: the server's tool parser passes the tools
and tool_choice to the logits processor. Prints the calls and Moonshot's vendor-verifier
verdict for each (declared name, JSON arguments, ``jsonschema.validate``); exits 1 when a
``tool_calls`` finish has no valid call.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from openai import OpenAI

from enforcer.demo import BUNDLED_TOOL_SETS, DEFAULT_PROMPT, load_tools, vendor_verdict


def _tool_choice(value: str) -> Any:
    if value in ("auto", "required", "none"):
        return value
    return {"type": "function", "function": {"name": value}}


def collect_stream(client: OpenAI, **request: Any) -> tuple[str | None, str, list[dict[str, Any]]]:
    """(finish_reason, content, tool calls) accumulated from a stream."""
    calls: dict[int, dict[str, Any]] = {}
    content, finish = "", None
    for chunk in client.chat.completions.create(stream=True, **request):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, {"id": None, "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            call["id"] = part.id or call["id"]
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return finish, content, [calls[i] for i in sorted(calls)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default=None, help="served model name (default: the server's first)")
    parser.add_argument("--tools", default="weather", help=f"bundled set ({', '.join(BUNDLED_TOOL_SETS)}) or a JSON file")
    parser.add_argument("--tool-choice", default="auto", help="auto, required, none or a tool name")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args(argv)

    client = OpenAI(base_url=args.url, api_key="unused")
    model = args.model or client.models.list().data[0].id
    tools = load_tools(args.tools)
    request = dict(model=model, messages=[{"role": "user", "content": args.prompt}], tools=tools,
                   tool_choice=_tool_choice(args.tool_choice), max_tokens=args.max_tokens, temperature=0)
    if args.stream:
        finish, content, calls = collect_stream(client, **request)
    else:
        choice = client.chat.completions.create(**request).choices[0]
        finish, content = choice.finish_reason, choice.message.content or ""
        calls = [c.model_dump() for c in choice.message.tool_calls or []]
    print(f"finish_reason: {finish}")
    if content:
        print(f"content: {content!r}")
    failures = 0
    for call in calls:
        verdict = vendor_verdict(call, tools)
        failures += verdict is not None
        print(json.dumps(call, ensure_ascii=False), "PASS" if verdict is None else f"FAIL: {verdict}")
    if finish == "tool_calls" and (failures or not calls):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
