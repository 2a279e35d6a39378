"""HyperTRIO (002): H1-H4 (Figs 9-12) on the Rust model, plus the statistics and the error
paths, through the bindings. Each tolerance test names the paper's value and the tolerance held
to; a statement devlend does not reproduce is a strict xfail that names the gap and its cause.

- H1: with the 64-entry 8-way DevTLB, up to 4 connections keep >= 90% of the 200 Gb/s link and
  more than 4 "start evicting entries of other tenants, which eventually leads to thrashing"
  (§IV-D): from 4 connections on utilisation falls with every step, below 25% at 8 and more (a
  1024-entry DevTLB still holds 8 connections).
- H2: Base at more than 32 tenants 12-30 Gb/s (tolerance: 10.8-31.5, -10% / +5%), at 1024
  tenants 6% = 12 Gb/s for RR1 and RAND1 (+-15%), RR4 above RR1 (ring translations reused in a
  burst, §V-B); HyperTRIO at 1024 tenants "over 90%" for RR1/RR4 (held to >= 85%: 002's own
  Fig 12 numbers, 136 Gb/s with PTB 32 plus "up to 30%", make 177 Gb/s = 88%); RAND1 "up to 80%"
  is an xfail.
- H3: active translation sets 8 / 32 / 36 (iperf3 exact, mediastream +-2; websearch's 36 is an
  xfail: the 32 data pages of §IV-D cap a tenant's set at 33). These are consistency checks, not
  results: each profile's data_streams was set from §V-C's set size (hardware.toml), so they test
  that the oracle-measured set is what the workload was built to have; the oracle never below LRU or LFU;
  LFU "up to 2x LRU" (iperf3, 16 tenants) is an xfail.
- H4: PTB 8 at full bandwidth (>= 90%) up to 16 tenants (all three workloads); PTB 32 at 1024
  tenants 136 Gb/s +-12%; prefetching adds 30% +-15 points (websearch, largest gain over tenant
  counts); its serving 45% +-10 points of the DevTLB misses at 1024 tenants (websearch) is an
  xfail (devlend ~35%).
Quick mode throughout: each tenant's log is cut to max(100, 40000/tenants) steady-state packets
(the full Table III lengths take minutes).
"""

from __future__ import annotations

import pytest

from devlend import HyperTrioError, _core
from conftest import quick
from devlend.experiments import _hypertrio, hardware_params

LINK = 200.0


@pytest.fixture(scope="module")
def h1_res():
    return quick("h1")


@pytest.fixture(scope="module")
def h2_res():
    return quick("h2")


def _h1(res, cfg):
    return {r["connections"]: r["gbps"] for r in res.rows if r["config"] == cfg}


def test_h1_more_than_four_connections_thrash_an_8_way_devtlb(h1_res):
    """002 §IV-D (Fig 9): "For an 8-way set-associate DevTLB, more than four concurrent connections
    start evicting entries of other tenants, which eventually leads to thrashing and significantly
    increases translation time for every request." Up to 4: the link (>= 90%); from 4 on every
    step loses bandwidth; at 8 and more, thrashing (< 25%)."""
    g = _h1(h1_res, "64-entry 8-way")
    assert all(g[c] >= 0.9 * LINK for c in g if c <= 4), g
    assert all(g[c] < 0.25 * LINK for c in g if c >= 8), g
    beyond = [g[c] for c in sorted(g) if c >= 4]
    assert all(a > b for a, b in zip(beyond, beyond[1:])), g
    big = _h1(h1_res, "1024-entry 8-way")
    assert big[8] >= 0.9 * LINK and big[16] < 0.25 * LINK, big


def test_h2_base_collapses_beyond_32_tenants(h2_res):
    base = [r for r in h2_res.rows if r["config"] == "base" and isinstance(r["tenants"], int) and r["tenants"] > 32]
    # 002 §V-B: 12-30 Gb/s, at most 15% of the link
    assert base and all(0.9 * 12 <= r["gbps"] <= 1.05 * 30 for r in base), \
        [(r["workload"], r["order"], r["tenants"], r["gbps"]) for r in base]


