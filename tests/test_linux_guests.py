"""Several real Linux guests on one clock (issue 32, step 1): one UML process per named host of a
topology, devlend-uml's controller their only clock, simulated time moving only when every guest
waits. Each guest's clock reads are simulated time, so two runs give the very same readings."""

import pytest

import devlend
from conftest import connect_unix, topo_path
from devlend.linux.guest import LinuxGuestError, run_guests

# /proc/uptime before and after a sleep; each guest sleeps its own time so their timers interleave.
GUESTS = {
    "borrower": ["cat /proc/uptime", "sleep 0.3; cat /proc/uptime", "date +%s.%N"],
    "lender": ["cat /proc/uptime", "sleep 0.7; cat /proc/uptime", "date +%s.%N"],
}


def _uptime(out: str) -> float:
    return float(out.split()[0])


@pytest.fixture(scope="module")
def topo():
    return devlend.load(topo_path("nvme-back-to-back.yaml"))


@pytest.fixture(scope="module")
def runs(topo, tmp_path_factory):
    return [run_guests(topo, GUESTS, outdir=tmp_path_factory.mktemp(f"guests{i}"), timeout_s=240) for i in range(2)]


def test_two_guests_on_one_clock_both_finish(runs):
    for host, r in runs[0].items():
        assert r.returncodes == [0, 0, 0], (host, r.outputs)
        assert r.device["waits"] > 0 and r.device["guest_ns"] > 0, r.device


def test_each_guest_sleeps_its_own_simulated_time(runs):
    r = runs[0]
    for host, slept in (("borrower", 0.3), ("lender", 0.7)):
        before, after = _uptime(r[host].outputs[0]), _uptime(r[host].outputs[1])
        assert slept <= after - before < slept + 0.1, (host, before, after)
    # The one clock ends past the longer sleeper's wake-up.
    assert r["lender"].device["guest_ns"] >= 700_000_000
    assert r["lender"].device["simulated_ps"] == r["borrower"].device["simulated_ps"]


def test_two_runs_give_the_same_simulated_readings(runs):
    a, b = runs
    for host in GUESTS:
        assert a[host].outputs == b[host].outputs, host
        assert a[host].device["guest_ns"] == b[host].device["guest_ns"], host


# The borrower reads its borrowed drive (its own device, on the one engine) while the lender,
# with no device, sleeps: uptime after the reads is simulated time, the drive's included.
DRIVE_GUESTS = {
    "borrower": ["dd if=/dev/nvme0n1 of=/dev/null bs=4k count=64 iflag=direct 2>&1 | tail -1 | cut -d, -f1; cat /proc/uptime"],
    "lender": ["sleep 0.2; cat /proc/uptime"],
}


@pytest.fixture(scope="module")
def drive_runs(topo, tmp_path_factory):
    return [run_guests(topo, DRIVE_GUESTS, devices={"borrower": ["nvme0"]}, outdir=tmp_path_factory.mktemp(f"drive{i}"), timeout_s=240)
            for i in range(2)]


def test_a_guest_with_its_own_drive_and_one_without_share_the_clock(drive_runs):
    r = drive_runs[0]
    assert r["borrower"].returncodes == [0] and "262144 bytes" in r["borrower"].outputs[0], r["borrower"].outputs
    assert r["lender"].returncodes == [0], r["lender"].outputs
    drive = r["borrower"].device["devices"]
    assert len(drive) == 1 and drive[0]["commands"] >= 64 and drive[0]["msis"] > 0, drive
    assert r["lender"].device["devices"] == []
    assert r["borrower"].device["simulated_ps"] == r["lender"].device["simulated_ps"]


def test_two_runs_with_a_drive_give_the_same_simulated_readings(drive_runs):
    # What the guests read (the drive's bytes, their clocks) and what the drive did are the same.
    # Not compared: `guest_ns`, the time of a guest's last message to the controller, which still
    # varies by tens of ns between runs with a device (how far a guest ran before it asked).
    a, b = drive_runs
    for host in DRIVE_GUESTS:
        assert a[host].outputs == b[host].outputs, host
    assert a["borrower"].device["devices"] == b["borrower"].device["devices"]


