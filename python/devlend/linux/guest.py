"""A User-Mode Linux guest as a host of a devlend topology: the kernel from ``devlend linux
build``, the host's root mounted read-only through hostfs (the guest cannot change a host file),
tmpfs where it must write, a small init that runs the user's commands and powers off, the
console captured to ``console.log`` beside the results, and devlend's device server (Rust,
``devlend-uml``) answering the guest's PCI accesses on one socket per device.

Time: a guest with a device runs on devlend's engine (UML's ``time-travel=ext:``, the device
server its controller, ``crates/devlend-uml/src/clock.rs``). Timed: every MMIO store (started on
the engine at the guest's time, landing when the fabric delivers it), every MMIO load (the guest
sees the answer when the load completes on the engine, at the next microsecond of virt-pci's
polling loop), every DMA of the drive and every interrupt (delivered at the simulated time its
MSI lands). Not timed: the guest's CPU work, which costs no simulated time (UML's time travel
has no CPU model; a time read costs UML's fixed 256 ns), and config space accesses (relayed by
software in Device Lending, not TLPs the model times). So what fio reports inside the guest is
simulated time, and two runs of one job report the same latencies: a run depends only on the
topology, the commands and ``mem=`` (the guest starts with the host's address-space randomization
off, ``NO_RANDOMIZE``; ``DEVLEND_UML_TRACE`` traces what the device server handles, to compare two
runs). A guest without a device has no model to take its time from and runs on the wall clock.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import select
import shlex
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import _core
from ..errors import DevlendError
from .pin import guest_cpu, pin_this_thread, pinned

#: arch/um/drivers/Kconfig UML_PCI_OVER_VIRTIO_DEVICE_ID, as uml.config sets it.
VIRTIO_DEVICE_ID = 1234
#: UML's PCI (arch/um/drivers/virt-pci.c MAX_DEVICES): at most 8 single-function devices.
UML_MAX_DEVICES = 8
#: Linux reboot(2) magic for RB_POWER_OFF: init powers the guest off this way (no init system).
RB_POWER_OFF = 0x4321FEDC


class LinuxGuestError(DevlendError):
    """A guest that could not run: ``kind`` is "timeout" (the wall-clock guard ended it),
    "crash" (it died without powering off), "device" (the device server failed) or "topology"
    (beyond UML's PCI). ``console_tail`` holds the console's last lines."""

    def __init__(self, message: str, kind: str, console_tail: str = ""):
        self.kind, self.console_tail = kind, console_tail
        super().__init__(message + (f"\n--- console, last lines ---\n{console_tail}" if console_tail else ""))


@dataclass
class GuestResult:
    outputs: list[str]
    returncodes: list[int]
    console: Path
    device: dict = field(default_factory=dict)
    wall_s: float = 0.0
    #: The console's lines from the kernel's block and NVMe layers (a fault's reaction: timeouts,
    #: aborts, resets, removal, I/O errors).
    driver_lines: list[str] = field(default_factory=list)


#: Console lines that tell what the kernel's NVMe driver and block layer did.
DRIVER_LINE = re.compile(r"nvme|blk_update_request|I/O error|Buffer I/O|pci 0000|virtio_uml|virt-pci")


def driver_lines(console: Path) -> list[str]:
    try:
        return [ln for ln in console.read_text(errors="replace").splitlines() if DRIVER_LINE.search(ln)]
    except OSError:
        return []


INIT = """#!/bin/sh
# devlend's guest init: mount what the commands need, run them, power off. The host's files stay
# read-only; /run (and /dev/shm) are the guest's tmpfs; only the results folder is written through.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/run TMPDIR=/run/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm; mount -t tmpfs tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /run
mkdir -p /run/tmp /run/devlend-out
mount -t hostfs hostfs -o {out} /run/devlend-out
{commands}
echo devlend-guest-done > /dev/console
exec python3 -c 'import ctypes, os; os.sync(); ctypes.CDLL(None).reboot({poweroff})'
"""


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def _wait(p: subprocess.Popen, servers: list[threading.Thread], timeout_s: float) -> None:
    """Wait for the guest; a device server that ended first (an error: the guest can no longer
    run without its controller) ends the guest at once instead of at the timeout."""
    deadline = time.monotonic() + timeout_s
    with _exit_fd(p) as exited:
        while p.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(p.args, timeout_s)
            if servers and not any(t.is_alive() for t in servers):
                try:
                    p.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()
                return
            # Woken at the guest's exit (its pidfd), else every 50 ms for the checks above.
            if exited:
                select.select(exited, [], [], 0.05)
            else:
                time.sleep(0.05)


@contextlib.contextmanager
def _exit_fd(p: subprocess.Popen):
    """[a pidfd that becomes readable when `p` exits], or [] where pidfds are not available."""
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):
        yield []
        return
    try:
        yield [fd]
    finally:
        os.close(fd)


def _prepare(out: Path, commands: list[str]) -> tuple[Path, Path]:
    """The guest's folder: its init (running ``commands``) and where its console goes."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"( {c} ) > /run/devlend-out/cmd-{i}.out 2>&1; echo $? > /run/devlend-out/cmd-{i}.rc" for i, c in enumerate(commands)]
    init = out / "init"
    init.write_text(INIT.format(out=shlex.quote(str(out)), commands="\n".join(lines), poweroff=RB_POWER_OFF))
    init.chmod(0o755)
    return init, out / "console.log"


#: The guest runs with the host's address-space randomization off (setarch's -R,
#: personality(ADDR_NO_RANDOMIZE)). UML sizes its physical memory from where the host put its
#: heap (arch/um/kernel/um_arch.c: the "exec-shield gap" between the binary's end and the first
#: brk is added to mem=), and the host randomizes that brk: with it on, each run's guest had
#: another memory size (256 MiB plus 74-956 MiB in BENCHMARKS.md's s24-nondet boots),
#: so other zone sizes and other DMA addresses, its devices saw other addresses and the kernel
#: could take other paths: a run's simulated times depended on the host's random numbers.
NO_RANDOMIZE = ["setarch", platform.machine(), "-R"]


def _argv(kernel: str, init: Path, mem: str, umid: str) -> list[str]:
    return NO_RANDOMIZE + [kernel, f"mem={mem}", "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro", f"init={init}",
            "con=null", "con0=null,fd:1", f"umid={umid}",
            # virt-pci polls a read's answer for max_delay_us loops of udelay(1) (40000 by
            # default); a loaded machine can take longer to answer, so allow 10 s.
            "virt_pci.max_delay_us=10000000"]


def _collect(out: Path, n: int) -> tuple[list[str], list[int]]:
    """Each command's output and exit status (-1: it never ran to its end)."""
    outs, rcs = [], []
    for i in range(n):
        outs.append((out / f"cmd-{i}.out").read_text(errors="replace") if (out / f"cmd-{i}.out").exists() else "")
        rc = (out / f"cmd-{i}.rc").read_text().strip() if (out / f"cmd-{i}.rc").exists() else "-1"
        rcs.append(int(rc or -1))
    return outs, rcs


def _faults(faults) -> list[tuple[int, str, str]]:
    """(kind, target, at_ns) as the server takes them: (at_ns, kind, target), at_ns checked."""
    out = []
    for kind, target, at in faults:
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at < 2**62:
            raise LinuxGuestError(f"fault {kind} at {target}: at_ns={at!r}, expected a whole number of simulated ns", "topology")
        out.append((at, str(kind), str(target)))
    return out


def run(topology, host: str, commands: list[str], *, device: str | None = None, outdir: str | os.PathLike | None = None,
        kernel: str | None = None, mem: str = "256M", timeout_s: float = 120.0, blocks: int = 1 << 21,
        faults: list[tuple[str, str, int]] = ()) -> GuestResult:
    """Boot a guest for ``host`` of ``topology`` (a devlend Topology), with drive ``device``
    (borrowed when it sits in another host) on its PCI, run ``commands`` in order, power off.
    Each command's output and exit status come back; the console is kept in ``outdir``.
    ``faults``: (kind, target, at_ns) injected on the engine at that simulated time (the kinds
    of ``devlend.pool.FAULT_KINDS``, e.g. ("surprise-removal", "nvme0", 200_000_000) or
    ("link-down", "ntb-b", ...), or ("revoke", DEVICE, ...): the lender takes the borrowed device
    back); the kernel's reaction is in ``driver_lines``, a hot-unplug's time in
    ``device["unplugged_ns"]``."""
    fault_list = _faults(faults)
    if fault_list and not device:
        raise LinuxGuestError("faults need a device: without one the guest runs on the wall clock", "topology")
    from .build import build
    devices = [device] if device else []
    if len(devices) > UML_MAX_DEVICES:
        raise LinuxGuestError(f"{len(devices)} devices: UML's PCI takes at most {UML_MAX_DEVICES}", "topology")
    kernel = kernel or str(build())
    out = Path(outdir or tempfile.mkdtemp(prefix="devlend-guest-")).resolve()
    init, console = _prepare(out, commands)
    topo_json = topology.to_json()
    cpu = guest_cpu()
    sockets, servers, results, errors = [], [], {}, {}
    time_sock = str(out / "time.sock")
    for d in devices:
        sock = str(out / f"{d}.sock")
        sockets.append(sock)

        def serve(d=d, sock=sock):
            try:
                pin_this_thread(cpu)
                results[d] = _core.uml_serve(topo_json, host, d, sock, time_sock, blocks, timeout_s, fault_list)
            except Exception as e:  # noqa: BLE001 - reported below with the console
                errors[d] = e
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        servers.append(t)
    for s in sockets:
        while not os.path.exists(s) and not errors:
            time.sleep(0.01)
    if errors:
        d, e = next(iter(errors.items()))
        raise LinuxGuestError(f"device server for {d}: {e}", "device")
    argv = _argv(kernel, init, mem, "devlend")
    argv += [f"virtio_uml.device={s}:{VIRTIO_DEVICE_ID}" for s in sockets]
    if devices:
        argv.append(f"time-travel=ext:{time_sock}")
    start = time.monotonic()
    with open(console, "wb") as con:
        with pinned(cpu):  # the guest and what it forks on the controller's CPU; this thread after it as before
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=con, stderr=subprocess.STDOUT, cwd=out,
                                 start_new_session=True, env=dict(os.environ, TMPDIR=str(out)))
        try:
            _wait(p, servers, timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            raise LinuxGuestError(f"the guest of {host} did not power off within {timeout_s:g} s (wall clock); console {console}",
                                  "timeout", _tail(console)) from None
        except BaseException:
            # Ctrl-C (KeyboardInterrupt) or any other exception: the guest runs
            # in a session of its own, so nothing else would stop it.
            os.killpg(p.pid, 9)
            p.wait()
            raise
    wall = time.monotonic() - start
    for t in servers:
        t.join(timeout=10)
    if errors:
        d, e = next(iter(errors.items()))
        raise LinuxGuestError(f"device server for {d}: {e}; console {console}", "device", _tail(console))
    if "devlend-guest-done" not in console.read_text(errors="replace"):
        raise LinuxGuestError(f"the guest of {host} ended (status {p.returncode}) without finishing its commands; console {console}",
                              "crash", _tail(console))
    outs, rcs = _collect(out, len(commands))
    return GuestResult(outs, rcs, console, results.get(device, {}) if device else {}, wall, driver_lines(console))


def _device_kind(topology, name: str) -> str:
    """How devlend-uml serves a device: an NTB adapter as an Intel Xeon gen1 NTB, a drive as NVMe."""
    if any(n.name == name for n in topology.ntbs):
        return "xeon-ntb"
    if any(d.name == name for d in topology.devices):
        return "nvme"
    raise LinuxGuestError(f"device {name!r}: not a device or NTB of topology {topology.name!r}", "topology")


def run_guests(topology, guests: dict[str, list[str]], *, devices: dict[str, list[str]] | None = None,
               outdir: str | os.PathLike | None = None, kernel: str | None = None, mem: str = "128M",
               timeout_s: float = 120.0, blocks: int = 1 << 21, faults: list[tuple[str, str, int]] = (),
               kernel_args: list[str] = ()) -> dict[str, GuestResult]:
    """Boot one guest per host of ``topology`` named in ``guests`` (host -> its commands), all on
    one clock: devlend's engine, with devlend-uml's controller (``guests.rs``) moving simulated
    time only when every guest waits. ``devices``: host -> the devices on its guest's PCI, each on
    its own vhost-user socket and all on the one engine: a drive of the topology (NVMe, borrowed
    when it sits in another host) or the host's NTB adapter (an Intel Xeon gen1 NTB, which the
    kernel's ntb_hw_intel drives). Each guest's folder is ``outdir/HOST`` (console, outputs).
    ``GuestResult.device`` holds the guest's final simulated time (``guest_ns``), its time
    messages and WAITs, its ``devices`` (accesses, interrupts, commands), and the run's
    ``simulated_ps``, ``wall_s`` and ``unimplemented_registers`` (NTB registers the guests
    touched that the model does not implement: (ntb, space, offset, length, access)). ``faults``:
    (kind, target, at_ns) on the engine, as for ``run`` (e.g. ("link-down", "ntb-a", ...)); the
    run's fabric events are in ``fabric_events``. ``kernel_args``: more kernel command-line
    arguments for every guest (e.g. ``initcall_blacklist=`` to keep built-in NTB clients off the
    device so that ntb_transport takes it at boot, as ntb_netdev needs)."""
    names = {h.name for h in topology.hosts}
    fault_list = _faults(faults)
    devices = devices or {}
    if len(guests) < 1:
        raise LinuxGuestError("no guests: name at least one host and its commands", "topology")
    for h in list(guests) + list(devices):
        if h not in names:
            raise LinuxGuestError(f"host {h!r}: not a host of topology {topology.name!r} (it has {', '.join(sorted(names))})", "topology")
        if h not in guests:
            raise LinuxGuestError(f"devices for host {h!r}, which runs no guest", "topology")
    for h, ds in devices.items():
        if len(ds) > UML_MAX_DEVICES:
            raise LinuxGuestError(f"host {h!r}: {len(ds)} devices: UML's PCI takes at most {UML_MAX_DEVICES}", "topology")
    kinds = {d: _device_kind(topology, d) for ds in devices.values() for d in ds}
    from .build import build
    kernel = kernel or str(build())
    root = Path(outdir or tempfile.mkdtemp(prefix="devlend-guests-")).resolve()
    hosts = list(guests)
    folders = {h: root / h for h in hosts}
    socks = [str(folders[h] / "time.sock") for h in hosts]
    prepared = {h: _prepare(folders[h], guests[h]) for h in hosts}
    dev_socks = {h: [(str(folders[h] / f"{d}.sock"), kinds[d], d) for d in devices.get(h, [])] for h in hosts}
    spec = [(h, socks[i], dev_socks[h]) for i, h in enumerate(hosts)]
    result, errors = {}, []
    cpu = guest_cpu()

    def control():
        try:
            pin_this_thread(cpu)
            result.update(_core.uml_control(topology.to_json(), spec, blocks, timeout_s, fault_list))
        except Exception as e:  # noqa: BLE001 - reported below with the consoles
            errors.append(e)
    server = threading.Thread(target=control, daemon=True)
    server.start()
    every = socks + [s for h in hosts for s, _, _ in dev_socks[h]]
    while not all(os.path.exists(s) for s in every) and not errors:
        time.sleep(0.01)
    if errors:
        raise LinuxGuestError(f"the time-travel controller: {errors[0]}", "device")
    start, procs = time.monotonic(), {}
    try:
        for i, h in enumerate(hosts):
            init, console = prepared[h]
            argv = _argv(kernel, init, mem, f"devlend-{os.getpid()}-{i}") + [f"time-travel=ext:{socks[i]}"]
            argv += [f"virtio_uml.device={s}:{VIRTIO_DEVICE_ID}" for s, _, _ in dev_socks[h]] + list(kernel_args)
            with open(console, "wb") as con, pinned(cpu):
                procs[h] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=con, stderr=subprocess.STDOUT, cwd=folders[h],
                                            start_new_session=True, env=dict(os.environ, TMPDIR=str(folders[h])))
        for h, p in procs.items():
            _wait(p, [server], max(0.0, timeout_s - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        raise LinuxGuestError(f"the guests did not all power off within {timeout_s:g} s (wall clock); consoles under {root}",
                              "timeout", "\n".join(_tail(prepared[h][1], 10) for h in hosts)) from None
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    wall = time.monotonic() - start
    server.join(timeout=10)
    if errors:
        raise LinuxGuestError(f"the time-travel controller: {errors[0]}; consoles under {root}", "device",
                              "\n".join(_tail(prepared[h][1], 10) for h in hosts))
    out = {}
    for i, h in enumerate(hosts):
        console = prepared[h][1]
        if "devlend-guest-done" not in console.read_text(errors="replace"):
            raise LinuxGuestError(f"the guest of {h} ended (status {procs[h].returncode}) without finishing its commands; console {console}",
                                  "crash", _tail(console))
        g = result["guests"][i]
        info = {**g, "simulated_ps": result["simulated_ps"], "wall_s": wall,
                "unimplemented_registers": result["unimplemented_registers"], "fabric_events": result["fabric_events"]}
        outs, rcs = _collect(folders[h], len(guests[h]))
        out[h] = GuestResult(outs, rcs, console, info, wall, driver_lines(console))
    return out