def test_h2_base_at_1024_tenants_is_6_percent(h2_res):
    g = {(r["workload"], r["order"]): r["gbps"] for r in h2_res.rows if r["config"] == "base" and r["tenants"] == 1024}
    for (w, o), x in g.items():
        if o != "RR4":
            assert 0.85 * 12 <= x <= 1.15 * 12, (w, o, x)   # 002 §V-B/§VII: 6% of 200 Gb/s
        else:
            assert x > g[w, "RR1"], (w, x)                  # ring translations reused inside a burst


def test_h2_hypertrio_keeps_the_link_at_1024_tenants(h2_res):
    ht = {(r["workload"], r["order"]): r for r in h2_res.rows if r["config"] == "hypertrio" and r["tenants"] == 1024}
    assert len(ht) == 9
    for (w, o), r in ht.items():
        if o == "RAND1":
            continue
        assert r["gbps"] >= 0.85 * LINK, (w, o, r["gbps"])
        base = next(x for x in h2_res.rows if (x["workload"], x["order"], x["config"], x["tenants"]) == (w, o, "base", 1024))
        assert r["gbps"] > (10 if o == "RR1" else 5) * base["gbps"]   # 002 §VII: over 90% vs 6% for Base


def test_statistics_are_reported_and_consistent():
    s = _hypertrio.simulate("hypertrio", "iperf3", 64, "RR1", packets_per_tenant=300)
    assert s["translations"] == 3 * s["packets"] == 3 * 64 * 300
    for k in ("devtlb_hit_rate", "pb_hit_rate", "iotlb_hit_rate", "l2_hit_rate", "l3_hit_rate", "context_hit_rate",
              "prefetch_accuracy", "prefetch_coverage"):
        assert 0.0 <= s[k] <= 1.0, k
    assert 0 < s["ptb_mean"] <= s["ptb_max"] <= 32 + 2     # translations; a packet enters while one entry is free
    assert s["prefetch_requests"] > 0 and s["prefetch_coverage"] > 0
    b = _hypertrio.simulate("base", "iperf3", 64, "RR1", packets_per_tenant=300)
    assert b["ptb_max"] == 3 and b["drops"] > 0 and b["prefetch_requests"] == 0
    assert 0 < b["mean_walk_accesses"] <= 4     # the logged one-dimensional walk: 4 levels for a 4 KB page
    n = _hypertrio.simulate("base", "iperf3", 64, "RR1", packets_per_tenant=300, overrides={"nested_walk": True})
    assert 4 < n["mean_walk_accesses"] <= 24    # 002 Table II: 24 for a 4 KB page with nothing cached


def test_replacement_policies_and_overrides():
    pts = {p: _hypertrio.simulate("base", "iperf3", 8, "RR1", 2000, overrides={"devtlb_policy": p})["devtlb_hit_rate"]
           for p in ("lru", "lfu", "oracle")}
    assert pts["oracle"] >= pts["lru"] and pts["oracle"] >= pts["lfu"], pts


@pytest.mark.xfail(strict=True, reason="H2 gap (mechanism absent from 002): 002 has HyperTRIO at up to 80% with RAND1 at "
                   "1024 tenants; devlend gives 71% (141.9-142.0 Gb/s, all three workloads; residual -11%). §III's only "
                   "mechanism beyond the PTB is the prefetch unit, and its SID predictor maps the SID seen 48 requests ago "
                   "to the one seen now: under a random order that pair never repeats, so the predicted tenant is a random "
                   "one of 1024 and its entries leave the 8-entry buffer before it comes (coverage 0.4%); the chipset-side "
                   "warming of §III (prefetched gIOVAs walked through the IOTLB and L2/L3 caches) is modelled and adds 0.3% "
                   "(141.5 Gb/s with prefetching off). PTB 32 alone sets the rate (as §V-D's 136 Gb/s); 002 names nothing "
                   "that lets RAND1 beat it by 13%")
