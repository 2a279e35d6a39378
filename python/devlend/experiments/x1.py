"""X1: kernel-level RDMA write round trip and throughput, basic split vs bypass vs native
(004 §4.2, Figs 7-9).

Server A writes to server B with RDMA; B polls its memory for the data and writes back the same
size; the round trip is averaged (Fig 7). For throughput A issues RDMA writes to B (Fig 8); the
kernel test's window is not stated in 004 (§4.2 says only "back to back"): the table shows one
write outstanding (post, wait for its completion, post the next) and, beside it, 100 outstanding
(perftest's default tx depth). ``window_arithmetic`` shows why 004's 770 MB/s at 128 KB fits
neither: with one outstanding, the post's request (to the doorbell) and the CQE's poll response
(back to the guest) each cross the channel (Fig 9: at least 10 us) and cannot overlap the data, which
bounds the rate below 770; with two or more the crossings overlap the wire and the link limits.
Every verb of the basic driver is a request on the inter-domain device channel (Fig 9: at least
10 us one way, the ``[xenib] channel_one_way_ps`` parameter) executed by the back-end with the
native driver; polls get CQE buffering. Bypass and the device domain ring the doorbell and poll
the CQ directly. Nothing is typed in: the times are the channel crossings, the back-end's work,
the PCI-X transactions of the MHXL-CF128-T (a half-duplex bus of the engine), the 4X link and
the HCAs' processing, all on the engine's one clock.
"""

from __future__ import annotations

from typing import Callable, Optional

from ._plot import Figure, axes, points
from . import ExperimentResult, register
from ._xenib import CONFIGS, KiB, LABELS, MiB, bw_mbps, channel_one_way_us, rtt_us, size_label, size_of

PAPER = {"basic_peak": "770 MB/s at 128 KB", "others_peak": "~830 MB/s", "channel": ">= 10 us one way"}
LAT_SIZES = [1, 16, 256, 4 * KiB, 16 * KiB, 64 * KiB]
BW_SIZES = [1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB, 128 * KiB, 256 * KiB, 1 * MiB]
QUICK_LAT = [1, 4 * KiB]
QUICK_BW = [4 * KiB, 128 * KiB, 256 * KiB]


def measure(quick: bool = False) -> dict:
    lat_sizes, bw_sizes = (QUICK_LAT, QUICK_BW) if quick else (LAT_SIZES, BW_SIZES)
    iters = 10 if quick else 20
    out = {"lat": {c: rtt_us(c, "rdma", lat_sizes, iters) for c in CONFIGS},
           "bw": {c: bw_mbps(c, "rdma", bw_sizes, iters, depth=1) for c in CONFIGS},
           "bw100": {c: bw_mbps(c, "rdma", bw_sizes, iters, depth=100) for c in ("gen2-native", "xenib-basic")},
           "channel": channel_one_way_us(), "lat_sizes": lat_sizes, "bw_sizes": bw_sizes}
    return out


def window_arithmetic(m: dict, size: int = 128 * KiB) -> dict:
    """004's 770 MB/s at ``size`` against the model's window bounds, from the measured values:
    the time per message 770 MB/s means, the wire time per message when the link limits (the basic
    driver with 100 outstanding), the channel's one-way latency, and the most one outstanding write
    can reach when only the two crossings it cannot overlap are added (zero back-end work)."""
    link = m["bw100"]["xenib-basic"][size]
    wire_us = size / link
    ch = m["channel"]
    return {"paper_us": round(size / 770, 1), "wire_us": round(wire_us, 1), "slack_us": round(size / 770 - wire_us, 1),
            "channel_us": ch, "one_outstanding_max": round(size / (wire_us + 2 * ch), 1), "link_bound": link}


