"""``python -m benchmarks [--quick]``: the JSON-schema, Kimi K2, Kimi K3, Qwen3 and DeepSeek-V3.1
(formats_families), compile-scaling, mask-application and first-sight suites (the last in one
process per library).

The K2-shaped tokenizer and every library's tokenizer tables are built once and shared by the
suites; the K3 suite builds its own (the K3-shaped tokenizer and the K3-capable peers).
"""

from __future__ import annotations

import argparse
import time
from typing import Sequence

from . import (compile_scaling, first_sight, formats_families, json_schema, kimi_k2, kimi_k3, make_environment,
               mask_application, pin_threads)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    json_schema.add_arguments(parser)
    first_sight.add_arguments(parser)
    parser.set_defaults(peers=list(dict.fromkeys([*json_schema.DEFAULT_PEERS, *kimi_k2.DEFAULT_PEERS,
                                                     *kimi_k3.DEFAULT_PEERS])))
    args = parser.parse_args(argv)
    pin_threads()
    start = time.perf_counter()
    env = make_environment(args.peers)
    print("set-up seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in env.setup_seconds.items()))
    json_schema.run(args, env)
    kimi_k2.run(args, env)
    kimi_k3.run(args)
    formats_families.run(args)
    compile_scaling.run(args, env)
    mask_application.run(args, env)
    first_sight.run(args)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
