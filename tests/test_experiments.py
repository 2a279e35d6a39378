"""Experiment tolerance tests: the reproduced figures land within stated tolerances of the papers.

D1 (000 §7.1, Fig 10; 001 §7.1) states relations, not numbers, plus 001 §7.3.1's "a little under
6 GB/s" for reads that do not cross a root. Tolerances:
- "reduced, especially for reads": Rem-IOMMU reads below half of Rem-SW reads at >= 1 MiB, and the
  read ratio at least 0.3 below the write ratio; writes never faster with the IOMMU.
- "Loc slightly faster for small transfers": Loc at least 20% above Rem-SW at 4 KiB.
- "curves converge from 1 MB": Loc and Rem-SW within 5% at 1 MiB and above.
- "a little under 6 GB/s": Rem-SW and Loc reads at 4 MiB in [5.0, 6.0) GB/s.
"""

import pytest

from conftest import quick

MiB = 1 << 20


@pytest.fixture(scope="module")
def d1():
    res = quick("d1")
    return {(r["scenario"], r["size"]): r for r in res.rows}


def test_d1_iommu_path_hurts_reads_much_more_than_writes(d1):
    for size in (1 * MiB, 4 * MiB):
        sw, io = d1["Rem-SW", size], d1["Rem-IOMMU", size]
        read_ratio = io["read_GBps"] / sw["read_GBps"]
        write_ratio = io["write_GBps"] / sw["write_GBps"]
        assert read_ratio < 0.5
        assert write_ratio - read_ratio >= 0.3
    for (scenario, size), r in d1.items():
        if scenario == "Rem-IOMMU":
            assert r["write_GBps"] <= d1["Rem-SW", size]["write_GBps"]


def test_d1_local_is_faster_for_small_transfers_and_converges_from_1mb(d1):
    for key in ("write_GBps", "read_GBps"):
        assert d1["Loc", 4096][key] >= 1.2 * d1["Rem-SW", 4096][key]
        for size in (1 * MiB, 4 * MiB):
            loc, rem = d1["Loc", size][key], d1["Rem-SW", size][key]
            assert abs(loc - rem) / loc < 0.05, (key, size, loc, rem)


# 001 §7.3.1, "a little under 6 GB/s": Loc 5.988 and Rem-SW 5.878 GB/s at 4 MiB (link's DLLPs on the
# reverse direction lift the Gen2 x16 bound to 6.10 GB/s; the copy engine's own costs per request and per copy, merged
# in the same session, keep the measured rate under 6).
def test_d1_reads_that_do_not_cross_a_root_reach_a_little_under_6_gbps(d1):
    for scenario in ("Loc", "Rem-SW"):
        assert 5.0 <= d1[scenario, 4 * MiB]["read_GBps"] < 6.0


def test_d1_plot_is_written(tmp_path):
    res = quick("d1")
    png = tmp_path / "d1.png"
    res.plot(res, str(png))
    assert png.stat().st_size > 10_000


# D2 (000 §7.2, Figs 11-12). Tolerances: "almost identical" / "~" = within 2% at 4 MiB for the
# peer-to-peer pairs, within 5% for RAM bounces; "lower" = strictly lower at 4 MiB (and at every
# size for IOMMU vs SW); "drop drastically" = below half of the same-size 2L-RAM-SW.
from devlend.experiments import p2p  # noqa: E402


@pytest.fixture(scope="module")
def d2():
    res = quick("d2")
    assert {r["scenario"] for r in res.rows} == set(p2p.SCENARIOS) and len(p2p.SCENARIOS) == 11
    return {(r["scenario"], r["size"]): r["GBps"] for r in res.rows}


def close(a, b, tol):
    return abs(a - b) / max(a, b) <= tol


def test_d2_one_lender_peer_to_peer_matches_local(d2):
    big = 4 * MiB
    assert close(d2["1L-P2P-SW", big], d2["Loc-P2P-SW", big], 0.02)
    assert close(d2["1L-P2P-IOMMU", big], d2["Loc-P2P-Root", big], 0.02)
    assert d2["Loc-P2P-SW", 64 * 1024] > d2["1L-P2P-SW", 64 * 1024]   # local slightly faster when small


def test_d2_two_lenders_are_lower_most_with_iommu(d2):
    # The data path is longer with two lenders; at small sizes the driver's own handshake, which
    # crosses lender A's root for gpu0/gpu1 (their switch does not hold the NTB), can hide that.
    for size in p2p.QUICK_SIZES:
        assert d2["2L-P2P-IOMMU", size] < d2["2L-P2P-SW", size]


