"""The Linux-named programming interfaces: NTB (windows, LUT, doorbells, scratchpads, messages),
IOMMU (domains, attach, map/unmap, fault log) and PCI config space (BAR sizing, command register,
MSI-X capability)."""

import pytest

import devlend

MiB = 1 << 20


def test_ntb_window_queries_follow_linux_semantics(two_host):
    f = two_host
    assert f.peer_mw_count("ntb-b") == 2 and f.mw_count("ntb-l") == 2
    addr, size = f.peer_mw_get_addr("ntb-b", 0)
    assert size == 512 * MiB and addr == f.resolve("ntb-b.mw0")
    assert f.mw_get_align("ntb-l", 0) == (4096, 4096, 512 * MiB)
    with pytest.raises(devlend.FabricError, match="exceeds memory window"):
        f.mw_set_trans("ntb-l", 1, 0x1000_0000, 1024 * MiB)
    with pytest.raises(devlend.FabricError, match="not aligned"):
        f.mw_set_trans("ntb-l", 1, 0x1000_0800, MiB)
    with pytest.raises(devlend.FabricError, match="no memory window 5"):
        f.mw_set_trans("ntb-l", 5, 0, MiB)


def test_lut_segments_map_independently(two_host):
    f = two_host
    f.mw_clear_trans("ntb-l", 0)
    assert not f.route("borrower:cpu", "ntb-b.mw0").delivered
    f.lut_set_trans("ntb-l", 0, 3, "lender.ram+0x200000")   # segment 3 (8 MiB each) -> lender RAM
    r = f.route("borrower:cpu", "ntb-b.mw0+0x1800010")
    assert r.target == {"kind": "ram", "host": "lender", "addr": 0x200010}
    r = f.route("borrower:cpu", "ntb-b.mw0+0x10")
    assert r.failure["kind"] == "ntb-unmapped" and r.failure["window"] == 0
    with pytest.raises(devlend.FabricError, match="segment 64 out of range"):
        f.lut_set_trans("ntb-l", 0, 64, 0)
    with pytest.raises(devlend.FabricError, match="has no LUT segments"):
        f.lut_set_trans("ntb-l", 1, 0, 0)


def test_requester_id_lut_miss_is_rejected_and_recorded(two_host):
    f = two_host
    topo = f.topology
    fresh = topo.model_copy(deep=True)
    fresh.setup = [op for op in fresh.setup if op.op != "ntb_rid_lut_add"]
    g = fresh.build()
    before = g.memory_digest()
    with pytest.raises(devlend.DmaFault) as e:
        g.write("gpu0", "ntb-l.mw1+0x2000", b"x")
    assert e.value.failure["kind"] == "rid-lut-miss" and e.value.failure["requester"] == g.bdf("gpu0")
    assert g.memory_digest() == before
    idx = g.rid_lut_add("ntb-l", "gpu0")
    assert idx == 1   # entry 0 holds the root complex, as NTB drivers program at probe
    g.write("gpu0", "ntb-l.mw1+0x2000", b"x")


def test_doorbells_scratchpads_and_messages(two_host):
    f = two_host
    assert f.peer_db_set("ntb-b", 0b101) is True
    assert f.db_read("ntb-l") == 0b101 and f.db_irqs("ntb-l") == 1
    f.db_set_mask("ntb-l", 0b1)
    assert f.peer_db_set("ntb-b", 0b1) is False     # masked: no interrupt
    f.db_clear("ntb-l", 0b100)
    assert f.db_read("ntb-l") == 0b1
    with pytest.raises(devlend.FabricError, match="outside the 16 valid bits"):
        f.peer_db_set("ntb-b", 1 << 20)
    f.peer_spad_write("ntb-b", 3, 0xDEADBEEF)
    assert f.spad_read("ntb-l", 3) == 0xDEADBEEF and f.peer_spad_read("ntb-b", 3) == 0xDEADBEEF
    with pytest.raises(devlend.FabricError, match="scratchpad 8 out of range"):
        f.spad_write("ntb-l", 8, 1)
    f.peer_msg_write("ntb-l", 0, 42)
    with pytest.raises(devlend.FabricError, match="still holds an unread message"):
        f.peer_msg_write("ntb-l", 0, 43)
    assert f.msg_read("ntb-b", 0) == 42 and f.msg_read("ntb-b", 0) is None


