"""D4: GPU-to-GPU bandwidth and ping-pong latency in a VM on the expansion-chassis testbed
(000 §7.3, Table 2, Figs 15-18).

Every VM scenario runs devlend-drivers' unmodified GPU driver in a guest kernel (devlend-vm) on a
thread of one machine, the GPUs as actors on the same clock (as D1-D3 natively):
- VMLoc: the VM runs on the lender; both GPUs are passed through with VFIO (a per-VM IOMMU
  domain on the lender, guest-physical = IOVA).
- VMRem: the VM runs on the remote host; both GPUs come through Device Lending's mediated path:
  borrowed when the guest enables bus mastering, the guest's memory probed by pinning from the
  low and high addresses, the lender's IOMMU mapping guest-physical addresses onto the NTB
  window and the remote host's IOMMU mapping the window onto the scattered host pages (000 §5).
- NatRem-*-IOMMU: the remote host borrows both GPUs bare-metal, the lender's IOMMU on (D2's way).

A transfer is peer-to-peer (gpu0's copy engine writes gpu1's BAR 1 at the address the guest sees,
which the lender's IOMMU maps, 000 §6 last paragraph) or bounced through a buffer in the guest's
(or the native host's) RAM, staged in chunks as D2 does (`gpu_run::staged`). The hop counts come from routing the RAM-bounce path as the
hypervisor programmed it. Assumptions (devlend-vm's fixtures): a 256 MiB guest and the K40c's default
256 MiB BAR 1, since the shipped profile's 16 GiB BAR 1 does not fit the assumed 512 MiB NTB windows.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from .. import _core
from . import ExperimentResult, register
from ._gpu import device_call, topology_json

KiB, MiB = 1 << 10, 1 << 20
SIZES = [KiB << i for i in range(0, 16, 1)]          # 1 KiB .. 32 MiB
QUICK_SIZES = [64 * KiB, 4 * MiB]
SCENARIOS = ["VMLoc-P2P", "VMRem-P2P", "NatRem-P2P-IOMMU", "VMLoc-RAM", "VMRem-RAM", "NatRem-RAM-IOMMU"]
PAPER_HOPS = {"VMLoc-RAM": 7, "VMRem-RAM": 21, "NatRem-RAM-IOMMU": 21}


def _base() -> str:
    return topology_json("expansion-chassis-vm.yaml")


def transfer_ps(name: str, size: int) -> int:
    where, kind = name.split("-")[:2]
    peer = kind == "P2P"
    if where == "NatRem":
        return device_call(_core.gpu_to_gpu, _base(), "remote", "gpu0", "gpu1", peer, size)[0]
    return _core.vm_gpu_to_gpu(_base(), where, peer, size)[0]


def round_trip_ns(name: str) -> float:
    where, kind = name.split("-")[:2]
    peer = kind == "P2P"
    if where == "NatRem":
        return device_call(_core.gpu_pingpong, _base(), "remote", "gpu0", "gpu1", peer) / 1000
    return _core.vm_pingpong(_base(), where, peer) / 1000


def ram_hops(name: str) -> Optional[int]:
    where = name.split("-")[0]
    return _core.vm_ram_bounce_path(_base(), where)[0] if name.startswith("VM") and "RAM" in name else None


@register("d4", "GPU-to-GPU bandwidth and ping-pong in a VM, expansion chassis (000 §7.3, Figs 16-18)", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    sizes = QUICK_SIZES if quick else SIZES
    rows = []
    for name in SCENARIOS:
        lat = round(round_trip_ns(name), 1)
        hops = ram_hops(name)
        for size in sizes:
            ps = transfer_ps(name, size)
            rows.append({"scenario": name, "size": size, "GBps": round(size / (ps * 1e-12) / 1e9, 3),
                         "pingpong_ns": lat, "hops": hops, "paper_hops": PAPER_HOPS.get(name)})
            if progress:
                progress(f"{name} {size // KiB} KiB")
    notes = ["paper: VMRem-P2P ~ VMLoc-P2P, the difference insignificant from about 4 MB; NatRem-P2P-IOMMU comparable "
             "(measured slightly lower, unexplained)",
             "paper: RAM bounce 7 hops (VMLoc-RAM) vs 21 (VMRem-RAM, NatRem-RAM-IOMMU) with a drastic bandwidth drop; "
             "VMRem-RAM ~ NatRem-RAM-IOMMU",
             "paper: P2P ping-pong remote ~ local (remote measured slightly better); RAM latency grows with the hops",
             "hops: the RAM-bounce route as the hypervisor programmed it (NatRem: see `devlend experiment hops`)"]
    return ExperimentResult(name="d4", title="GPU-to-GPU in a VM: bandwidth (GB/s) and ping-pong (ns)",
                            source="000 §7.3, Table 2, Figs 15-18",
                            columns=["scenario", "size", "GBps", "pingpong_ns", "hops", "paper_hops"], rows=rows,
                            notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 16's layout (P2P above, RAM below) with Fig 18's bars beside; a scenario keeps its colour."""
    with Figure(path, nrows=2, ncols=2, size=(12, 7), dpi=110, title="devlend: GPUs passed through to a VM (cf. 000 Figs 16, 18)") as f:
        for i, kind in enumerate(("P2P", "RAM")):
            ax, bars = f.axes[2 * i], f.axes[2 * i + 1]
            for name in [s for s in SCENARIOS if f"-{kind}" in s]:
                f.line(ax, *points(res.rows, "size", "GBps", scenario=name), name, "-o", markersize=3)
            axes(ax, xlabel="transfer size (bytes)" if i == 1 else None, ylabel="bandwidth (GB/s)",
                 title=f"GPU-to-GPU, {kind}", logx=True, legend=7)
            lat = {r["scenario"]: r["pingpong_ns"] for r in res.rows if f"-{kind}" in r["scenario"]}
            f.bars(bars, list(lat), list(lat.values()))
            bars.tick_params(axis="x", labelsize=7)
            axes(bars, ylabel="round trip (ns)", grid=False)


