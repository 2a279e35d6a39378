"""HyperTRIO (002): H1 (Fig 9) and H2 (Fig 10) on the Rust model, plus the statistics and the
error paths, through the bindings.

Tolerances (002 gives curves and these statements, not tables):
- H1: with the 64-entry 8-way DevTLB, up to 4 connections keep >= 90% of the 200 Gb/s link and
  more than 4 thrash: at 8 and more connections utilisation falls below 25%, and it never rises
  again as connections grow (a 1024-entry DevTLB still holds 8 connections).
- H2: Base at more than 32 tenants stays at or below 15% of the link (30 Gb/s; 002: 12-30 Gb/s);
  HyperTRIO at 1024 tenants keeps over 90% for RR1 and RR4 in every workload (002: over 90%,
  up to 100%), and RAND1 at least 75% (002: "up to 80%"; devlend's RAND1 is higher, see the
  report in h2's notes).
Quick mode throughout: each tenant's log is cut to max(100, 40000/tenants) steady-state packets
(the full Table III lengths take minutes); the file runs in a few seconds.
"""

from __future__ import annotations

import pytest

from devlend import _core
from devlend.experiments import _hypertrio, h1, h2

LINK = 200.0


@pytest.fixture(scope="module")
def h1_res():
    return h1.run(quick=True)


@pytest.fixture(scope="module")
def h2_res():
    return h2.run(quick=True)


def _h1(res, cfg):
    return {r["connections"]: r["gbps"] for r in res.rows if r["config"] == cfg}


def test_h1_more_than_four_connections_thrash_an_8_way_devtlb(h1_res):
    g = _h1(h1_res, "64-entry 8-way")
    assert all(g[c] >= 0.9 * LINK for c in g if c <= 4), g
    assert all(g[c] < 0.25 * LINK for c in g if c >= 8), g
    beyond = [g[c] for c in sorted(g) if c >= 8]
    assert beyond == sorted(beyond, reverse=True), g
    big = _h1(h1_res, "1024-entry 8-way")
    assert big[8] >= 0.9 * LINK and big[16] < 0.25 * LINK, big


def test_h2_base_collapses_beyond_32_tenants(h2_res):
    base = [r for r in h2_res.rows if r["config"] == "base" and isinstance(r["tenants"], int) and r["tenants"] > 32]
    assert base and all(r["gbps"] <= 0.15 * LINK for r in base), [(r["workload"], r["order"], r["tenants"], r["gbps"]) for r in base]


def test_h2_hypertrio_keeps_the_link_at_1024_tenants(h2_res):
    ht = {(r["workload"], r["order"]): r for r in h2_res.rows if r["config"] == "hypertrio" and r["tenants"] == 1024}
    assert len(ht) == 9
    for (w, o), r in ht.items():
        floor = 0.75 if o == "RAND1" else 0.90
        assert r["gbps"] >= floor * LINK, (w, o, r["gbps"])
        base = next(x for x in h2_res.rows if (x["workload"], x["order"], x["config"], x["tenants"]) == (w, o, "base", 1024))
        assert r["gbps"] > 10 * base["gbps"]


def test_statistics_are_reported_and_consistent():
    s = _hypertrio.simulate("hypertrio", "iperf3", 64, "RR1", packets_per_tenant=300)
    assert s["translations"] == 3 * s["packets"] == 3 * 64 * 300
    for k in ("devtlb_hit_rate", "pb_hit_rate", "iotlb_hit_rate", "l2_hit_rate", "l3_hit_rate", "context_hit_rate",
              "prefetch_accuracy", "prefetch_coverage"):
        assert 0.0 <= s[k] <= 1.0, k
    assert 0 < s["ptb_mean"] <= s["ptb_max"] <= 32
    assert s["prefetch_requests"] > 0 and s["prefetch_coverage"] > 0
    b = _hypertrio.simulate("base", "iperf3", 64, "RR1", packets_per_tenant=300)
    assert b["ptb_max"] == 1 and b["drops"] > 0 and b["prefetch_requests"] == 0
    assert 8 < b["mean_walk_accesses"] <= 24   # 002 Table II: 24 for a 4 KB page with nothing cached


def test_replacement_policies_and_overrides():
    pts = {p: _hypertrio.simulate("base", "iperf3", 8, "RR1", 2000, overrides={"devtlb_policy": p})["devtlb_hit_rate"]
           for p in ("lru", "lfu", "oracle")}
    assert pts["oracle"] >= pts["lru"] and pts["oracle"] >= pts["lfu"], pts