def test_h2_hypertrio_rand1_reaches_80_percent(h2_res):
    x = max(r["gbps"] for r in h2_res.rows if r["config"] == "hypertrio" and r["tenants"] == 1024 and r["order"] == "RAND1")
    assert x >= 0.9 * 0.8 * LINK, x


@pytest.mark.parametrize("args, needle", [
    (("base", "iperf3", 0, "RR1", 10), "0 tenants"),
    (("base", "nosuch", 4, "RR1", 10), "iperf3"),
    (("base", "iperf3", 4, "ZZ1", 10), "RR1"),
    (("nosuch", "iperf3", 4, "RR1", 10), "hypertrio"),
])
def test_bad_input_is_one_clear_error(args, needle):
    with pytest.raises(_core.HyperTrioError, match=needle):
        _core.hypertrio_simulate(*args)
    with pytest.raises(HyperTrioError, match=needle) as e:
        _hypertrio.simulate(*args)
    assert e.value.kind in ("unknown_name", "out_of_range") and not str(e.value).startswith(("'", '"'))


def test_partitions_exceeding_rows_are_refused():
    with pytest.raises(HyperTrioError, match="L3TLB.*partitions") as e:
        _hypertrio.simulate("hypertrio", "iperf3", 4, "RR1", 10, overrides={"l3_partitions": 128})
    assert e.value.kind == "geometry"
    with pytest.raises(HyperTrioError, match="unknown field 'bogus'"):
        _hypertrio.simulate("base", "iperf3", 4, "RR1", 10, overrides={"bogus": 1})


def test_plots_draw(h1_res, h2_res, tmp_path):
    for res in (h1_res, h2_res):
        p = tmp_path / f"{res.name}.png"
        res.plot(res, str(p))
        assert p.stat().st_size > 1000


# H3/H4 (002 Figs 11-12), quick mode.
from devlend.experiments import h4  # noqa: E402


@pytest.fixture(scope="module")
def h3_res():
    return quick("h3")


@pytest.fixture(scope="module")
def h4_res():
    return quick("h4")


def test_h3_active_translation_sets_and_oracle(h3_res):
    act = {r["workload"]: r["gbps"] for r in h3_res.rows if r["variant"] == "active set (ours / paper)"}
    ours = {w: int(v.split("/")[0]) for w, v in act.items()}
    assert ours["iperf3"] == 8                      # 002 §V-C: 8
    assert 30 <= ours["mediastream"] <= 34          # 002: 32
    hr = {(r["workload"], r["variant"], r["tenants"]): r["devtlb_hit_rate"] for r in h3_res.rows if isinstance(r["gbps"], float)}
    for (w, v, n), h in hr.items():
        if v == "b: oracle":
            assert h >= hr[w, "b: LRU", n] - 0.01 and h >= hr[w, "b: LFU", n] - 0.01, (w, n)


@pytest.mark.xfail(strict=True, reason="H3 gap (missing number): 002 §V-C has websearch's active translation set at 36; "
                   "devlend gets 32 (residual -4 entries). The set is the ring page plus the data buffers in use, and 002 "
                   "counts data pages only for mediastream (§IV-D: 32, 'around 31 pages most of the time'); for websearch "
                   "it gives neither the number of data pages nor which other pages stay active, so a tenant has at most "
                   "33 pages here and devlend does not invent 3 more")
def test_h3_websearch_active_set_is_36(h3_res):
    act = {r["workload"]: r["gbps"] for r in h3_res.rows if r["variant"] == "active set (ours / paper)"}
    assert 34 <= int(act["websearch"].split("/")[0]) <= 38      # 002: 36, +-2 as mediastream


