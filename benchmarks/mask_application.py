"""Mask application: a packed int32 bitmask applied to torch logits (float32 on the CPU by default).

``python -m benchmarks.mask_application [--quick] [--device cuda] [--dtype bfloat16]``

The masks are real: every row our K2 matcher fills while teacher-forcing the two-call section of
:mod:`benchmarks.kimi_k2` (free text, forced markers, call headers, JSON arguments), cycled to
fill batches of 1, 32 and 256 rows (successive calls take successive windows of the rows, so
batch 1 cycles through every mask of the transcript) over the 151,899-id vocabulary (4,747 words per row).

Methods (each checked once, untimed, against a reference: the same ``-inf`` positions and the
same kept scores):

* ``enforcer processor``: what ``enforcer.integrations.transformers.ToolCallLogitsProcessor``
  does per step after filling its bitmask: float32 host scores masked into a new tensor by one
  compiled pass over the batch (``enforcer.logits.masked_scores``). It is driven through the
  processor's private ``_masked`` so that only mask application is timed.
* ``precomputed bias add_``: ``scores.add_(bias)`` with a (batch, V) bias built beforehand: the
  floor for an additive approach (building the bias is not timed).
* ``unpack + masked_fill_`` / ``unpack + torch.where``: the bitmask unpacked with torch shifts to
  a bool (batch, V) tensor, then ``masked_fill_`` in place / ``torch.where`` into a new tensor.
* ``xgrammar apply_token_bitmask_inplace`` (backend ``cpu``) and ``llguidance
  apply_token_bitmask_inplace`` (its torch helper), when installed.

Timed: the application only; in-place methods get a fresh copy of the logits before each call
(not timed). torch runs on one thread.

On an accelerator (``--device cuda``) the logits live on the device and the bitmask in host
memory, where the matchers fill it: every method's time includes moving the mask (or its ids) to
the device (every bitmask in pinned memory, as the processor fills it there), and each call ends
with ``torch.cuda.synchronize()``. The methods there are the processor's own path for scores on
an accelerator, the unpack methods on the device, the precomputed
bias (already on the device: a floor), xgrammar's kernel with its default backend, and
llguidance's compiled torch helper.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from . import Environment, machine_info, make_environment, new_bitmask, pin_threads, render_simple, save_results

FULL_BATCHES = (1, 32, 256)
QUICK_BATCHES = (1, 32)


def collect_masks(env: Environment) -> np.ndarray:
    """The packed rows our K2 matcher fills along the two-call transcript, shape (tokens, words)."""
    from .kimi_k2 import TOOLS, Transcript

    ours = env.adapters[0]
    matcher = ours.matcher(ours.compile_k2(TOOLS))
    bitmask = new_bitmask(env.setup.vocab_size)
    rows = []
    for token in Transcript(env).two_calls():
        bitmask.zero_()
        matcher.fill_bitmask(bitmask, 0)
        rows.append(bitmask.numpy()[0].copy())
        if not matcher.accept_token(token):
            raise RuntimeError(f"our matcher refused token {token} of its own benchmark transcript")
    return np.stack(rows)


_SHIFTS = torch.arange(32, dtype=torch.int32)


def unpack(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool (batch, vocab_size): bit ``i % 32`` of word ``i // 32`` (on the bitmask's device)."""
    bits = (bitmask.unsqueeze(-1) >> _SHIFTS.to(bitmask.device)) & 1
    return bits.view(bitmask.shape[0], -1)[:, :vocab_size].bool()


def reference(scores: torch.Tensor, bitmask: torch.Tensor) -> torch.Tensor:
    """Masked scores computed the slow obvious way (numpy unpackbits)."""
    packed = bitmask.numpy().view(np.uint8)
    allowed = np.unpackbits(packed, axis=1, bitorder="little")[:, : scores.shape[1]].astype(bool)
    out = scores.clone()
    out[torch.from_numpy(~allowed)] = float("-inf")
    return out


Method = Callable[[torch.Tensor, int], torch.Tensor]
"""Takes a fresh copy of the logits and a step number, returns the masked logits (the same
tensor when in place)."""