def test_d2_two_lenders_peer_to_peer_lower_than_one_at_4_mib(d2):
    big = 4 * MiB
    assert d2["2L-P2P-SW", big] < d2["1L-P2P-SW", big]


def test_d2_ram_bounces(d2):
    big = 4 * MiB
    assert close(d2["2L-RAM-SW", big], d2["Loc-RAM-Root", big], 0.05)
    for name in ("1L-RAM-IOMMU", "2L-RAM-IOMMU"):
        assert d2[name, big] < 0.5 * d2["2L-RAM-SW", big]
    assert close(d2["1L-RAM-SW", big], d2["1L-RAM-IOMMU", big], 0.05)


@pytest.mark.xfail(strict=True, reason="known gap: the bounce is staged in 1 MiB chunks through two buffers (params "
                                       "[gpu_staging], assumed), so it is bound by gpu3's DMA reads of borrower RAM "
                                       "(~5.7 GB/s, D1's Rem-SW read) plus the pipeline's fill (chunk 0's write overlaps "
                                       "no read) and a driver handshake per chunk: ~4.6 GB/s at 4 MiB (4 chunks), 5.51 "
                                       "at 32 MiB; 001 does not say at which size it saw 'a little under 6 GB/s'")
def test_d2_two_lender_ram_bounce_reaches_a_little_under_6_gbps(d2):
    # 001 §7.3.1: 2L-RAM-P2P (000's 2L-RAM-SW) "a little under 6 GB/s", [5.0, 6.0) as for D1's reads.
    assert 5.0 <= d2["2L-RAM-SW", 4 * MiB] < 6.0


# D3 (000 §7.2, Fig 14). "=" within 1%, "~700 ns" within 10%; counters in RAM "increase
# significantly": at least 1.5 times the peer-to-peer round trip of the same placement.
from devlend.experiments import pingpong  # noqa: E402


@pytest.fixture(scope="module")
def d3():
    res = pingpong.run()
    rows = {r["scenario"]: r for r in res.rows}
    return rows


def test_d3_remote_peer_to_peer_latency_equals_local(d3):
    rt = {k: v["round_trip_ns"] for k, v in d3.items()}
    assert close(rt["1L-P2P-SW"], rt["Loc-P2P-SW"], 0.01)
    assert close(rt["1L-P2P-IOMMU"], rt["Loc-P2P-Root"], 0.01)
    assert rt["2L-P2P-SW"] - rt["1L-P2P-SW"] > 700      # "a little more than 700 ns"
    for p2p_name, ram_name in (("Loc-P2P-Root", "Loc-RAM-Root"), ("1L-P2P-SW", "1L-RAM-SW"), ("2L-P2P-SW", "2L-RAM-SW")):
        assert rt[ram_name] >= 1.5 * rt[p2p_name]


def test_d3_ram_to_ram_one_way_is_about_700ns(d3):
    one_way = d3["RAM-to-RAM one-way, borrower to lender B"]["devlend_one_way_ns"]
    assert abs(one_way - 700) / 700 <= 0.10


def test_d3_second_lender_adds_a_little_more_than_700ns(d3):
    # A calibration statement (params/measurements.yaml, d3-second-lender-round-trip): the NTB pair's
    # internal latency, the switch's and the Xeon root's are fitted to it and to the two RAM-to-RAM
    # statements together, so this checks that the committed fit is the one the model runs on.
    rt = {k: v["round_trip_ns"] for k, v in d3.items()}
    assert 700 < rt["2L-P2P-SW"] - rt["1L-P2P-SW"] <= 750


# D5 (000 §7.4, Fig 19; 001 §7.2). Bandwidth "very little difference": within 2%; RAM-to-RAM
# 550-580 ns within 5% of that band; the borrower's added latency is at least the 700 ns the paper
# expected; matching its "a little under 1 us" is a known gap (strict xfail below).


@pytest.fixture(scope="module")
def d5():
    return {r["scenario"]: r for r in quick("d5").rows}


def test_d5_bandwidth_alike_locally_and_borrowed(d5):
    assert close(d5["NatLoc"]["seq_1024x512B_GBps"], d5["NatRem"]["seq_1024x512B_GBps"], 0.02)
    assert d5["NatRem"]["latency_8x512B_us"] > d5["NatLoc"]["latency_8x512B_us"]


def test_d5_ram_to_ram_latency(d5):
    assert 550 * 0.95 <= d5["RAM-to-RAM one-way"]["devlend_added_ns"] <= 580 * 1.05


