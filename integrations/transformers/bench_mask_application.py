"""How to apply a packed token mask to a (batch, vocab) float32 score tensor: measured.

Replays the masks of a real K2 turn (Kimi-shaped tokenizer, 151,899 ids, ``schemas/weather.json``,
a teacher-forced call) and times each method per step, batch 1 and 8, on the CPU:

    python integrations/transformers/bench_mask_application.py [--threads 1]

``kept`` is what ``ToolCallLogitsProcessor`` does after ``fill_bitmask``: rows with few allowed
ids are copied by index, others get a bias from the shared cache (numpy add on the CPU).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from enforcer import Vocabulary, compile_tools
from enforcer.declarations import render_chat
from enforcer.formats import kimi_k2 as k2
from enforcer.integrations.transformers import ToolCallLogitsProcessor
from enforcer.testing.tokenizers import kimi_k2_tokenizer

TOOLS = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "weather.json").read_text())


def turn_masks(tokenizer, vocabulary: Vocabulary) -> tuple[list[int], list[int], list[np.ndarray]]:
    """The prompt, the turn's ids, and one packed mask row per step of the teacher-forced turn."""
    prompt = tokenizer(render_chat([{"role": "user", "content": "Weather in Paris?"}], TOOLS),
                       add_special_tokens=False)["input_ids"]
    text = (f"Let me check.{k2.SECTION_BEGIN}{k2.CALL_BEGIN}functions.get_weather:0{k2.ARGUMENT_BEGIN}"
            f'{{"city": "Paris", "unit": "celsius"}}{k2.CALL_END}{k2.SECTION_END}{k2.IM_END}')
    target = tokenizer(text, add_special_tokens=False)["input_ids"]
    matcher = compile_tools(TOOLS, vocabulary).matcher(prompt_ids=prompt)
    words = (vocabulary.vocab_size + 31) // 32
    masks = []
    for token in target:
        row = np.zeros((1, words), dtype=np.int32)
        matcher.fill_bitmask(row, 0)
        masks.append(row[0].copy())
        assert matcher.accept_token(token)
    return prompt, target, masks


def timed(step: Callable[[int], object], steps: int, repeat: int) -> float:
    """Mean microseconds per call of ``step(i)`` over ``repeat`` passes of ``steps`` steps."""
    for i in range(steps):
        step(i)
    start = time.perf_counter()
    for _ in range(repeat):
        for i in range(steps):
            step(i)
    return (time.perf_counter() - start) / (repeat * steps) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = kimi_k2_tokenizer()
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    prompt, target, masks = turn_masks(tokenizer, vocabulary)
    width = vocabulary.vocab_size
    shifts = torch.arange(32, dtype=torch.int32)
    print(f"{len(masks)} steps, vocab {width}, torch threads {args.threads}")
    for batch in (1, 8):
        scores = torch.randn(batch, width)
        packed = [torch.from_numpy(np.stack([m] * batch)) for m in masks]

        def shift_where(i: int) -> torch.Tensor:
            bits = ((packed[i].unsqueeze(-1) >> shifts) & 1).view(batch, -1)[:, :width].bool()
            return torch.where(bits, scores, float("-inf"))

        def unpackbits_where(i: int) -> torch.Tensor:
            bits = np.unpackbits(packed[i].numpy().view(np.uint8), axis=-1, bitorder="little")[:, :width]
            return torch.where(torch.from_numpy(bits).view(torch.bool), scores, float("-inf"))

        def id_list(i: int) -> torch.Tensor:
            ids = np.flatnonzero(np.unpackbits(masks[i].view(np.uint8), bitorder="little")[:width]).tolist()
            out = torch.full_like(scores, float("-inf"))
            index = torch.tensor(ids)
            out[:, index] = scores[:, index]
            return out

        processor = ToolCallLogitsProcessor(tokenizer, TOOLS, vocabulary=vocabulary)
        processor(torch.tensor([prompt] * batch), scores)  # first call: matchers, bias settings
        def kept(i: int) -> torch.Tensor:  # what the processor does after fill_bitmask
            processor._bitmask = np.repeat(masks[i][None, :], batch, axis=0)
            return processor._masked(scores)

        biases_n = [np.where(np.unpackbits(m.view(np.uint8), bitorder="little")[:width].astype(bool),
                             np.float32(0), np.float32(-np.inf)) for m in masks]
        biases_t = [torch.from_numpy(b) for b in biases_n]

        def bias_numpy(i: int) -> torch.Tensor:
            out = torch.empty_like(scores)
            target = out.numpy()
            for row in range(batch):
                np.add(scores.numpy()[row], biases_n[i], out=target[row])
            return out

        def bias_torch(i: int) -> torch.Tensor:
            out = torch.empty_like(scores)
            for row in range(batch):
                torch.add(scores[row], biases_t[i], out=out[row])
            return out

        for _ in range(args.repeat):  # the whole processor step: accept, fill, hash, apply
            processor.reset()
            ids = prompt
            for token in target:
                processor(torch.tensor([ids] * batch), scores)
                ids = ids + [token]
        full = processor.stats.summary()
        print(f"batch {batch}  {'ToolCallLogitsProcessor step':32s} {full['mean_us']:9.1f} us/step "
              f"(p50 {full['p50_us']:.0f}, p99 {full['p99_us']:.0f}; includes accept + fill_bitmask)")
        for name, fn in [("kept: one compiled masked pass", kept),
                         ("precomputed bias, numpy add", bias_numpy), ("precomputed bias, torch add", bias_torch),
                         ("unpackbits + torch.where", unpackbits_where), ("shift unpack + torch.where", shift_where),
                         ("Python list of allowed ids", id_list)]:
            repeat = 2 if fn is id_list else args.repeat
            print(f"batch {batch}  {name:32s} {timed(fn, len(masks), repeat):9.1f} us/step")


if __name__ == "__main__":
    main()
