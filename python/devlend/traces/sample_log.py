"""Generate the sample QEMU intel-iommu trace log shipped beside this file (``sample_qemu.log``).

A few tenants (NICs passed through to nested VMs, 002 §IV-A, Fig 7) receiving packets, printed the
way QEMU's ``log`` trace backend prints hw/i386/trace-events (``PID@SEC.USEC:event args``), plus
HyperSIO's ``vtd_slpte_fetch`` page-table reads on each IOTLB miss. The gIOVA pattern is 002
§IV-D's, scaled down so the file stays a few hundred lines: a 4 KiB ring page read by every
packet, 2 MiB data pages each used for a run of packets in ring order (1500 in 002; ``RUN``
here), a notification write to a 4 KiB page, and a few 4 KiB set-up pages right after NIC
initialisation. Tenants run at once, so their lines interleave (seeded, deterministic).

    python -m devlend.traces.sample_log [-o FILE] [--tenants N] [--packets N] [--seed N]
"""

from __future__ import annotations

import argparse
import random

RING, DATA, SETUP, NOTIFY = 0x34800000, 0xBBE00000, 0xF0000000, 0xF0400000
DATA_PAGES, RUN, SETUP_PAGES = 4, 12, 5
PID = 4242


def lines(tenants: int = 3, packets: int = 40, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    clock = [1_600_000_000_000_000]
    out: list[str] = []

    def emit(text: str) -> None:
        clock[0] += rng.randint(1, 40)
        s, us = divmod(clock[0], 1_000_000)
        out.append(f"{PID}@{s}.{us:06d}:{text}")

    cached: set[tuple[int, int]] = set()

    def translate(t: int, iova: int, big: bool) -> None:
        sid, dom = 0x100 + 8 * t, t + 1
        page = iova & ~((1 << 21) - 1 if big else 0xFFF)
        hpa = 0x100000000 + t * 0x10000000 + (page & 0xFFFFFFF)
        slpte = hpa | 0x3 | (0x80 if big else 0)
        if (t, page) in cached:
            emit(f"vtd_iotlb_page_hit IOTLB page hit sid 0x{sid:x} iova 0x{iova:x} slpte 0x{slpte:x} domain 0x{dom:x}")
            return
        table = 0x7F0000 + t * 0x10000
        for level in range(4, 1 if big else 0, -1):
            nxt = slpte if level == (2 if big else 1) else table + (5 - level) * 0x1000 | 0x3
            emit(f"vtd_slpte_fetch slpte fetch high 0x{0x100 + dom:x} low 0x{table | 1:x} iova 0x{iova:x} "
                 f"level 0x{level:x} addr 0x{table + (4 - level) * 0x1000:x} slpte 0x{nxt:x}")
        emit(f"vtd_iotlb_page_update IOTLB page update sid 0x{sid:x} iova 0x{iova:x} slpte 0x{slpte:x} domain 0x{dom:x}")
        cached.add((t, page))

    for t in range(tenants):
        sid = 0x100 + 8 * t
        emit(f"vtd_iotlb_cc_update IOTLB context update bus 0x{sid >> 8:x} devfn 0x{sid & 0xFF:x} "
             f"high 0x{0x101 + t:x} low 0x{0x7F0001 + t * 0x10000:x} gen 0 -> gen 1")
    emit("pci_cfg_write e1000 00:03.0 @0x4 <- 0x107")
    # set-up: each NIC's driver touches its set-up pages once or twice, three at a time
    for t in range(tenants):
        for k in range(2 * SETUP_PAGES - 1):
            translate(t, SETUP + (k % SETUP_PAGES) * 0x1000 + 0x40 * k, False)
    sent = [0] * tenants
    start = [rng.randrange(DATA_PAGES) for _ in range(tenants)]
    while min(sent) < packets:
        t = rng.choice([i for i in range(tenants) if sent[i] < packets])
        k = sent[t]
        data = (start[t] + k // RUN) % DATA_PAGES
        if k and k % RUN == 0:
            old = DATA + ((data - 1) % DATA_PAGES) * 0x200000
            emit(f"vtd_inv_desc_iotlb_pages iotlb invalidate pages domain 0x{t + 1:x} addr 0x{old:x} mask 0x9")
            cached.discard((t, old))
        translate(t, RING + 0x10 * (k % 256), False)
        translate(t, DATA + data * 0x200000 + 0x800 * (k % RUN), True)
        translate(t, NOTIFY + (k // RUN % 2) * 0x1000 + 0x8 * (k % 64), False)
        sent[t] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--tenants", type=int, default=3)
    ap.add_argument("--packets", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    text = "\n".join(lines(a.tenants, a.packets, a.seed)) + "\n"
    if a.output == "-":
        print(text, end="")
    else:
        with open(a.output, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