def test_d5_vm_borrower_bandwidth_alike_and_latency_higher(d5):
    # 000 §7.4: "almost the same bandwidth and latency as a native borrower"; the VM is slower.
    assert close(d5["VMRem"]["seq_1024x512B_GBps"], d5["NatLoc"]["seq_1024x512B_GBps"], 0.05)
    assert d5["VMRem"]["latency_8x512B_us"] > d5["NatRem"]["latency_8x512B_us"]


@pytest.mark.xfail(strict=True, reason="known gap: both paths now pay a host interrupt entry where the MSI lands "
                                       "(timing irq_entry_ps, one mechanism: ThreadOs::wait_irq and the VM path), so the VM "
                                       "adds ~6.0 us: the lender's entry 2 + its handler 0.5 + eventfd/irqfd 1.5 + VM and guest "
                                       "entry 2, plus the notification's NTB crossing in place of the MSI's; all software "
                                       "costs assumed (params [timing] irq_entry_ps, [vm]) for want of a published figure; "
                                       "the paper saw the VM 'only slightly' slower than the physical borrower")
def test_d5_vm_borrower_only_slightly_slower(d5):
    assert d5["VMRem - NatRem latency"]["devlend_added_ns"] < 2000


def test_d5_borrower_adds_at_least_the_expected_ntb_crossings(d5):
    assert d5["NatRem - NatLoc latency"]["devlend_added_ns"] >= 700


@pytest.mark.xfail(strict=True, reason="known gap: the borrower adds ~1.7 us with the calibrated NTB, switch and root "
                                       "latencies (2.0 us before; validation measurement d5-borrower-adds-a-little-under-1us, "
                                       "residual +87%): four NTB crossings per command, which is what Linux's driver does "
                                       "(drivers/nvme/host/pci.c): the SQ tail doorbell (posted MMIO), the controller's command "
                                       "fetch from host RAM (there and back), then data, completion entry and MSI-X (posted, in "
                                       "order); it reads no register per command and writes the CQ head doorbell off the path. "
                                       "'A little under 1 us' needs ~250 ns a crossing")
def test_d5_borrower_adds_a_little_under_a_microsecond(d5):
    assert 800 <= d5["NatRem - NatLoc latency"]["devlend_added_ns"] < 1000


# ---- D6: one training epoch (000 §7.5, Fig 21) ---------------------------------------------------
from devlend.experiments import d6 as d6_exp  # noqa: E402


@pytest.fixture(scope="module")
def d6():
    res = d6_exp.run(quick=True)
    return {r["scenario"]: r for r in res.rows}


def test_d6_runtimes_follow_the_data_paths_once_loading_overlaps_the_step(d6):
    # One machine, fit_generator's schedule: the reads and decoding hide behind the GPUs' step, so
    # each runtime is its step's data path. "NatRem-SW runs as fast as NatLoc" (within 2%: the same
    # P2P path, only the input copy crosses the NTB); the lender's IOMMU sends the input copy and the
    # exchange through its root (NatRem-IOMMU, VMLoc); VMRem adds the NTB to VMLoc's path.
    t = {k: v["epoch_s"] for k, v in d6.items()}
    assert abs(t["NatRem-SW"] / t["NatLoc"] - 1) < 0.02
    assert max(t["NatLoc"], t["NatRem-SW"]) < t["VMLoc"] < t["VMRem"]
    assert t["NatRem-SW"] < t["NatRem-IOMMU"]
    for name, r in d6.items():
        parts = sum(r[k] for k in ("nvme_s", "cpu_s", "input_s", "compute_s", "exchange_s"))
        assert r["epoch_s"] < parts, f"{name}: the parts overlap"


@pytest.mark.xfail(strict=True, reason="known gap: with fit_generator's enqueuer the guest's slower decoding hides behind "
                   "the GPU step, so the VMs pay only their data paths and VMLoc beats NatRem-IOMMU; 000 §7.5 attributes "
                   "its VMs' extra time to 'additional performance overhead caused by virtualization', which the model "
                   "does not place on the step's critical path")
def test_d6_runtimes_come_out_in_the_papers_order(d6):
    t = {k: v["epoch_s"] for k, v in d6.items()}
    assert max(t["NatLoc"], t["NatRem-SW"]) < t["NatRem-IOMMU"] < t["VMLoc"] < t["VMRem"]


def test_d6_the_parts_come_from_the_model_not_from_the_scenario_name(d6):
    # The IOMMU path slows the input copy (the GPU's reads cross the lender's root), a VM's fewer
    # cores slow the CPU part, and compute is the same everywhere.
    assert d6["NatRem-IOMMU"]["input_s"] > d6["NatRem-SW"]["input_s"]
    assert d6["VMLoc"]["cpu_s"] > d6["NatLoc"]["cpu_s"]
    assert len({v["compute_s"] for v in d6.values()}) == 1