@register("vmirq", "Interrupt latency of a device passed through to a VM: VFIO vs forwarded through the lender (000 §5, §8)", params=True)
def run_irq(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    """One interrupt of gpu0, raised by the device and taken by the guest's handler (devlend-vm's
    irq): VMLoc through vfio's eventfd, VMRem through the lender-side handler, a notification
    store through the NTB and the borrower's eventfd. Both kinds run on one idle machine as a chain
    of events on the hypervisor's threads (irq_clock): the device's MSI-X write or its Assert_INTx
    message, each a flow on the links to its root, then the same chain. The software steps
    are the assumed [vm] constants of params/hardware.toml."""
    rows = []
    for where in ("VMLoc", "VMRem"):
        for intx in (False, True):
            total, steps = _core.vm_irq_latency(_base(), where, intx)
            rows.append({"scenario": where, "interrupt": "INTx" if intx else "MSI-X", "latency_us": round(total / 1e6, 3),
                         "steps": "; ".join(f"{n} {t / 1e6:.3f}" for n, t in steps)})
            if progress:
                progress(f"{where} {'INTx' if intx else 'MSI-X'}")
    notes = ["paper: forwarding through the lender 'is not ideal, as the latency of triggering an interrupt is increased' "
             "(000 §5) and 'introduces additional latency' (§8); no figure is given",
             "software steps are assumed ([vm] in params/hardware.toml); the message and the NTB notification are timed by the engine "
             "on one machine, where an interrupt can queue behind another (INTx: the line stays masked until the guest's EOI, as vfio does)",
             "bare-metal borrowers cannot take INTx (refused, 000 §4 footnote 2); a VM gets it through the lender-side handler"]
    return ExperimentResult(name="vmirq", title="Device-to-guest interrupt latency (us)", source="000 §5, §8",
                            columns=["scenario", "interrupt", "latency_us", "steps"], rows=rows, notes=notes, plot=None)