def _h3(res):
    return {(r["workload"], r["variant"], r["tenants"]): r["gbps"] for r in res.rows if isinstance(r["gbps"], float)}


def test_h3_lfu_is_not_below_lru_on_iperf3(h3_res):
    g = _h3(h3_res)
    assert g["iperf3", "b: LFU", 16] >= g["iperf3", "b: LRU", 16]


@pytest.mark.xfail(strict=True, reason="H3 gap (missing page layout): 002 has LFU up to 2x LRU (iperf3, 16 tenants); "
                   "devlend gives 1.50x (LRU 12.5, LFU 18.7 Gb/s). All tenants' ring pages share one gIOVA (§IV-D: the "
                   "tenants 'use the same subset of page frames'), hence one 8-way DevTLB row (§V-C: 'conflicts in "
                   "frequently used sets'); 16 of them cannot fit it, so even Belady's oracle reaches only 19.7 Gb/s "
                   "(1.58x LRU) and no replacement policy can give 2x. The per-tenant page layout of 002's real logs, "
                   "which would set how many tenants share a row, is not public")
def test_h3_lfu_doubles_lru_at_16_tenants(h3_res):
    g = _h3(h3_res)
    assert g["iperf3", "b: LFU", 16] >= 1.6 * g["iperf3", "b: LRU", 16]


def _h4(res):
    return {(r["workload"], r["variant"], r["tenants"]): r for r in res.rows}


@pytest.mark.parametrize("w", ["iperf3", "mediastream", "websearch"])
def test_h4_ptb8_full_bandwidth_up_to_16_tenants(h4_res, w):
    g = _h4(h4_res)
    assert all(g[w, "b: PTB 8", n]["gbps"] >= 0.9 * LINK for n in (4, 16)), [g[w, "b: PTB 8", n]["gbps"] for n in (4, 16)]


def test_h4_ptb32_at_1024_tenants_gives_136_gbps(h4_res):
    g = _h4(h4_res)
    for w in h4.WORKLOADS:
        assert 0.88 * 136 <= g[w, "b: PTB 32", 1024]["gbps"] <= 1.12 * 136, (w, g[w, "b: PTB 32", 1024]["gbps"])


def test_h4_prefetching_adds_30_percent(h4_res):
    g = _h4(h4_res)
    gain = max(g["websearch", "c: PTB 32 + prefetching", n]["gbps"] / g["websearch", "b: PTB 32", n]["gbps"] - 1
               for n in h4.QUICK_TENANTS)
    assert 0.15 <= gain <= 0.45, gain


@pytest.mark.xfail(strict=True, reason="H4 gap (unstated mechanism): 002 has the prefetch buffer supplying 45% of requests "
                   "(websearch, 1024 tenants); devlend serves 34.4% of the DevTLB misses (residual -10.6 points; per request "
                   "it is lower still, as misses are a subset of requests). Table IV's 8-entry buffer holds the 2 history "
                   "pages of only 4 predicted tenants while the predictor looks 48 requests (16 packets) ahead, so later "
                   "tenants' prefetches evict entries before their packet arrives: 16 entries give 41%. 002 does not say "
                   "how its buffer is filled or replaced (whether a used entry is freed, whether space is reserved at issue). "
                   "devlend's prefetch accuracy is 45.1%, a different ratio (used / prefetched translations)")
def test_h4_prefetching_serves_45_percent(h4_res):
    cov = _h4(h4_res)["websearch", "c: PTB 32 + prefetching", 1024]["prefetch_coverage"]
    assert 0.35 <= cov <= 0.55, cov


def test_h4_each_mechanism_adds(h4_res):
    g = {k: r["gbps"] for k, r in _h4(h4_res).items()}
    for (w, v, n), x in g.items():
        if v == "b: PTB 32":
            assert x >= g[w, "b: PTB 8", n] - 1 >= g[w, "a: partitioning, PTB 1", n] - 2, (w, n)
            assert g[w, "c: PTB 32 + prefetching", n] >= 0.99 * x, (w, n)


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
    with pytest.raises(_core.HyperTrioError, match=r"bad\.log:2: .*iova"):
        _core.hypertrio_read_qemu_log(str(bad))


