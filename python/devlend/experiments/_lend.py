"""The programming Device Lending does (000 §4, §6), written against the fabric's Linux-named
interfaces, for experiments that need remote devices before the host-software layer drives them.

Conventions: the borrower's IOMMU maps each DMA buffer into an IOVA window that the lender's NTB
window leads to; the lender adds the device's requester ID to its NTB's LUT; when the lender's
IOMMU is on, the DMA address handed to the driver is a lender IOVA that the lender's IOMMU maps onto
the NTB window (so TLPs turn at the lender's root, 000 §7.1); the borrower reaches device BARs
through LUT segments of its own window 0.
"""

from __future__ import annotations

from .. import load
from ..fabric import Fabric

MiB = 1 << 20
SEGMENT = 8 * MiB          # PXH830 window-0 LUT segment size (params/hardware.toml)


class Lending:
    """Book-keeping for one fabric: IOVA and segment allocation, domains already created."""

    def __init__(self, f: Fabric):
        self.f = f
        self.domains: set[tuple[str, str]] = set()
        self.next_iova: dict[str, int] = {}
        self.next_segment: dict[str, int] = {}

    def _domain(self, host: str, name: str, device: str) -> None:
        if (host, name) not in self.domains:
            self.f.iommu_domain_alloc(host, name)
            self.domains.add((host, name))
        self.f.iommu_attach(host, name, device)

    def _iova(self, host: str, size: int) -> int:
        base = self.next_iova.get(host, 0x1000_0000)
        self.next_iova[host] = base + max(size, 2 * MiB)
        return base

    def dma_window(self, borrower: str, b_ntb: str, lender: str, l_ntb: str, device: str, buf: int, size: int,
                   lender_iommu: bool) -> int:
        """Make `size` bytes of the borrower's RAM at `buf` reachable by `device` in `lender`; return
        the DMA address the device must use."""
        f = self.f
        win = 0x8000_0000
        if (borrower, f"dl-{b_ntb}") not in self.domains:
            f.mw_set_trans(b_ntb, 1, win, 512 * MiB)
        self._domain(borrower, f"dl-{b_ntb}", b_ntb)
        off = self.next_iova.get(b_ntb, 0)
        self.next_iova[b_ntb] = off + max(size, 2 * MiB)
        f.iommu_map(borrower, f"dl-{b_ntb}", win + off, buf, size)
        f.rid_lut_add(l_ntb, device)
        addr = f.resolve(f"{l_ntb}.mw1") + off
        return self.lender_map(lender, device, addr, size) if lender_iommu else addr

    def lender_map(self, lender: str, device: str, target: int, size: int) -> int:
        """With the lender's IOMMU on: map `target` for `device` at a fresh IOVA and return it."""
        iova = self._iova(lender, size)
        self._domain(lender, f"dev-{device}", device)
        self.f.iommu_map(lender, f"dev-{device}", iova, target, size)
        return iova

    def bar_for_borrower(self, b_ntb: str, lender: str, l_ntb: str, device: str, bar: int, size: int,
                         lender_iommu: bool) -> int:
        """Map `size` bytes of a device BAR into the borrower's window 0; return the borrower's address."""
        f = self.f
        base = f.resolve(f"{device}.bar{bar}")
        seg0 = self.next_segment.get(l_ntb, 0)
        nseg = max(1, size // SEGMENT)
        for i in range(nseg):
            f.lut_set_trans(l_ntb, 0, seg0 + i, base + i * SEGMENT)
        self.next_segment[l_ntb] = seg0 + nseg
        if lender_iommu:   # the NTB's forwarded TLPs turn at the lender's root too (ACS)
            self._domain(lender, f"ntb-{l_ntb}", l_ntb)
            f.iommu_map(lender, f"ntb-{l_ntb}", base, base, nseg * SEGMENT)
        return f.resolve(f"{b_ntb}.mw0") + seg0 * SEGMENT


def ram_to_ram_ns(topology: str, near_ntb: str, far_ntb: str, far_ram: str, cpu: str) -> float:
    """One-way latency of a CPU store through `near_ntb`'s window 1 into the far host's RAM at
    `far_ram` (the quantity 000 §7.2 and §7.4 call RAM-to-RAM latency), steady state."""
    from . import topology_path
    f = load(topology_path(topology)).build()
    f.mw_set_trans(far_ntb, 1, far_ram, 1 << 20)
    return f.dma(cpu, f"{near_ntb}.mw1", 4, warm=True).time_ps / 1000
