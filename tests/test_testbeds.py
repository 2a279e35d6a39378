"""The issue's acceptance checks on the shipped testbeds: CPU writes through an NTB reach the
right GPU BAR, GPU DMA reaches the right page of the borrower's RAM through its IOMMU, unmapped
DMA faults without changing memory, and the chassis data paths have 000 §7.3's hop counts."""

import pytest

import devlend
from devlend.experiments import hops

from conftest import topo_path

MiB = 1 << 20


def test_borrower_cpu_write_reaches_the_lenders_gpu_bar(two_host):
    f = two_host
    r = f.route("borrower:cpu", "ntb-b.mw0+0x123450")
    assert r.delivered
    assert r.target == {"kind": "bar", "function": "gpu0", "bar": 1, "offset": 0x123450, "host": "lender"}
    # The hop after the NTB crossing is in the lender's domain at the GPU BAR's lender address.
    assert r.final.host == "lender" and r.final.addr == f.resolve("gpu0.bar1+0x123450")
    f.write("borrower:cpu", "ntb-b.mw0+0x123450", b"through the NTB")
    assert f.read("lender:cpu", "gpu0.bar1+0x123450", 15) == b"through the NTB"
    # LUT segments: the second 8 MiB segment of window 0 maps the second 8 MiB of BAR1.
    assert f.route("borrower:cpu", "ntb-b.mw0+0x800010").target["offset"] == 0x800010


def test_gpu_dma_reaches_the_right_page_of_borrower_ram_through_its_iommu(two_host):
    f = two_host
    r = f.route("gpu0", "ntb-l.mw1+0x5008")
    kinds = [h.kind for h in r.hops]
    assert kinds.count("ntb") == 1 and "iommu" in kinds
    iommu = next(h for h in r.hops if h.kind == "iommu")
    assert iommu.host == "borrower"
    assert r.target == {"kind": "ram", "host": "borrower", "addr": f.resolve("borrower.ram+0x40005008")}
    f.write("gpu0", "ntb-l.mw1+0x5008", b"\x01\x02\x03\x04")
    assert f.read("borrower:cpu", "borrower.ram+0x40005008", 4) == b"\x01\x02\x03\x04"
    # The requester ID seen by the borrower's IOMMU is the NTB's alias for the GPU's LUT entry.
    assert iommu.rid != f.bdf("gpu0")


def test_dma_to_unmapped_iova_is_an_iommu_fault_and_changes_no_memory(two_host):
    f = two_host
    before = f.memory_digest()
    with pytest.raises(devlend.DmaFault) as e:
        f.write("gpu0", "ntb-l.mw1+0x4000000", b"stray write")   # 64 MiB in: past the IOMMU mapping
    assert e.value.failure["kind"] == "iommu-fault" and e.value.failure["reason"] == "not-present"
    assert e.value.delivered == 0
    assert f.memory_digest() == before
    faults = f.iommu_faults("borrower")
    assert len(faults) == 1 and faults[0]["addr"] == 0x80000000 + 0x4000000 and faults[0]["write"]
    assert f.events()[-1]["kind"] == "iommu-fault"


def test_read_completion_returns_through_the_ntb_reverse_lut(two_host):
    f = two_host
    r = f.route("borrower:cpu", "ntb-b.mw0+0x40", write=False)
    assert r.delivered and r.completion is not None and r.completion.delivered
    assert r.completion.target == {"kind": "cpu", "host": "borrower"}
    assert r.completion.ntb_crossings == 1
    # Same links back, ID-routed; the completion also enters the borrower's root complex to reach
    # the CPU, where the request started inside it (entry into a root complex counts, origin does not).
    assert r.completion.hop_count == r.hop_count + 1


def test_lender_iommu_turns_the_dma_at_the_lenders_root():
    topo = devlend.load(topo_path("pxh830-two-host.yaml"))
    topo.hosts[1].iommu = True   # Rem-IOMMU (000 Fig 9)
    f = topo.build()
    f.iommu_domain_alloc("lender", "lend")
    f.iommu_attach("lender", "lend", "gpu0")
    f.iommu_map("lender", "lend", 0x1000_0000, "ntb-l.mw1", 4 * MiB)
    r = f.route("gpu0", 0x1000_0000 + 0x2000)
    assert [h.host for h in r.hops if h.kind == "root"] == ["lender", "borrower"]
    assert r.target["host"] == "borrower"
    sw = devlend.load(topo_path("pxh830-two-host.yaml")).build().route("gpu0", "ntb-l.mw1+0x2000")
    assert r.hop_count == sw.hop_count + 3   # up the switch's link, into the root, back down the same link
    # Without a lender mapping the same DMA now faults in the lender's IOMMU.
    with pytest.raises(devlend.DmaFault) as e:
        f.write("gpu0", "ntb-l.mw1+0x2000", b"x")
    assert e.value.failure["host"] == "lender"


