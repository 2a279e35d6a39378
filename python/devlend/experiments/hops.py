"""Data-path hop counts on the expansion-chassis VM testbed (000 §7.3, Fig 17, Table 2).

The paper states: the RAM-bounce path of a local VM (VMLoc-RAM) has 7 hops; the remote native
borrower with the lender's IOMMU on (NatRem-RAM-IOMMU) and the remote VM (VMRem-RAM) have 21,
"traversing three CPU roots, the NTB twice and the external transparent link four times".

devlend programs the fabric the way each scenario's software would (VFIO for the local VM, Device
Lending with a lender-side IOMMU for the remote borrower), routes the first GPU's DMA write into
the bounce buffer and the second GPU's DMA read of it, and counts hops on the data path (write
route + read completion route) under its one rule (a link traversal, an entry into a root
complex, or an NTB crossing; see devlend-fabric's route module). The direct peer-to-peer writes
are routed too; the paper gives no number for them in the text that survives.

A remote VM (VMRem-*) maps guest-physical addresses in the lender's IOMMU onto the same window
the native borrower uses, so at the fabric level its route is NatRem-*-IOMMU's (000 §5, Fig 7);
the mediated-device path that sets it up is the VM issue's work.
"""

from __future__ import annotations

from .. import load
from ..fabric import Fabric, Route
from . import ExperimentResult, register, topology_path

MiB = 1 << 20
EXT_LINK_PORTS = {("host-adapter", "d0"), ("chassis-sw", "up")}


def _fresh() -> Fabric:
    topo = load(topology_path("expansion-chassis-vm.yaml"))
    return topo.build()


def _ext_link_traversals(*routes: Route) -> int:
    return sum(1 for r in routes for h in r.hops if h.kind == "link" and (h.component, h.port) in EXT_LINK_PORTS)


def _vm_local(f: Fabric) -> tuple[int, int]:
    """VFIO pass-through on the lender: both GPUs in the VM's IOMMU domain, guest-physical = IOVA."""
    f.iommu_domain_alloc("lender", "vm")
    for g in ("gpu0", "gpu1"):
        f.iommu_attach("lender", "vm", g)
        f.set_bus_master(g, True)
    guest_buf, guest_bar = 0x1000_0000, 0x2_0000_0000
    f.iommu_map("lender", "vm", guest_buf, "lender.ram+0x40000000", 4 * MiB)       # guest RAM on scattered host pages
    f.iommu_map("lender", "vm", guest_bar, "gpu1.bar1", 4 * MiB)                   # gpu1's BAR at its guest-physical address
    return guest_buf, guest_bar


def _native_remote(f: Fabric) -> tuple[int, int]:
    """Device Lending to the remote host with the lender's IOMMU on (000 §4, §6)."""
    win = 0x8000_0000  # IOVA in the remote host's domain where the lender's window lands
    f.mw_set_trans("ntb-remote", 1, win, 64 * MiB)
    f.iommu_domain_alloc("remote", "lending")
    f.iommu_attach("remote", "lending", "ntb-remote")
    f.iommu_map("remote", "lending", win, "remote.ram+0x40000000", 4 * MiB)        # the borrower's bounce buffer
    f.iommu_domain_alloc("lender", "lend")
    for g in ("gpu0", "gpu1"):
        f.iommu_attach("lender", "lend", g)
        f.set_bus_master(g, True)
        f.rid_lut_add("ntb-chassis", g)
    dma_buf, dma_bar = 0x1000_0000, 0x2_0000_0000
    f.iommu_map("lender", "lend", dma_buf, "ntb-chassis.mw1", 4 * MiB)              # DMA address -> NTB window
    f.iommu_map("lender", "lend", dma_bar, "gpu1.bar1", 4 * MiB)                    # peer-to-peer target, same lender
    return dma_buf, dma_bar


def _row(name: str, routes: list[Route], paper_hops, paper_roots, paper_ntb, paper_ext) -> dict:
    ok = all(r.delivered for r in routes)
    hops = sum(r.hop_count for r in routes) if ok else None
    return {"scenario": name, "devlend_hops": hops, "paper_hops": paper_hops,
            "devlend_roots": sum(r.roots for r in routes), "paper_roots": paper_roots,
            "devlend_ntb": sum(r.ntb_crossings for r in routes), "paper_ntb": paper_ntb,
            "devlend_ext_link": _ext_link_traversals(*routes), "paper_ext_link": paper_ext,
            "delivered": ok}


def data_paths() -> dict[str, list[Route]]:
    """The routes of each scenario: [write] for P2P, [write, read completion] for RAM bounce."""
    out: dict[str, list[Route]] = {}
    for name, setup in (("VMLoc", _vm_local), ("NatRem", _native_remote)):
        f = _fresh()
        buf, bar = setup(f)
        w = f.route("gpu0", buf + 0x1000, write=True)
        r = f.route("gpu1", buf + 0x1000, write=False)
        out[f"{name}-RAM" if name == "VMLoc" else f"{name}-RAM-IOMMU"] = [w, r.completion] if r.completion else [w, r]
        out[f"{name}-P2P" if name == "VMLoc" else f"{name}-P2P-IOMMU"] = [f.route("gpu0", bar + 0x1000, write=True)]
    return out


@register("hops", "Data-path hop counts on the expansion-chassis VM testbed (000 §7.3, Fig 17)")
def run(quick: bool = False, progress=None) -> ExperimentResult:
    paths = data_paths()
    paper = {"VMLoc-RAM": (7, None, None, None), "NatRem-RAM-IOMMU": (21, 3, 2, 4),
             "VMLoc-P2P": (None, None, None, None), "NatRem-P2P-IOMMU": (None, None, None, None)}
    rows = [_row(k, paths[k], *paper[k]) for k in ("VMLoc-P2P", "NatRem-P2P-IOMMU", "VMLoc-RAM", "NatRem-RAM-IOMMU")]
    return ExperimentResult(
        name="hops", title="Data-path hop counts, expansion-chassis VM testbed", source="000 §7.3, Fig 17, Table 2",
        columns=["scenario", "devlend_hops", "paper_hops", "devlend_roots", "paper_roots", "devlend_ntb", "paper_ntb",
                 "devlend_ext_link", "paper_ext_link", "delivered"],
        rows=rows,
        notes=["hop = a link traversal, an entry into a root complex, or an NTB crossing",
               "RAM bounce: write route of gpu0 + completion route of gpu1's read; P2P: gpu0's write route",
               "VMRem-* take NatRem-*-IOMMU's data path (lender IOMMU maps guest-physical addresses onto the same NTB window)"])