def test_iommu_domains_attach_map_unmap_and_faults(two_host):
    f = two_host
    r = f.route("gpu0", "ntb-l.mw1")
    assert r.delivered
    assert f.iommu_unmap("borrower", "lending", 0x8000_0000, 64 * MiB) == 64 * MiB
    r = f.route("gpu0", "ntb-l.mw1")
    assert r.failure["kind"] == "iommu-fault" and r.failure["reason"] == "not-present"
    f.iommu_map("borrower", "lending", 0x8000_0000, "borrower.ram", 2 * MiB, write=False)
    assert f.route("gpu0", "ntb-l.mw1", write=False).delivered
    r = f.route("gpu0", "ntb-l.mw1", write=True)
    assert r.failure["reason"] == "write-denied"
    f.iommu_detach("borrower", "ntb-b")
    assert f.route("gpu0", "ntb-l.mw1", write=False).failure["reason"] == "no-context"
    with pytest.raises(devlend.FabricError, match="IOMMU disabled"):
        f.iommu_domain_alloc("lender", "x")
    with pytest.raises(devlend.FabricError, match="already mapped|existing 2 MiB mapping"):
        f.iommu_map("borrower", "lending", 0x8000_0000, 0, 4096)
    # route() itself never records; only data movement does.
    assert f.iommu_faults("borrower") == []


def test_config_space_bar_sizing_command_register_and_msix(two_host):
    f = two_host
    vendor = f.config_read("gpu0", 0x00, 2)
    assert vendor == 0x10DE
    assert f.config_read("gpu0", 0x0A, 2) == 0x0300   # VGA controller class
    bar1 = f.resolve("gpu0.bar1")
    assert f.config_read("gpu0", 0x14) == (bar1 & 0xFFFFFFF0) | 0b1100   # 64-bit prefetchable
    assert f.config_read("gpu0", 0x18) == bar1 >> 32
    f.config_write("gpu0", 0x14, 0xFFFFFFFF)           # sizing: write all ones, read the mask
    assert f.config_read("gpu0", 0x14) & 0xFFFFFFF0 == (~(256 * MiB - 1)) & 0xFFFFFFF0
    f.config_write("gpu0", 0x14, bar1 & 0xFFFFFFFF)    # restore
    assert f.config_read("gpu0", 0x14) & 0xFFFFFFF0 == bar1 & 0xFFFFFFF0
    cap = f.config_read("gpu0", 0x34, 1)
    assert cap == 0x40 and f.config_read("gpu0", cap, 1) == 0x11   # MSI-X capability ID
    cmd = f.config_read("gpu0", 0x04, 2)
    assert cmd & 0b110 == 0b110                      # memory space and bus master (setup enabled it)
    f.config_write("gpu0", 0x04, cmd & ~0b100, 2)    # clear Bus Master Enable
    with pytest.raises(devlend.DmaFault) as e:
        f.write("gpu0", "ntb-l.mw1", b"x")
    assert e.value.failure["kind"] == "bus-master-disabled"
    f.config_write("gpu0", 0x04, cmd & ~0b010, 2)    # clear Memory Space Enable: BARs stop decoding
    assert f.route("lender:cpu", "gpu0.bar1").failure["kind"] == "unsupported-request"
    with pytest.raises(devlend.FabricError, match="naturally aligned"):
        f.config_read("gpu0", 0x3, 2)


def test_bar_relocation_by_config_write_moves_the_route(two_host):
    f = two_host
    bar0 = f.resolve("gpu0.bar0")
    f.write("lender:cpu", bar0 + 0x10, b"reg")
    assert f.route("lender:cpu", bar0 + 0x10).target["function"] == "gpu0"
    # Move BAR0 outside every bridge window: the old address no longer decodes, and the new one is
    # not forwarded by the switch (its window was not reprogrammed), so both are unsupported.
    new = 0xE000_0000
    f.config_write("gpu0", 0x10, new)
    assert f.config_read("gpu0", 0x10) & 0xFFFFFFF0 == new
    assert f.route("lender:cpu", bar0 + 0x10).failure["kind"] == "unsupported-request"
    assert f.route("lender:cpu", new + 0x10).failure["kind"] == "unsupported-request"
    f.config_write("gpu0", 0x10, bar0)
    assert f.read("lender:cpu", bar0 + 0x10, 3) == b"reg"


def test_msi_writes_are_recorded_as_interrupts(two_host):
    f = two_host
    # A local MSI: lender's GPU writes its MSI-X message to the lender's interrupt range.
    f.write("gpu0", 0xFEE0_1000, (0x41).to_bytes(4, "little"))
    ev = f.events()[-1]
    assert ev == {"kind": "msi", "host": "lender", "addr": 0xFEE0_1000, "data": 0x41}


def test_oversized_reads_and_dma_are_refused(two_host):
    with pytest.raises(devlend.FabricError, match="at most"):
        two_host.read("lender:cpu", "lender.ram", 1 << 40)
    with pytest.raises(devlend.FabricError, match="expected 1 byte"):
        two_host.dma("gpu0", "ntb-l.mw1", 0)
    with pytest.raises(devlend.FabricError, match="expected 1 byte"):
        two_host.dma("gpu0", "ntb-l.mw1", 1 << 50)
