"""linux-ntb: the Linux kernel's own NTB stack in two UML guests joined by devlend's NTB, beside
devlend's own model of the same tool on the same topology. `xeon-ntb-two-host.yaml`: each
guest's NTB endpoint is an Intel Xeon gen1 NTB (the kernel's in-tree ntb_hw_intel drives it;
devlend_devices::ntb_xeon is that register face of the fabric's NTB), both guests and the NTB on
one engine (devlend-uml's several-guest controller).

- ntb_tool (debugfs): link up, a scratchpad value and a doorbell each way, a memory window written
  by one guest and read by the other; each checked, with the simulated time of the whole exchange.
- ntb_pingpong: both guests bounce a doorbell for a stretch of simulated time, each pinging back
  `delay_ms` after the peer's doorbell; the pongs each side counted, and so the time per pong,
  beside devlend's own ntb-pingpong (its threads on the same NTB through the PLX register face
  devlend_rdma::ntregs) with the same delay.
"""

from __future__ import annotations

import tempfile
from typing import Callable, Optional

from . import ExperimentResult, Stand, register, shipped

COLUMNS = ["tool", "side", "figure", "value", "difference"]


def tool_rows(topo, outdir: str) -> list[dict]:
    from ..linux import ntb
    from ..linux.guest import run_guests
    r = run_guests(topo, ntb.tool_commands(), devices=ntb.DEVICES, outdir=outdir, timeout_s=600)
    a, b = r["a"], r["b"]
    checks = [("link up (peer0/link)", a.outputs[0].strip() == "Y" and b.outputs[0].strip() == "Y"),
              ("scratchpad a -> b (0xcafe0001)", b.outputs[1].strip() == "0xcafe0001"),
              ("scratchpad b -> a (0xbeef0002)", a.outputs[1].strip() == "0xbeef0002"),
              ("doorbells both ways (db_event)", a.returncodes[1] == 0 and b.returncodes[1] == 0),
              (f"memory window a -> b ({ntb.MW_TEXT!r})", b.outputs[2].strip() == ntb.MW_TEXT)]
    rows = [{"tool": "ntb_tool", "side": "linux guests", "figure": f, "value": "ok" if ok else "FAILED", "difference": ""}
            for f, ok in checks]
    rows.append({"tool": "ntb_tool", "side": "linux guests", "figure": "simulated time of the run (ms)",
                 "value": round(a.device["simulated_ps"] / 1e9, 3), "difference": ""})
    rows.append({"tool": "ntb_tool", "side": "linux guests", "figure": "NTB registers touched and not modelled",
                 "value": len(a.device["unimplemented_registers"]), "difference": ""})
    return rows


def pingpong_rows(topo, outdir: str, delay_ms: int, run_s: float) -> list[dict]:
    from .. import _core
    from ..linux import ntb
    from ..linux.guest import run_guests
    r = run_guests(topo, ntb.pingpong_commands(delay_ms, run_s), devices=ntb.DEVICES, outdir=outdir, timeout_s=900)
    counts = {h: int(r[h].outputs[0].split()[-1]) for h in ntb.HOSTS}
    pongs = sum(counts.values())
    per_pong_us = run_s * 1e6 / pongs * 2 if pongs else float("nan")   # each side's chain: a pong every two legs
    rows = [{"tool": "ntb_pingpong", "side": "linux guests", "figure": f"pongs counted in {run_s:g} s, a / b",
             "value": f"{counts['a']} / {counts['b']}", "difference": ""},
            {"tool": "ntb_pingpong", "side": "linux guests", "figure": f"simulated time per pong, delay {delay_ms} ms (us)",
             "value": round(per_pong_us, 1), "difference": ""}]
    pings = 50
    _, _, rtt_ps, _, _ = _core.rdma_ntb_pingpong(topo.to_json(), "a", "b", pings, 1, delay_ms * 1_000_000)
    model_leg_us = rtt_ps / 2 / 1e6 - delay_ms * 1e3
    guest_leg_us = per_pong_us - delay_ms * 1e3
    rows.append({"tool": "ntb_pingpong", "side": "devlend model", "figure": f"one ping beyond the {delay_ms} ms delay (us)",
                 "value": round(model_leg_us, 2),
                 "difference": f"guest: {guest_leg_us:.1f} us a pong beyond the delay, model {model_leg_us:.2f} us: the guest's "
                               "leg adds its hrtimer's expiry and handling and each MMIO load's 1 us polling step (virt-pci), "
                               "none of them modelled by devlend's threads; its handler's CPU work costs no simulated time "
                               "(UML time travel has no CPU model) while the model charges the interrupt entry (not analysed further)"})
    return rows


@register("linux-ntb", "the kernel's own NTB tools (ntb_tool, ntb_pingpong) in two guests joined by devlend's NTB, beside devlend's model",
          stand=Stand("xeon-ntb-two-host.yaml", ("a", "b", "ntb-a", "ntb-b")))
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    topo = shipped("xeon-ntb-two-host.yaml")
    with tempfile.TemporaryDirectory(prefix="devlend-linux-ntb-") as d:
        rows = tool_rows(topo, f"{d}/tool")
        if progress:
            progress("ntb_tool")
        rows += pingpong_rows(topo, f"{d}/pingpong", delay_ms=1, run_s=0.1 if quick else 0.5)
        if progress:
            progress("ntb_pingpong")
    notes = ["both guests run Linux 6.12's unmodified ntb_hw_intel, ntb_tool and ntb_pingpong on one engine: every "
             "register access, doorbell, MSI and window store crosses the modelled NTB and cable as a timed TLP",
             "devlend's own ntb-pingpong drives the same fabric NTB through its PLX register face (one model, two faces)",
             "not run here: ntb_perf and ntb_transport/ntb_netdev (see the README's known gaps)"]
    return ExperimentResult(name="linux-ntb", title="Linux's NTB tools in two guests over devlend's NTB, beside devlend's model",
                            source="Linux 6.12 drivers/ntb (ntb_hw_intel gen1, ntb_tool, ntb_pingpong) in UML guests; 003 §2.2",
                            columns=COLUMNS, rows=rows, notes=notes)