def test_expansion_chassis_hop_counts_match_000_section_7_3():
    paths = hops.data_paths()
    vmloc = paths["VMLoc-RAM"]
    natrem = paths["NatRem-RAM-IOMMU"]
    assert sum(r.hop_count for r in vmloc) == 7
    assert sum(r.hop_count for r in natrem) == 21
    assert sum(r.roots for r in natrem) == 3
    assert sum(r.ntb_crossings for r in natrem) == 2
    assert hops._ext_link_traversals(*natrem) == 4
    # Peer-to-peer: the data path is the same locally and remotely (000 §7.3, Fig 17).
    assert paths["VMLoc-P2P"][0].hop_count == paths["NatRem-P2P-IOMMU"][0].hop_count


def test_hops_experiment_table_matches_paper_where_it_states_values():
    res = hops.run(quick=True)
    for row in res.rows:
        assert row["delivered"]
        for k in ("hops", "roots", "ntb", "ext_link"):
            if row[f"paper_{k}"] is not None:
                assert row[f"devlend_{k}"] == row[f"paper_{k}"], (row["scenario"], k)


def test_three_host_peer_to_peer_cases(three_host):
    f = three_host
    for g in ("gpu0", "gpu1", "gpu2", "gpu3"):
        f.set_bus_master(g, True)
    # Loc-P2P-SW: two GPUs behind one switch, IOMMU off: straight across the switch.
    r = f.route("gpu0", "gpu1.bar1+0x100")
    assert r.delivered and r.roots == 0 and r.hop_count == 2
    # Loc-P2P-Root: behind different root ports; the Xeon profile forwards peer-to-peer through the root.
    r = f.route("gpu0", "gpu2.bar1")
    assert r.delivered and r.roots == 1
    # 2L-P2P-SW: gpu2 in lender-a writes gpu3 in lender-b through the lender-a <-> lender-b NTB,
    # without crossing a root (both sit behind the switch that holds their host's NTBs).
    f.mw_set_trans("ntb-c-a", 0, "gpu3.bar1", 256 * MiB)
    f.rid_lut_add("ntb-a-c", "gpu2")
    r = f.route("gpu2", "ntb-a-c.mw0+0x40")
    assert r.target == {"kind": "bar", "function": "gpu3", "bar": 1, "offset": 0x40, "host": "lender-b"}
    assert r.ntb_crossings == 1 and r.roots == 0
    # gpu0 reaches the same NTB only through lender-a's root.
    f.rid_lut_add("ntb-a-c", "gpu0")
    assert f.route("gpu0", "ntb-a-c.mw0+0x40").roots == 1


def test_generic_profile_refuses_peer_to_peer_through_the_root():
    topo = devlend.load(topo_path("three-host-cluster.yaml"))
    topo.hosts[1].cpu = "generic-x86"
    f = topo.build()
    f.set_bus_master("gpu0", True)
    r = f.route("gpu0", "gpu2.bar1")
    assert not r.delivered and r.failure["kind"] == "unsupported-request"
    assert "peer-to-peer through the root" in r.failure["message"]


def test_rdma_testbed_cpu_store_lands_in_the_peer_buffer():
    f = devlend.load(topo_path("pex8749-rdma.yaml")).build()
    f.write("host-a:cpu", "nt-virtual.mw0+0x100", b"rdma")
    assert f.read("host-b:cpu", "host-b.ram+0x10000100", 4) == b"rdma"
    with pytest.raises(devlend.FabricError):      # the expression checks the window's bounds
        f.write("host-a:cpu", "nt-virtual.mw0+0x100000", b"x")
    with pytest.raises(devlend.DmaFault) as e:    # the raw address past the 1 MiB BAR decodes nowhere
        f.write("host-a:cpu", f.resolve("nt-virtual.mw0") + 0x100000, b"x")
    assert e.value.failure["kind"] == "unsupported-request"
    # Clearing the peer's translation makes the same store an unmapped-window fault.
    f.mw_clear_trans("nt-link", 0)
    with pytest.raises(devlend.DmaFault) as e:
        f.write("host-a:cpu", "nt-virtual.mw0+0x100", b"x")
    assert e.value.failure["kind"] == "ntb-unmapped"