# ---- hnic: the NIC lent through an NTB (issue 5, beyond 002) ------------------------------------
def test_lent_nic_round_trip_is_the_engines_path_and_costs_bandwidth():
    from devlend.experiments import hnic
    costs = hnic.path_costs()
    rtt = costs["round_trip_ps"]
    # The NTB's latency, as the run's parameters set it, is crossed by the request and by the
    # completion: a slower NTB adds exactly twice its extra to the lent NIC's round trip and
    # nothing to the local one.
    ntb = hnic._fabric().machine().params()["ntb_latency_ns"]
    slower = hnic.path_costs({"timing.ntb_latency_ps": round(float(ntb) * 1000) + 100_000})["round_trip_ps"]
    assert slower["local"] == rtt["local"]
    assert slower["lent"] - rtt["lent"] == 2 * 100_000
    assert rtt["lent"] - rtt["local"] > 2 * float(ntb) * 1000
    assert costs["ntb_gbps"] > 200        # a Gen4 x16 NTB carries the 200 Gb/s link
    res = quick("hnic")
    g = {(r["config"], r["nic"], r["tenants"]): r["gbps"] for r in res.rows}
    trip = {r["nic"]: r["round_trip_ns"] for r in res.rows}
    assert trip == {w: rtt[w] / 1000 for w in ("local", "lent")}
    for config in ("base", "hypertrio"):
        for n in hnic.QUICK_TENANTS:
            assert g[config, "lent", n] <= g[config, "local", n]
    # Many tenants: each miss waits longer, so the lent NIC loses bandwidth; HyperTRIO still helps.
    assert g["hypertrio", "lent", 1024] < 0.8 * g["hypertrio", "local", 1024]
    assert g["hypertrio", "lent", 1024] > 5 * g["base", "lent", 1024]


def test_round_trip_override_moves_the_pipeline():
    from devlend.experiments._hypertrio import simulate
    fast, slow = (simulate("base", "iperf3", 64, "RR1", 200, {"pcie_round_trip_ps": t}) for t in (200_000, 2_000_000))
    assert slow["gbps"] < fast["gbps"]
    # Without a measured round trip the pipeline runs on 002 Table II's one way, twice.
    table2 = 2 * hardware_params()["hypertrio"]["pcie_one_way_ps"]
    assert simulate("base", "iperf3", 64, "RR1", 200) == simulate("base", "iperf3", 64, "RR1", 200,
                                                                  {"pcie_round_trip_ps": table2})


def test_lent_nic_and_gpu_copy_share_the_ntb():
    from devlend.experiments import hnic
    from devlend.experiments._hypertrio import simulate
    rtt = hnic.path_costs()["round_trip_ps"]["lent"]
    stats = simulate("hypertrio", "iperf3", 1024, "RR1", 40, {"pcie_round_trip_ps": rtt})
    share = hnic.shared_links(stats, 1542)
    nic, gpu, both = share["nic"], share["gpu"], share["together"]
    assert both["nic_gbps"] < nic["nic_gbps"]
    assert both["gpu_gbps"] < gpu["gpu_gbps"]
    assert both["round_trip_ns"] > nic["round_trip_ns"]
    # The busiest link is the one they share, and it carries no more than it can.
    assert nic["link"] == gpu["link"] == both["link"]
    assert both["link_gbps"] <= share["link_capacity_gbps"]
    assert both["link_utilisation"] <= 1


def test_round_trip_override_is_validated():
    from devlend import _core
    import json
    with pytest.raises(_core.HyperTrioError, match="pcie_round_trip_ps"):
        _core.hypertrio_simulate("base", "iperf3", 4, "RR1", 100, json.dumps({"pcie_round_trip_ps": -5}))