@pytest.mark.parametrize("args, needle", [
    (("base", "iperf3", 0, "RR1", 10), "0 tenants"),
    (("base", "nosuch", 4, "RR1", 10), "iperf3"),
    (("base", "iperf3", 4, "ZZ1", 10), "RR1"),
    (("nosuch", "iperf3", 4, "RR1", 10), "hypertrio"),
])
def test_bad_input_is_one_clear_error(args, needle):
    with pytest.raises(_core.FabricError, match=needle):
        _core.hypertrio_simulate(*args)


def test_partitions_exceeding_rows_are_refused():
    with pytest.raises(_core.FabricError, match="L3TLB.*partitions"):
        _hypertrio.simulate("hypertrio", "iperf3", 4, "RR1", 10, overrides={"l3_partitions": 128})
    with pytest.raises(_core.FabricError, match="unknown field 'bogus'"):
        _hypertrio.simulate("base", "iperf3", 4, "RR1", 10, overrides={"bogus": 1})


def test_plots_draw(h1_res, h2_res, tmp_path):
    for res in (h1_res, h2_res):
        p = tmp_path / f"{res.name}.png"
        res.plot(res, str(p))
        assert p.stat().st_size > 1000


# H3/H4 (002 Figs 11-12), quick mode. Only the relations that follow from the mechanisms are
# held to; the magnitudes beside the paper's are in the experiments' notes.
from devlend.experiments import h3, h4  # noqa: E402


@pytest.fixture(scope="module")
def h3_res():
    return h3.run(quick=True)


@pytest.fixture(scope="module")
def h4_res():
    return h4.run(quick=True)


def test_h3_active_translation_sets_and_oracle(h3_res):
    act = {r["workload"]: r["gbps"] for r in h3_res.rows if r["variant"] == "active set (ours / paper)"}
    ours = {w: int(v.split("/")[0]) for w, v in act.items()}
    assert ours["iperf3"] == 8                      # 002 §V-C: 8
    assert 28 <= ours["mediastream"] <= 36          # 002: 32
    assert 32 <= ours["websearch"] <= 40            # 002: 36
    hr = {(r["workload"], r["variant"], r["tenants"]): r["devtlb_hit_rate"] for r in h3_res.rows if isinstance(r["gbps"], float)}
    for (w, v, n), h in hr.items():
        if v == "b: oracle":
            assert h >= hr[w, "b: LRU", n] - 0.01 and h >= hr[w, "b: LFU", n] - 0.01, (w, n)


def test_h4_each_mechanism_adds(h4_res):
    g = {(r["workload"], r["variant"], r["tenants"]): r["gbps"] for r in h4_res.rows}
    for (w, v, n), x in g.items():
        if v == "b: PTB 32":
            assert x >= g[w, "b: PTB 8", n] - 1 >= g[w, "a: partitioning, PTB 1", n] - 2, (w, n)
            assert g[w, "c: PTB 32 + prefetching", n] >= 0.99 * x, (w, n)
    assert all(g[w, "b: PTB 8", 4] >= 0.9 * LINK for w in h4.WORKLOADS)


def test_qemu_log_reader(tmp_path):
    import json
    log = tmp_path / "tenant.log"
    log.write_text("1@1.5:vtd_iotlb_page_update IOTLB page update sid 0x100 iova 0x34800000 slpte 0x3 domain 0x1\n"
                   "vtd_iotlb_page_hit IOTLB page hit sid 0x101 iova 0xbbe00000 slpte 0x83 domain 0x2\n"
                   "pci_cfg_read virtio-net-pci 00:03.0 @0x0 -> 0x1af4\n")
    s = json.loads(_core.hypertrio_read_qemu_log(str(log)))
    assert (s["requests"], s["sids"], s["skipped"]) == (2, [0x100, 0x101], 1)
    bad = tmp_path / "bad.log"
    bad.write_text("vtd_iotlb_page_hit IOTLB page hit sid 0x1 iova 0x1000 slpte 0x3 domain 0x1\nvtd_iotlb_page_hit sid 0x1 iova\n")
    with pytest.raises(_core.FabricError, match=r"bad\.log:2: .*iova"):
        _core.hypertrio_read_qemu_log(str(bad))