def methods(env: Environment, steps: Sequence[torch.Tensor], vocab_size: int,
            device: torch.device = torch.device("cpu"), dtype: torch.dtype = torch.float32) -> dict[str, Method]:
    """Every available method; step ``s`` applies bitmask ``steps[s]`` (host memory) to scores of
    ``device`` and ``dtype``."""
    from enforcer.integrations.transformers import ToolCallLogitsProcessor

    from .kimi_k2 import TOOLS

    found: dict[str, Method] = {}
    if device.type == "cuda":  # every method copies from pinned memory, as the processor does
        steps = [bitmask.pin_memory() for bitmask in steps]
    proc = ToolCallLogitsProcessor(env.tokenizer, TOOLS, vocabulary=env.vocabulary)
    proc._setting = (vocab_size, str(device), dtype)
    proc._on_host = device.type == "cpu" and dtype == torch.float32
    if device.type != "cpu":
        proc._bitmask = steps[0].numpy()
        proc._start_on_device(torch.empty(0, dtype=dtype, device=device))
    rows = [b.numpy() for b in steps]

    def ours(scores: torch.Tensor, step: int) -> torch.Tensor:
        proc._bitmask = rows[step]
        return proc._masked(scores)

    found["enforcer processor"] = ours
    biases = []
    for bitmask in steps:
        bias = torch.zeros((bitmask.shape[0], vocab_size), dtype=dtype, device=device)
        biases.append(bias.masked_fill_(~unpack(bitmask.to(device), vocab_size), float("-inf")))
    found["precomputed bias add_"] = lambda scores, step: scores.add_(biases[step])
    found["unpack + masked_fill_"] = lambda scores, step: scores.masked_fill_(
        ~unpack(steps[step].to(device), vocab_size), float("-inf"))
    minus_inf = torch.tensor(float("-inf"), device=device, dtype=dtype)
    found["unpack + torch.where"] = lambda scores, step: torch.where(unpack(steps[step].to(device), vocab_size),
                                                                     scores, minus_inf)
    try:
        import xgrammar

        backend = "cpu" if device.type == "cpu" else "auto"

        def xgr(scores: torch.Tensor, step: int) -> torch.Tensor:
            xgrammar.apply_token_bitmask_inplace(scores, steps[step].to(device), vocab_size=vocab_size,
                                                 backend=backend)
            return scores

        found["xgrammar apply_token_bitmask_inplace"] = xgr
    except ImportError:
        pass
    try:
        import llguidance.torch as llg_torch

        def llg(scores: torch.Tensor, step: int) -> torch.Tensor:
            llg_torch.apply_token_bitmask_inplace(scores, steps[step].to(device))
            return scores

        found["llguidance apply_token_bitmask_inplace"] = llg
    except ImportError:
        pass
    return found


def time_method(method: Method, base: torch.Tensor, calls: int, steps: int) -> list[float]:
    """Seconds per call over ``calls`` calls cycling the steps, each on a fresh copy of ``base``
    (copy untimed; on an accelerator each call is timed to the end of its device work)."""
    sync = torch.cuda.synchronize if base.device.type == "cuda" else (lambda: None)
    out = []
    for call in range(calls):
        scores = base.clone()
        sync()
        t0 = time.perf_counter()
        method(scores, call % steps)
        sync()
        out.append(time.perf_counter() - t0)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=f"batches {QUICK_BATCHES}")
    parser.add_argument("--batches", type=int, nargs="*", default=None, help=f"batch sizes (default {FULL_BATCHES})")
    parser.add_argument("--no-save", action="store_true", help="do not write results/*.json")
    parser.add_argument("--device", default="cpu", help="where the logits live: cpu (default), cuda, ...")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="dtype of the logits (default float32)")


