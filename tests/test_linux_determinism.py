"""A real-Linux guest's simulated run depends only on its inputs (the topology, its commands,
mem=), not on the host: two boots of the same guest do the very same thing, message for message,
in the device server's trace (DEVLEND_UML_TRACE, crates/devlend-uml/src/trace.rs). Its own module
so that pytest-xdist can run it beside the other guests."""

import devlend
from conftest import topo_path
from devlend.linux.guest import run

# mem= as run() passes it by default (256M), in 4 KiB pages.
MEM_PAGES = 256 * 1024 // 4


def _boot(tmp_path, monkeypatch, name: str):
    out, trace = tmp_path / name, tmp_path / f"{name}-trace"
    trace.mkdir()
    monkeypatch.setenv("DEVLEND_UML_TRACE", str(trace))
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", ["nvme id-ctrl /dev/nvme0 >/dev/null"], device="nvme0",
            outdir=out, timeout_s=300)
    assert r.returncodes == [0], r.outputs
    return r, (trace / "nvme0.sock.trace").read_text()


def test_two_boots_of_a_guest_do_the_same_thing_on_the_engines_clock(tmp_path, monkeypatch):
    # With the host's address-space randomization on, UML added the random gap between its binary
    # and its heap to mem= (the "exec-shield gap", 74-956 MiB here): each boot had another memory
    # size, so the driver gave the drive other DMA addresses (the admin queues' first) and a
    # run's simulated times could differ (BENCHMARKS.md, s24-nondet). The guest now runs with
    # randomization off (guest.NO_RANDOMIZE).
    a, trace_a = _boot(tmp_path, monkeypatch, "a")
    b, trace_b = _boot(tmp_path, monkeypatch, "b")
    # The admin queue's address is in the trace (NVMe ASQ, BAR 0 offset 28h), with every message
    # and every turn of the engine: the same, line for line.
    assert "addr=0x28 " in trace_a and len(trace_a.splitlines()) > 100
    parted = next(((i, x, y) for i, (x, y) in enumerate(zip(trace_a.splitlines(), trace_b.splitlines()), 1) if x != y), None)
    assert parted is None and len(trace_a) == len(trace_b), f"the traces part at line {parted}"
    assert (a.outputs, a.device["guest_ns"]) == (b.outputs, b.device["guest_ns"])
    # The memory is mem='s, no gap added.
    console = a.console.read_text()
    assert "exec-shield gap" not in console
    assert f"Total pages: {MEM_PAGES}\n" in console