@register("x1", "Xen-IB kernel-level RDMA write: basic split vs bypass vs native (004 §4.2, Figs 7-9)")
def run(quick: bool = False, progress: Optional[Callable[[str], None]] = None) -> ExperimentResult:
    m = measure(quick)
    rows = []
    for s in sorted(set(m["lat_sizes"]) | set(m["bw_sizes"])):
        r = {"size": size_label(s)}
        for c in CONFIGS:
            r[f"rtt_us {LABELS[c]}"] = m["lat"][c].get(s, "")
            r[f"MBps {LABELS[c]}"] = m["bw"][c].get(s, "")
        r["MBps basic, 100 outstanding"] = m["bw100"]["xenib-basic"].get(s, "")
        r["MBps native, 100 outstanding"] = m["bw100"]["gen2-native"].get(s, "")
        rows.append(r)
    columns = ["size"] + [f"rtt_us {LABELS[c]}" for c in CONFIGS] + [f"MBps {LABELS[c]}" for c in CONFIGS] + ["MBps basic, 100 outstanding", "MBps native, 100 outstanding"]
    rows.append({"size": "paper", f"rtt_us {LABELS['xenib-basic']}": "much higher", f"MBps {LABELS['xenib-basic']}": PAPER["basic_peak"],
                 f"MBps {LABELS['gen2-native']}": PAPER["others_peak"], f"MBps {LABELS['xenib-bypass']}": PAPER["others_peak"],
                 f"MBps {LABELS['gen2-idd']}": PAPER["others_peak"]})
    if progress:
        progress("measured")
    k128 = 128 * KiB
    notes = [f"device channel one way: {m['channel']} us (004 Fig 9: at least 10 us; the stated parameter plus the request body)"]
    if k128 in m["bw"]["xenib-basic"]:
        notes.append(f"basic at 128 KB: {m['bw']['xenib-basic'][k128]} MB/s one outstanding, {m['bw100']['xenib-basic'][k128]} MB/s with 100 "
                     f"(004: 770); native {m['bw']['gen2-native'][k128]} / {m['bw100']['gen2-native'][k128]} MB/s (004: ~830)")
        a = window_arithmetic(m, k128)
        notes.append(f"004's 770 MB/s at 128 KB is {a['paper_us']} us a message; the wire alone takes {a['wire_us']} us (the link-bound "
                     f"{a['link_bound']} MB/s with 100 outstanding), leaving {a['slack_us']} us for the basic driver. One outstanding "
                     f"must add at least two channel crossings ({a['channel_us']} us each: the post's request before the doorbell, "
                     f"the CQE's poll response after it) that cannot overlap the data, so it cannot exceed {a['one_outstanding_max']} "
                     f"MB/s even with no back-end work; two or more outstanding overlap the crossings with the wire and reach the "
                     f"link. 770 fits no window; 004 states none and names no further per-post mechanism, so nothing is tuned")
    big = max(m["bw_sizes"])
    notes.append(f"at {size_label(big)}: " + ", ".join(f"{LABELS[c]} {m['bw'][c][big]}" for c in CONFIGS) + " MB/s")
    notes.append("bypass, device domain and native Linux are identical here: their post and poll paths are the same "
                 "memory writes, doorbell and DMA (004: 'perform almost the same')")
    return ExperimentResult(name="x1", title="Xen-IB kernel-level RDMA write, round trip (us) and throughput (MB/s)",
                            source="004 §4.2, Figs 7-9", columns=columns, rows=rows, notes=notes, plot=plot)


def plot(res: ExperimentResult, path: str) -> None:
    """Figs 7 and 8 side by side: round trip and throughput against message size."""
    rows = [dict(r, bytes=size_of(r["size"])) for r in res.rows if r["size"] != "paper"]
    with Figure(path, ncols=2, size=(11, 4), dpi=100) as f:
        ax1, ax2 = f.axes
        for c in CONFIGS:
            f.line(ax1, *points(rows, "bytes", f"rtt_us {LABELS[c]}"), LABELS[c])
            f.line(ax2, *points(rows, "bytes", f"MBps {LABELS[c]}"), LABELS[c])
        ax2.axhline(830, color="grey", ls=":", lw=1, label="paper ~830")
        ax2.axhline(770, color="tab:green", ls=":", lw=1, label="paper basic 770")
        for ax, yl, t in ((ax1, "round-trip time (us)", "Fig 7"), (ax2, "throughput (MB/s)", "Fig 8")):
            axes(ax, xlabel="message size (bytes)", ylabel=yl, title=f"devlend (cf. 004 {t})", logx=True, legend=7)