def run(args: argparse.Namespace, env: Environment | None = None) -> dict[str, Any]:
    """Run the mask-application suite, print its table, return (and save) the results."""
    pin_threads()
    quick = bool(getattr(args, "quick", False))
    batches = getattr(args, "batches", None) or (QUICK_BATCHES if quick else FULL_BATCHES)
    device = torch.device(getattr(args, "device", "cpu"))
    dtype = getattr(torch, getattr(args, "dtype", "float32"))
    if env is None:
        env = make_environment([])
    vocab_size = env.setup.vocab_size
    masks = collect_masks(env)
    allowed_counts = [int(np.unpackbits(r.view(np.uint8)).sum()) for r in masks]
    generator = torch.Generator().manual_seed(0)
    rows: list[dict[str, Any]] = []
    for batch in batches:
        calls = max(5, min(200, 2000 // batch)) if not quick else max(3, min(50, 400 // batch))
        n_steps = min(calls, max(1, len(masks) // batch), 8 if batch > 32 else len(masks))
        steps = [torch.from_numpy(masks[(s * batch + np.arange(batch)) % len(masks)].copy()) for s in range(n_steps)]
        host = torch.randn((batch, vocab_size), generator=generator, dtype=torch.float32).to(dtype)
        expected = [reference(host.float(), b).to(dtype) for b in steps]
        base = host.to(device)
        for name, method in methods(env, steps, vocab_size, device, dtype).items():
            row: dict[str, Any] = {"method": name, "batch": batch}
            try:
                if not all(torch.equal(method(base.clone(), s).cpu(), expected[s]) for s in range(n_steps)):
                    row["error"] = "output differs from the reference"
                else:  # the check above was the warm-up (our bias cache fills there)
                    seconds = time_method(method, base, calls, n_steps)
                    row.update(calls=calls, per_call_us=1e6 * statistics.median(seconds),
                               p90_call_us=1e6 * sorted(seconds)[int(0.9 * (len(seconds) - 1))])
                    row["per_row_us"] = row["per_call_us"] / batch
            except Exception as exc:  # a library's kernel refusing this input: recorded
                row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
            rows.append(row)
    results = {
        "suite": "mask_application",
        "machine": machine_info(),
        "settings": {"batches": list(batches), "vocab_size": vocab_size, "threads": torch.get_num_threads(),
                     "dtype": str(dtype).removeprefix("torch."), "device": str(device),
                     "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                     "distinct_masks": len(masks),
                     "allowed_ids_per_mask": {"min": min(allowed_counts), "median": statistics.median(allowed_counts),
                                              "max": max(allowed_counts)}},
        "rows": rows,
    }
    print(render_table(rows, batches, device, dtype))
    if not getattr(args, "no_save", False):
        suite = "mask_application" if device.type == "cpu" and dtype == torch.float32 \
            else f"mask_application-{device.type}-{str(dtype).removeprefix('torch.')}"
        print(f"\nsaved {save_results(suite, results)}")
    return results


PEER_METHODS = ("xgrammar apply_token_bitmask_inplace", "llguidance apply_token_bitmask_inplace")


def render_table(rows: Sequence[dict[str, Any]], batches: Sequence[int],
                 device: torch.device = torch.device("cpu"), dtype: torch.dtype = torch.float32) -> str:
    """µs per call and per row, per batch and method, then ours / best peer kernel."""
    lines = []
    for batch in batches:
        here = [r for r in rows if r["batch"] == batch]
        for r in here:
            lines.append([batch, r["method"], f"{r['per_call_us']:,.1f}" if "per_call_us" in r else "-",
                          f"{r['per_row_us']:,.2f}" if "per_row_us" in r else "-", r.get("error", "ok")])
        ours = next((r for r in here if r["method"] == "enforcer processor" and "per_call_us" in r), None)
        peers = [r["per_call_us"] for r in here if r["method"] in PEER_METHODS and "per_call_us" in r]
        ratio = f"{ours['per_call_us'] / min(peers):.2f}x" if ours and peers else "-"
        lines.append([batch, "ours / best peer kernel", ratio, "", ""])
    where = f"{device.type.upper()} {str(dtype).removeprefix('torch.')}"
    return render_simple(f"\nMask application on {where} logits, V = 151,899 (µs, median)",
                         ["batch", "method", "per call", "per row", "status"], lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mask_application", description=__doc__.split("\n")[0])
    add_arguments(parser)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
