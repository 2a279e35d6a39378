"""Issue 17's fabric audit, from Python: each case blocked or refused, recorded, memory unchanged."""

import pytest

import devlend

MiB = 1 << 20


def test_a_dma_past_its_iommu_mapping_stops_at_the_first_unmapped_page(two_host):
    f = two_host
    # The borrower's IOMMU maps 64 MiB behind the lender's window 1: start at its last 4 KiB page.
    start = f.resolve("ntb-l.mw1") + 64 * MiB - 4096
    with pytest.raises(devlend.DmaFault) as e:
        f.dma("gpu0", start, 16 * MiB)
    assert e.value.failure["kind"] == "iommu-fault" and e.value.failure["reason"] == "not-present"
    assert e.value.failure["transfer_addr"] == start + 4096
    assert e.value.delivered == 4096
    assert "transfer stopped at" in str(e.value)
    assert f.dma("gpu0", start + 4096 - 16 * MiB, 16 * MiB).time_ps > 0, "the mapped 16 MiB below it still time"


def test_a_dma_across_the_end_of_an_ntb_window_stops_at_the_end(two_host):
    f = two_host
    base, size = f.peer_mw_get_addr("ntb-b", 0)
    f.mw_set_trans("ntb-l", 0, "lender.ram+0x40000000", size)      # the whole 512 MiB window into RAM
    assert f.dma("borrower:cpu", base, size).time_ps > 0
    with pytest.raises(devlend.DmaFault) as e:
        f.dma("borrower:cpu", base, 2 * size)                     # 1 GiB: on into window 1, unset
    assert e.value.failure["transfer_addr"] == base + size
    assert e.value.delivered == size
    assert e.value.failure["kind"] == "ntb-unmapped" and e.value.failure["ntb"] == "ntb-b"


def test_a_dma_past_a_translation_shorter_than_its_window_stops_where_it_ends(two_host):
    f = two_host                                                  # ntb-b window 0 -> 256 MiB of gpu0 BAR1
    with pytest.raises(devlend.DmaFault) as e:
        f.dma("borrower:cpu", "ntb-b.mw0", 1 << 30, write=False)
    assert e.value.failure["kind"] == "ntb-unmapped" and e.value.failure["offset"] == 256 * MiB
    assert e.value.delivered == 256 * MiB


def test_unmapping_part_of_a_2m_page_is_refused_and_the_dma_still_lands(two_host):
    f = two_host
    iova = 0x9000_0000                                            # 256 MiB into the lender's window 1
    f.iommu_map("borrower", "lending", iova, "borrower.ram+0x80000000", 2 * MiB)
    with pytest.raises(devlend.FabricError, match="only part of the 2 MiB page"):
        f.iommu_unmap("borrower", "lending", iova + MiB, 2 * MiB)
    window = f.resolve("ntb-l.mw1") - 0x8000_0000                  # lender window 1 lands at IOVA 2 GiB
    assert f.write("gpu0", window + iova, b"low") == 3
    assert f.write("gpu0", window + iova + MiB, b"high") == 4
    assert f.iommu_unmap("borrower", "lending", iova, 2 * MiB) == 2 * MiB
    with pytest.raises(devlend.DmaFault):
        f.write("gpu0", window + iova + MiB, b"gone")


def test_a_bar_moved_over_ram_by_a_config_write_is_refused(two_host):
    f = two_host
    before = f.config_read("gpu0", 0x10)
    with pytest.raises(devlend.FabricError, match="would overlap RAM of host lender"):
        f.config_write("gpu0", 0x10, 0x0100_0000)                 # BAR 0 (32-bit) to 16 MiB
    assert f.config_read("gpu0", 0x10) == before
    assert f.route("lender:cpu", 0x0100_0000).target["kind"] == "ram"


def test_events_are_counted_by_kind_and_the_ring_is_bounded(two_host):
    f = two_host
    counts = f.event_counts()
    assert counts["total"] == 0 and counts["cap"] >= 1024
    with pytest.raises(devlend.DmaFault):
        f.write("gpu0", "ntb-l.mw1+0x4000000", bytes(3 * 4096))    # three pages past the mapping
    counts = f.event_counts()
    assert counts["total"] == 3 and counts["by_kind"] == {"iommu-fault": 3} and counts["kept"] == 3
    assert len(f.events()) == counts["kept"] <= counts["cap"]
