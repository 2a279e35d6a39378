"""D6: one training epoch on two GPUs and an NVMe drive, local, borrowed and in VMs (000 §7.5,
Figs 20-21).

000 §7.5 trains VGG19 on Kvasir with Keras on two K40c GPUs, images on an Optane P4800X, in five
set-ups on the expansion-chassis testbed: NatLoc (the lender runs it), NatRem-SW and NatRem-IOMMU
(the remote host borrows both GPUs, the lender's IOMMU off or on), VMLoc (a VM on the lender, VFIO)
and VMRem (a VM on the remote host, the mediated path).

The epoch is one run on one machine (devlend_experiments::vm::epoch), with the schedule of Keras
2.2.4's fit_generator (Keras documentation: the generator "is run in parallel to the model ... on
CPU in parallel to training your model on GPU"; GeneratorEnqueuer with its defaults workers=1,
max_queue_size=10): one enqueuer thread reads each batch's image files with the NVMe driver (one
128 KiB request at a time), decodes them (a timed CPU cost, on the one worker thread) and queues the
batch, at most `max_queue_size` ahead; per step, each GPU's TensorFlow work copies its sub-batch in
with the GPU driver (cudaMemcpy), computes (a timed device cost), and sends its gradients to the
other GPU peer-to-peer (both directions at once). The VM set-ups run every driver in the guest
(VFIO for VMLoc, the mediated path for VMRem, interrupts on the VM path on the clock); the native
ones read a drive local to the reading host (000 §7.5 installed the disk locally for NatRem: the
model's drive is the lender's, read by the lender's kernel).

The first `STEPS` steps run on the machine; the epoch is the first step's end plus the remaining
steps at the last step's interval (the queue is full by then, so the interval is the steady
state). The parts are each one's busy time over the epoch: they overlap, so they do not add up to
the epoch. Constants: params `[workload.d6]`, each with its source or marked assumed. The order of
the five runtimes is the result.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from ._plot import Figure, axes
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


STEPS = 4
QUICK_STEPS = 2


def spec(scenario: str, p: dict, steps: int) -> tuple:
    """The machine's workload for `scenario`: steps, reads per batch, blocks per read, decode ps,
    input bytes per GPU, compute ps per GPU, gradient bytes, queue size (d6_epoch's arguments)."""
    batch, sub = p["batch_size"], p["batch_size"] // p["gpus"]
    reads = batch * math.ceil(p["image_file_bytes"] / p["nvme_request_bytes"])
    vm = scenario.startswith("VM")
    decode = batch * p["cpu_ps_per_image"] * (1 + (p["vm_cpu_overhead"] if vm else 0))
    compute = sub * p["train_flop_per_image"] / (p["gpu_peak_flops"] * p["gpu_efficiency"]) * 1e12
    return (steps, reads, p["nvme_request_bytes"] // 512, round(decode), sub * p["input_bytes_per_image"], round(compute),
            p["trainable_params"] * p["bytes_per_param"], p["max_queue_size"])


def epoch_seconds(scenario: str, p: dict, steps: int = STEPS) -> dict[str, float]:
    """The epoch in `scenario` from `steps` steps on one machine, and each part's busy time, in seconds."""
    ends, busy = _core.d6_epoch(_json(scenario), scenario, *spec(scenario, p, steps))
    total = math.ceil(p["images"] / p["batch_size"])
    interval = (ends[-1] - ends[-2]) if len(ends) > 1 else ends[0]
    epoch = ends[0] + (total - 1) * interval
    scale = total / steps * 1e-12
    return {"epoch_s": epoch * 1e-12, **{k: b * scale for k, b in zip(PARTS, busy)}}


PARTS = ["nvme_s", "cpu_s", "input_s", "compute_s", "exchange_s"]


@register("d6", "One training epoch on two GPUs and an NVMe drive, local, borrowed and in VMs (000 §7.5, Fig 21)", params=True)
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    p = params()
    steps = math.ceil(p["images"] / p["batch_size"])
    on_machine = QUICK_STEPS if quick else STEPS
    rows = []
    for name in SCENARIOS:
        parts = epoch_seconds(name, p, on_machine)
        rows.append({"scenario": name, **{k: round(v, 2) for k, v in parts.items()}})
        if progress:
            progress(name)
    order = " < ".join(r["scenario"] for r in sorted(rows, key=lambda r: r["epoch_s"]))
    by = {r["scenario"]: r["epoch_s"] for r in rows}
    notes = [f"paper (runtime order): {PAPER_ORDER}",
             f"devlend (runtime order): {order}",
             f"NatRem-SW vs NatLoc: {100 * (by['NatRem-SW'] / by['NatLoc'] - 1):+.1f}%",
             f"{steps} steps of {p['batch_size']} images, the first {on_machine} on one machine, the rest at the last step's "
             "interval; the parts are busy times over the epoch (s) and overlap; constants: params [workload.d6]",
             "schedule: Keras fit_generator (workers=1, max_queue_size=10): the next batches' NVMe reads and decoding overlap "
             "the GPUs' step (input copy, compute, peer-to-peer gradient exchange, one after the other)",
             "the VM set-ups read the drive with the NVMe driver in the guest; the native ones from a drive local to the "
             "reading host (000 §7.5)"]
    return ExperimentResult(name="d6", title="One training epoch (s), VGG19 on Kvasir, two K40c GPUs",
                            source="000 §7.5, Figs 20-21; Keras fit_generator documentation",
                            columns=["scenario", "epoch_s", *PARTS], rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Fig 21's layout: one bar per set-up (the epoch), each part's busy time beside it (they overlap)."""
    with Figure(path, size=(9, 4.5), dpi=110) as f:
        ax = f.axes[0]
        names = [r["scenario"] for r in res.rows]
        width = 1 / (len(PARTS) + 2)
        for i, part in enumerate(["epoch_s", *PARTS]):
            xs = [j + (i - len(PARTS) / 2) * width for j in range(len(names))]
            ax.bar(xs, [r[part] for r in res.rows], width=width, label=part.removesuffix("_s"), color=f.colour(part))
        ax.set_xticks(range(len(names)), names)
        axes(ax, ylabel="seconds per epoch", title="devlend: one training epoch by set-up, parts overlapping (cf. 000 Fig 21)", grid=False)
        ax.grid(True, axis="y", alpha=0.3)