def test_a_device_for_a_host_without_a_guest_is_refused(topo, tmp_path):
    with pytest.raises(LinuxGuestError, match="devices for host 'lender', which runs no guest"):
        run_guests(topo, {"borrower": ["true"]}, devices={"lender": ["nvme0"]}, outdir=tmp_path, kernel="/nonexistent")
    with pytest.raises(LinuxGuestError, match="'nvme9': not a device or NTB"):
        run_guests(topo, {"borrower": ["true"]}, devices={"borrower": ["nvme9"]}, outdir=tmp_path, kernel="/nonexistent")


def test_a_host_not_in_the_topology_is_refused(topo, tmp_path):
    with pytest.raises(LinuxGuestError, match="'nowhere': not a host") as e:
        run_guests(topo, {"borrower": ["true"], "nowhere": ["true"]}, outdir=tmp_path, kernel="/nonexistent")
    assert e.value.kind == "topology"


def test_time_moves_only_when_every_guest_waits(topo, tmp_path):
    # Two fake guests speak um_timetravel to the controller: A waits for 5 us while B still runs,
    # so nothing moves; when B waits for 3 us, B runs first (at 3 us, free until A's 5 us), and A
    # only when B waits again (for 9 us).
    import struct
    import threading

    from devlend import _core
    socks = [str(tmp_path / f"t{i}.sock") for i in range(2)]
    out = {}
    t = threading.Thread(target=lambda: out.update(r=_core.uml_control(topo.to_json(), [("borrower", socks[0], []), ("lender", socks[1], [])], 1 << 21, 10.0)))
    t.start()
    a, b = (connect_unix(s) for s in socks)
    seqs = {a: iter(range(1, 100)), b: iter(range(1, 100))}

    def ask(c, op, time=0):
        c.sendall(struct.pack("<IIQ", op, next(seqs[c]), time))
        assert struct.unpack("<IIQ", c.recv(16))[0] == 0   # its ACK

    def told(c):
        op, seq, time = struct.unpack("<IIQ", c.recv(16))
        c.sendall(struct.pack("<IIQ", 0, seq, 0))
        return op, time

    ask(a, 2, 5000)     # A: REQUEST 5 us, WAIT
    ask(a, 3)
    a.setblocking(False)
    try:
        a.recv(16)
        raise AssertionError("A was told something while B still runs")
    except BlockingIOError:
        pass
    a.setblocking(True)
    ask(b, 2, 3000)     # B: REQUEST 3 us, WAIT
    ask(b, 3)
    assert told(b) == (7, 5000)         # FREE_UNTIL: A's request
    assert told(b) == (6, 3000)         # RUN at B's request
    ask(b, 2, 9000)
    ask(b, 3)
    assert told(a) == (7, 9000)
    assert told(a) == (6, 5000)
    a.close()                           # A powers off: B runs on alone
    assert told(b) == (7, 2**63 - 1)
    assert told(b) == (6, 9000)
    b.close()
    t.join(10)
    assert not t.is_alive() and [g["guest_ns"] for g in out["r"]["guests"]] == [5000, 9000], out


def test_devlend_linux_run_with_two_hosts_runs_both_on_one_clock(tmp_path):
    import subprocess
    import sys
    args = [sys.executable, "-m", "devlend.cli", "linux", "run", "--topology", topo_path("nvme-back-to-back.yaml"),
            "--host", "borrower", "--host", "lender", "--out", str(tmp_path), "--timeout", "120", "--",
            "sleep 0.2; cat /proc/uptime"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("0.20 0.20") == 2 and "[lender] $ sleep" in r.stdout, r.stdout
    assert (tmp_path / "borrower" / "console.log").exists() and (tmp_path / "lender" / "console.log").exists()
    r = subprocess.run(args[: args.index("--out")] + ["--device", "nvme0", "--", "true"], capture_output=True, text=True)
    assert r.returncode == 2 and "--device nvme0: with several hosts, expected HOST=DEVICE" in r.stderr, r.stderr
