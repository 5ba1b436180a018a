"""Cost of ``ToolCallLogitsProcessor.apply()`` for a batch of constrained rows, on this CPU.

    python integrations/vllm/bench_apply.py [--rows 64] [--steps 200] [--json out.json]

Runs the real V1 processor (``update_state`` + ``apply``) over the Kimi-K2-shaped test tokenizer
(151,899 ids, saved to a temporary folder and read back the way vLLM reads a tokenizer), with no
engine: every step each row gets the next token of a sequence its matcher allows, then ``apply``
masks a float32 logits tensor of shape (rows, 151,899). Timed: ``apply`` only (advancing the
matchers, filling the packed bitmask, the mask lookups and the writes into the logits).

Scenarios: ``free`` (tool_choice=auto, the model writing text: the enforcer is dormant; rows
advance one token per step), ``string`` (every row inside a JSON string argument) and
``structural`` (every row where fewer than 200 tokens fit: call headers, keys, punctuation),
both held in that state (no new token: the cost of that kind of mask), ``mixed`` (rows start at
random points of tool calls and advance one random allowed token per step). Needs vLLM installed (the processor subclasses its interfaces).

References timed in the same loop, each step, on a fresh copy of the same logits: xgrammar's
CPU kernel (``apply_token_bitmask_inplace``, backend ``cpu``: what vLLM's structured outputs
apply per step) and llguidance's (``llguidance.torch``) given the same masks packed into a
bitmask beforehand (their matchers' work not counted); and two floors for rows that ban almost
everything, every score written once: ``logits.fill_(-inf)`` and our own kernel given a mask
that bans every id (its non-temporal stores, none of the processor's work). The peers' results
are checked once per scenario against ours (same ``-inf`` positions, same kept scores).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

TOOL_SETS = ("weather", "travel", "small_nested", "cjk")
FLOORS = ("fill_(-inf)", "ban every id")
"""References that write every score, whatever the masks: the floors of a row that bans almost everything."""


def fake_vllm_config(tokenizer_dir: str, width: int) -> Any:
    """The parts of a ``VllmConfig`` the processor reads (tokenizer location and logits width)."""
    model_config = SimpleNamespace(tokenizer=tokenizer_dir, tokenizer_revision=None, tokenizer_mode="auto",
                                   runner_type="generate", trust_remote_code=False, skip_tokenizer_init=False,
                                   hf_config=None, get_vocab_size=lambda: width)
    return SimpleNamespace(model_config=model_config)


def walk(matcher: Any, rng: random.Random, want: str, limit: int = 400) -> list[int]:
    """Tokens that lead ``matcher`` (from a fresh state) to a state of kind ``want``."""
    section_open = False
    for _ in range(limit):
        allowed = matcher.allowed_token_ids()
        n = len(allowed)
        if want == "string" and section_open and n > 140_000:
            return matcher.token_ids
        if want == "structural" and section_open and n < 200 and rng.random() < 0.3:
            return matcher.token_ids
        if want == "mixed" and section_open and rng.random() < 0.05:
            return matcher.token_ids
        token = rng.choice(allowed)
        if not matcher.accept_token(token) or matcher.is_finished:
            break
        section_open = section_open or matcher.in_tool_section
    return matcher.token_ids


def packed_masks(core: Any, rows: int) -> torch.Tensor:
    """The int32 bitmask of the masks the processor applies to rows ``0..rows-1`` now: its
    matchers' cached masks, the stop row for a row held to the stop token, all ones for a row
    released (a finished turn)."""
    from enforcer.integrations.vllm import _ACTIVE, _STOPPING

    packed = np.full((rows, core.words), -1, dtype=np.int32)
    for i in range(rows):
        row = core.rows[i]
        if row.state in (_ACTIVE, _STOPPING):
            packed[i] = row.matcher.mask_words() if row.state == _ACTIVE else row.stop
    return torch.from_numpy(packed)


def reference_methods() -> dict[str, Callable[[torch.Tensor, torch.Tensor], Any]]:
    """Same-run references: the peers' CPU bitmask kernels that are installed, and the floor."""
    found: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {}
    try:
        import xgrammar

        found["xgrammar"] = lambda logits, bitmask: xgrammar.apply_token_bitmask_inplace(
            logits, bitmask, vocab_size=logits.shape[1], backend="cpu")
    except ImportError:
        pass
    try:
        import llguidance.torch as llg_torch

        found["llguidance"] = llg_torch.apply_token_bitmask_inplace
    except ImportError:
        pass
    found["fill_(-inf)"] = lambda logits, bitmask: logits.fill_(float("-inf"))
    from enforcer.logits import mask_rows_in_place

    banning: dict[tuple[int, ...], np.ndarray] = {}  # made at the first call (one of the steps)

    def ban_every_id(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
        shape = tuple(bitmask.shape)
        if shape not in banning:
            banning[shape] = np.zeros(shape, dtype=np.int32)
        mask_rows_in_place(logits, range(logits.shape[0]), banning[shape])

    found["ban every id"] = ban_every_id
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", default=None, help="write the results to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    from enforcer.declarations import render_chat
    from enforcer.demo import load_tools
    from enforcer.integrations.vllm import ToolCallLogitsProcessor
    from enforcer.testing.tokenizers import kimi_k2_tokenizer
    from enforcer.tools import compile_tools

    references = reference_methods()
    tokenizer = kimi_k2_tokenizer("fast")
    width = len(tokenizer)
    results: dict[str, Any] = {"rows": args.rows, "vocab": width, "steps": args.steps}
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        processor = ToolCallLogitsProcessor(fake_vllm_config(folder, width), torch.device("cpu"), False)
        core = processor.core
        assert core is not None
        for scenario in ("free", "string", "structural", "mixed"):
            rng = random.Random(0)
            added, outputs, plans = [], [], []
            for i in range(args.rows):
                tools = load_tools(TOOL_SETS[i % len(TOOL_SETS)])
                choice = "auto" if scenario == "free" else "required"
                prompt = tokenizer.encode(render_chat([{"role": "user", "content": "go"}], tools),
                                          add_special_tokens=False)
                compiled = compile_tools(tools, core.vocabulary, tool_choice=choice, allow_thinking=False)
                plan = [] if scenario == "free" else walk(compiled.matcher(prompt_ids=prompt), rng, scenario)
                settings = {"tools": tools, "tool_choice": choice}
                out: list[int] = []
                added.append((i, SamplingParams(extra_args={"enforcer": settings}), prompt, out))
                outputs.append(out)
                plans.append(plan)
            processor.update_state(BatchUpdate(batch_size=args.rows, removed=[], added=added, moved=[]))
            for out, plan in zip(outputs, plans):  # move each row to its starting state
                out.extend(plan)
            logits = torch.randn(args.rows, width)
            processor.apply(logits.clone())  # warm the mask cache for the starting states
            times = []
            ref_times: dict[str, list[float]] = {name: [] for name in references}
            moving = scenario in ("free", "mixed")
            for step in range(args.steps):
                for i, out in enumerate(outputs):  # one more allowed token per row (not timed)
                    row = core.rows.get(i)
                    if moving and row is not None and row.state == 0:
                        allowed = row.matcher.allowed_token_ids()
                        if scenario == "free":
                            allowed = [t for t in allowed[:50_000] if t < 151_600]
                        out.append(rng.choice(allowed))
                batch = logits.clone()
                start = time.perf_counter()
                processor.apply(batch)
                times.append(time.perf_counter() - start)
                bitmask = packed_masks(core, args.rows)  # the masks ours applied (not timed)
                for name, method in references.items():
                    other = logits.clone()
                    start = time.perf_counter()
                    method(other, bitmask)
                    ref_times[name].append(time.perf_counter() - start)
                    if step == 0 and name not in FLOORS:
                        assert torch.equal(other, batch), f"{name} masked differently from ours"
            ms = statistics.median(times) * 1e3
            p90 = sorted(times)[int(0.9 * len(times))] * 1e3
            refs = {name: round(statistics.median(t) * 1e3, 3) for name, t in ref_times.items()}
            results[scenario] = {"median_ms": round(ms, 3), "p90_ms": round(p90, 3),
                                 "per_row_us": round(ms * 1e3 / args.rows, 1), "references_median_ms": refs}
            print(f"{scenario:>10}: apply() {ms:7.3f} ms median, {p90:7.3f} ms p90 for {args.rows} rows "
                  f"({ms * 1e3 / args.rows:6.1f} us per row); same steps: "
                  + ", ".join(f"{name} {value:.3f} ms ({ms / value:.2f}x)" for name, value in refs.items()),
                  flush=True)
            processor.update_state(BatchUpdate(batch_size=0, removed=list(range(args.rows)), added=[], moved=[]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
