"""The first-sight suite's per-subset pooling (``benchmarks.first_sight``): each subset pools
the token latencies of its own schemas, those every library compiled. The rows are made up
here (the aggregation alone is tested; the suite itself needs the shared corpus)."""

from __future__ import annotations

from benchmarks.first_sight import per_subset, pool, render_subsets, subset_of


def _row(name: str, tokens_us: list[float], status: str = "ok") -> dict:
    return {"name": name, "status": status, "tokens_ns": [int(t * 1e3) for t in tokens_us],
            "later_ns": [1_000], "first_mask_s": 0.002, "compile_s": 0.001}


def test_subsets_pool_their_own_common_schemas() -> None:
    ours = {"library": "enforcer", "rows": [
        _row("jsonschemabench/Github_hard---o1", [10, 30]),
        _row("jsonschemabench/Kubernetes---kb_2", [5]),
        _row("maskbench/BFCL_simple_3", [7]),
        _row("maskbench/BFCL_parallel_9", [9]),
        _row("jsonschemabench/Github_hard---o4", [99])]}
    peer = {"library": "llguidance", "rows": [
        _row("jsonschemabench/Github_hard---o1", [20, 20]),
        _row("jsonschemabench/Kubernetes---kb_2", [10]),
        _row("maskbench/BFCL_simple_3", [7]),
        _row("maskbench/BFCL_parallel_9", [9]),
        _row("jsonschemabench/Github_hard---o4", [1], status="compile_error")]}  # not common: left out
    summaries, common = pool([ours, peer])
    subsets = per_subset([ours, peer], common)
    assert subset_of("jsonschemabench/Github_hard---o1") == "Github_hard"
    assert subset_of("maskbench/MCPspec_x_2") == "MCPspec"
    assert subsets["BFCL"][0]["schemas"] == 2 and subsets["BFCL"][0]["pass1"]["mean_us"] == 8.0
    assert list(subsets) == ["BFCL", "Github_hard", "Kubernetes"]
    hard_ours, hard_peer = subsets["Github_hard"]
    assert hard_ours["schemas"] == 1 and hard_ours["pass1"]["mean_us"] == 20.0 and hard_peer["pass1"]["mean_us"] == 20.0
    assert subsets["Kubernetes"][0]["pass1"]["mean_us"] == 5.0
    table = render_subsets(subsets)
    assert "Kubernetes" in table and "(0.50x)" in table and "(1.00x)" in table
