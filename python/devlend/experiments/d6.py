"""D6: one training epoch on two GPUs and an NVMe drive, local, borrowed and in VMs (000 §7.5,
Figs 20-21).

000 §7.5 trains VGG19 on Kvasir with Keras on two K40c GPUs, images on an Optane P4800X, in five
set-ups on the expansion-chassis testbed: NatLoc (the lender runs it), NatRem-SW and NatRem-IOMMU
(the remote host borrows both GPUs, the lender's IOMMU off or on), VMLoc (a VM on the lender, VFIO)
and VMRem (a VM on the remote host, the mediated path). The epoch is a workload model; each data
movement in it runs on the fabric model with the unmodified drivers:

  per batch = NVMe reads of the batch's image files (the NVMe driver, one 128 KiB request at a time)
            + CPU decoding of the batch (on the host's cores; a VM has fewer and pays an overhead)
            + the host-to-device copy of the input batch (the GPU driver's cudaMemcpy)
            + one sub-batch of compute on a GPU (the GPUs run in parallel)
            + the gradient exchange, one GPU's gradients to the other peer-to-peer (both
              directions run at once on full-duplex links)

Constants: params `[workload.d6]` (dataset, model, GPU and CPU costs, cores per set-up, the VM
overhead), each with its source or marked assumed. The order of the five runtimes is the result.
The VM set-ups read the drive with the NVMe driver in the guest (VFIO for VMLoc, the mediated path
for VMRem, as D5's VM row); the native ones read a local drive, as 000 §7.5 did. Each movement
runs alone on one machine (its drivers as threads, its devices as actors); the epoch adds them,
so no overlap between them is modelled yet.
"""

from __future__ import annotations

import math
import random
from typing import Callable, Optional

from ._plot import Figure, axes, points
from .. import _core
from . import ExperimentResult, hardware_params, register
from ._gpu import topology_json

TOPOLOGY = "expansion-chassis-vm.yaml"
SCENARIOS = ["NatLoc", "NatRem-SW", "NatRem-IOMMU", "VMLoc", "VMRem"]
PAPER_ORDER = "NatRem-SW ~ NatLoc < NatRem-IOMMU < VMLoc < VMRem"


def params() -> dict:
    return hardware_params()["workload"]["d6"]


def _json(scenario: str) -> str:
    # Bare-metal set-ups run with the lender's IOMMU off unless the scenario says IOMMU; VFIO and
    # the mediated path need it on.
    on = scenario in ("NatRem-IOMMU", "VMLoc", "VMRem")
    return topology_json(TOPOLOGY, (("lender", on),))


def _nvme_request_ps(scenario: str, p: dict, reads: int) -> int:
    blocks = p["nvme_request_bytes"] // 512
    rng = random.Random(6)
    lbas = [rng.randrange(0, (1 << 24) - blocks) for _ in range(reads)]
    if scenario.startswith("VM"):
        runner = "lender" if scenario == "VMLoc" else "remote"
        return _core.vm_nvme_read(_json(scenario), runner, "nvme0", lbas, blocks)[0]
    # 000 §7.5: "For the native remote tests ... the disk was instead locally installed".
    return _core.nvme_read(_json(scenario), "lender", "nvme0", lbas, blocks)[0]


def _htod_ps(scenario: str, size: int) -> int:
    if scenario.startswith("VM"):
        return _core.vm_gpu_memcpy_htod(_json(scenario), scenario, size)[0]
    runner = "lender" if scenario == "NatLoc" else "remote"
    return _core.gpu_memcpy(_json(scenario), runner, "gpu0", False, size)[0]


def _exchange_ps(scenario: str, size: int) -> int:
    if scenario.startswith("VM"):
        return _core.vm_gpu_to_gpu(_json(scenario), scenario, True, size)[0]
    runner = "lender" if scenario == "NatLoc" else "remote"
    return _core.gpu_to_gpu(_json(scenario), runner, "gpu0", "gpu1", True, size)[0]


def step_seconds(scenario: str, p: dict, reads: int = 3) -> dict[str, float]:
    """The time of one training step (one batch) in `scenario`, by part, in seconds."""
    batch = p["batch_size"]
    files = batch * math.ceil(p["image_file_bytes"] / p["nvme_request_bytes"])
    vm = scenario.startswith("VM")
    cores = p["vm_cores"] if vm else p["native_cores"]
    cpu = batch * p["cpu_ps_per_image"] / cores * (1 + (p["vm_cpu_overhead"] if vm else 0))
    sub = batch // p["gpus"]
    compute = sub * p["train_flop_per_image"] / (p["gpu_peak_flops"] * p["gpu_efficiency"])
    return {
        "nvme_s": files * _nvme_request_ps(scenario, p, reads) * 1e-12,
        "cpu_s": cpu * 1e-12,
        "input_s": _htod_ps(scenario, batch * p["input_bytes_per_image"]) * 1e-12,
        "compute_s": compute,
        "exchange_s": _exchange_ps(scenario, p["trainable_params"] * p["bytes_per_param"]) * 1e-12,
    }


@register("d6", "One training epoch on two GPUs and an NVMe drive, local, borrowed and in VMs (000 §7.5, Fig 21)", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    p = params()
    steps = math.ceil(p["images"] / p["batch_size"])
    rows = []
    for name in SCENARIOS:
        parts = step_seconds(name, p, reads=2 if quick else 10)
        epoch = steps * sum(parts.values())
        rows.append({"scenario": name, "epoch_s": round(epoch, 2),
                     **{k: round(steps * v, 2) for k, v in parts.items()}})
        if progress:
            progress(name)
    order = " < ".join(r["scenario"] for r in sorted(rows, key=lambda r: r["epoch_s"]))
    by = {r["scenario"]: r["epoch_s"] for r in rows}
    notes = [f"paper (runtime order): {PAPER_ORDER}",
             f"devlend (runtime order): {order}",
             f"NatRem-SW vs NatLoc: {100 * (by['NatRem-SW'] / by['NatLoc'] - 1):+.1f}%",
             f"{steps} steps of {p['batch_size']} images; the parts are epoch totals (s); constants: params [workload.d6]",
             "the VM set-ups read the drive with the NVMe driver in the guest; the native ones from a local drive (000 §7.5)"]
    return ExperimentResult(name="d6", title="One training epoch (s), VGG19 on Kvasir, two K40c GPUs",
                            source="000 §7.5, Figs 20-21",
                            columns=["scenario", "epoch_s", "nvme_s", "cpu_s", "input_s", "compute_s", "exchange_s"],
                            rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 21's layout: one bar per set-up, stacked by part."""
    parts = ["compute_s", "cpu_s", "exchange_s", "input_s", "nvme_s"]
    with Figure(path, size=(8, 4.5), dpi=110) as f:
        ax = f.axes[0]
        names = [r["scenario"] for r in res.rows]
        bottom = [0.0] * len(names)
        for part in parts:
            vals = [r[part] for r in res.rows]
            ax.bar(names, vals, bottom=bottom, label=part.removesuffix("_s"), color=f.colour(part))
            bottom = [b + v for b, v in zip(bottom, vals)]
        axes(ax, ylabel="epoch runtime (s)", title="devlend: one training epoch by set-up (cf. 000 Fig 21)", grid=False)
        ax.grid(True, axis="y", alpha=0.3)
