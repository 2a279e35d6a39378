"""Real Linux on devlend (issue 28): a User-Mode Linux guest whose unmodified nvme driver, nvme-cli
and fio run against devlend's NVMe model, borrowed through Device Lending across the modelled NTB.

These boot the kernel `devlend linux build` makes (scripts/linux-deps builds it once and caches
it); one guest boot runs all the commands the happy-path tests check."""

import os
import tomllib
from pathlib import Path

import pytest

import devlend
from conftest import topo_path
from devlend.linux import build as lbuild
from devlend.linux import compare
from devlend.linux.guest import LinuxGuestError, run

# The hot-plug steps' times (params/hardware.toml [timing], ps): a port's hot-plug interrupt after
# its link goes down, pciehp's remove after it, Device Lending's notice to a borrower.
with open(Path(__file__).parent.parent / "params" / "hardware.toml", "rb") as fh:
    TIMING = tomllib.load(fh)["timing"]
HOTPLUG_DETECT_NS, HOTPLUG_REMOVE_NS, DL_NOTICE_NS = (TIMING[k] // 1000 for k in ("hotplug_detect_ps", "hotplug_remove_ps", "dl_notice_ps"))

FIO = ("fio --name={name} --filename=/dev/nvme0n1 --direct=1 --thread --clocksource=clock_gettime "
       "--bs=4k --size=2m --output-format=normal")
COMMANDS = [
    "lspci -nn",
    "nvme id-ctrl /dev/nvme0",
    FIO.format(name="rr") + " --rw=randread --ioengine=libaio --iodepth=1 --io_size=256k",
    FIO.format(name="wv") + " --rw=randwrite --ioengine=io_uring --iodepth=4 --verify=crc32c --do_verify=1",
    "cat /proc/interrupts",
    compare.guest_command("randread", 1, 64),
    # One fio, three jobs one after another (fio's start-up in the guest costs seconds of wall).
    "fio --filename=/dev/nvme0n1 --direct=1 --thread --clocksource=clock_gettime --rw=randread --bs=4k --size=2m "
    "--output-format=json --name=libaio-qd8 --ioengine=libaio --iodepth=8 --number_ios=128 "
    "--name=io_uring-qd32 --stonewall --ioengine=io_uring --iodepth=32 --number_ios=256 "
    "--name=libaio-qd32 --stonewall --ioengine=libaio --iodepth=32 --number_ios=256",
]
QD1 = 5


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    return run(topo, "borrower", COMMANDS, device="nvme0", outdir=tmp_path_factory.mktemp("guest"), timeout_s=300)


def test_the_guest_enumerates_the_borrowed_drive(guest):
    assert guest.returncodes[0] == 0, guest.outputs[0]
    assert "Non-Volatile memory controller [0108]" in guest.outputs[0], guest.outputs[0]
    assert guest.device["cfg_reads"] > 0


def test_nvme_id_ctrl_reads_the_modelled_identity(guest):
    assert guest.returncodes[1] == 0, guest.outputs[1]
    assert "devlnd modelled NVMe" in guest.outputs[1], guest.outputs[1]
    assert "nn        : 1" in guest.outputs[1], guest.outputs[1]
    # The subsystem NQN in the form NVMe §7.9 gives a drive without a naming authority, so the
    # driver takes it as it is and does not warn "missing or invalid SUBNQN field".
    assert "subnqn    : nqn.2014.08.org.nvmexpress:80868086devlend" in guest.outputs[1], guest.outputs[1]
    assert not [ln for ln in guest.driver_lines if "SUBNQN" in ln], guest.driver_lines
    # nvme-cli's buffer is not page-aligned: the structure's second part goes to PRP2, so the
    # fields past the page boundary read as the model wrote them (zeros), not as stale memory.
    assert "ioccsz    : 0\n" in guest.outputs[1] and "mp:0.00W" in guest.outputs[1], guest.outputs[1]


def test_fio_randread_completes_on_the_borrowed_drive(guest):
    out = guest.outputs[2]
    assert guest.returncodes[2] == 0, out
    assert "err= 0" in out and "read: IOPS=" in out, out
    # 64 reads of 4 KiB, each an NVMe command the model executed, its interrupts from the model.
    assert guest.device["commands"] >= 64
    assert guest.device["msis"] >= 64
    assert guest.device["simulated_ps"] > 0


def test_fio_write_then_verify_passes(guest):
    out = guest.outputs[3]
    assert guest.returncodes[3] == 0, out
    assert "err= 0" in out and "verify" in out.lower(), out


def test_two_runs_of_one_job_report_the_same_simulated_latencies(guest, tmp_path):
    # The guest's clock is the engine's: fio's clock_gettime reads simulated time, so a second
    # guest running the same job reports the very same latencies (on the wall clock they differ
    # from run to run, with the machine's load).
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    again = run(topo, "borrower", [COMMANDS[QD1]], device="nvme0", outdir=tmp_path, timeout_s=300)
    a, b = (compare.fio_json(o)["jobs"][0]["read"] for o in (guest.outputs[QD1], again.outputs[0]))
    assert a["total_ios"] == b["total_ios"] == 64
    for key in ("clat_ns", "lat_ns", "slat_ns"):
        assert (a[key]["mean"], a[key]["min"], a[key]["max"]) == (b[key]["mean"], b[key]["min"], b[key]["max"]), key
    assert a["clat_ns"]["percentile"] == b["clat_ns"]["percentile"]


def test_the_guest_qd1_latency_is_the_models_without_cpu_time(guest):
    # The band comes from devlend's own fio model of the same job on the same path (its NVMe
    # driver on the engine), less what the guest's time has no model of: the interrupt's way to
    # its handler on the CPU (compare.GUEST_FREE). What remains differs only in the two drivers'
    # steps (Linux's nvme/blk-mq and devlend's), within 15%.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    real = compare.side(compare.fio_json(guest.outputs[QD1]))
    model = compare.model(topo, "borrower", "nvme0", "randread", 1, 64, guest_free=True)
    assert real.ios == model.ios == 64
    assert 0.85 * model.clat_mean_ns <= real.clat_mean_ns <= 1.15 * model.clat_mean_ns, (real, model)


@pytest.mark.parametrize("j,depth", [(0, 8), (1, 32), (2, 32)], ids=["libaio-qd8", "io_uring-qd32", "libaio-qd32"])
def test_fio_queue_depths_up_to_32_complete_on_the_engines_clock(guest, j, depth):
    out = compare.fio_json(guest.outputs[QD1 + 1])["jobs"][j]
    assert guest.returncodes[QD1 + 1] == 0 and out["error"] == 0, guest.outputs[QD1 + 1]
    assert out["job options"]["iodepth"] == str(depth)
    assert out["read"]["total_ios"] == (128 if depth == 8 else 256)
    # More I/Os in flight: more IOPS than at QD1, on the simulated clock.
    qd1 = compare.fio_json(guest.outputs[QD1])["jobs"][0]["read"]["iops"]
    assert out["read"]["iops"] > 2 * qd1, (out["read"]["iops"], qd1)


def test_the_side_by_side_experiment_sees_the_borrowed_path_cost_alike():
    # linux-fio, small: randread QD1 local and borrowed, in a guest and on devlend's model. The
    # borrowed path's extra NTB crossings cost the real driver what they cost devlend's.
    from devlend.experiments import linux_fio
    from devlend import readme_figures
    rows = linux_fio.measure(readme_figures.LINUX_FIO_IOS, jobs=readme_figures.LINUX_FIO_JOBS)
    assert len(rows) == 4 and {r["side"] for r in rows} == {"linux guest", "devlend model"}
    guest, model = (linux_fio.borrowed_minus_local(rows, side) for side in ("linux guest", "devlend model"))
    assert guest > 0 and model > 0, (guest, model)
    assert 0.7 * model <= guest <= 1.3 * model, (guest, model)
    assert all(r["irqs_per_io"] >= 1 for r in rows if r["side"] == "linux guest"), rows
    # The README's linux-fio figures are this run's (scripts/readme-figures --write --only linux-fio).
    with open(readme_figures.README, encoding="utf-8") as fh:
        quoted = readme_figures.blocks(fh.read())["linux-fio"]
    assert quoted == readme_figures.linux_fio_block(rows), "README block linux-fio is stale: run scripts/readme-figures --write --only linux-fio"


FAULT_FIO = ("fio --name=job --filename=/dev/nvme0n1 --direct=1 --thread --clocksource=clock_gettime --ioengine=libaio "
             "--rw=randread --bs=4k --iodepth=1 --size=1g --norandommap --time_based --runtime=40ms")


def test_a_link_down_during_fio_reaches_the_real_driver(tmp_path):
    # Injected on the engine at 200 ms simulated, inside fio's 40 ms job (its I/Os start near 185
    # ms: fio's own start-up sleeps): no completion comes, Linux's nvme driver times the command
    # out (30 s, simulated), finds the controller reading all ones, fails to reset it and
    # disables it; fio ends with an error. The lend stays across a pulled cable
    # (devlend_host::fault), so no hot-plug event: the config space the driver reads through
    # Device Lending's relay reads all ones too (PCI_STATUS). Never a hang: the guest powers off.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [FAULT_FIO, "echo after"], device="nvme0", outdir=tmp_path, timeout_s=400,
            faults=[("link-down", "ntb-b", 200_000_000)])
    assert r.device["faults_struck"] == [("link-down", "ntb-b", False)]
    assert r.returncodes == [1, 0], r.outputs[0][-800:]
    lines = "\n".join(r.driver_lines)
    assert "controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff" in lines, lines
    assert "Disabling device after reset failure" in lines, lines
    assert r.device["read_faults"] > 0 and r.device["unplugged_ns"] is None
    assert r.device["guest_ns"] > 30_000_000_000  # the driver's I/O timeout, on the simulated clock


def test_a_surprise_removal_during_fio_is_hot_unplugged_in_the_guest(tmp_path):
    # The drive is pulled at 200 ms simulated. The lender's port finds its link down (24 ms),
    # pciehp removes it, Device Lending tells the borrower (000 §4): at that step the guest gets
    # its hot-unplug (virtio_uml's device connection breaks), the kernel removes the PCI device
    # and nvme's remove fails the I/O in flight at once (no 30 s timeout). The guest's PCI bus is
    # empty afterwards and the guest goes on: its next command runs, it powers off.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [FAULT_FIO, "echo after", "ls /sys/bus/pci/devices/"], device="nvme0",
            outdir=tmp_path, timeout_s=400, faults=[("surprise-removal", "nvme0", 200_000_000)])
    assert r.device["faults_struck"] == [("surprise-removal", "nvme0", False)]
    assert r.returncodes == [1, 0, 0], r.outputs[0][-800:]
    assert "Input/output error" in r.outputs[0], r.outputs[0][-800:]
    assert r.device["unplugged_ns"] == 200_000_000 + HOTPLUG_DETECT_NS + HOTPLUG_REMOVE_NS + DL_NOTICE_NS
    assert r.outputs[2].strip() == "", r.outputs[2]
    lines = "\n".join(r.driver_lines)
    assert "controller is down" not in lines and "WARNING" not in r.console.read_text(), lines
    assert r.device["guest_ns"] < 1_000_000_000


def test_the_lender_revoking_the_drive_hot_unplugs_it_in_the_guest(tmp_path):
    # The lender takes its drive back mid-job (a forced return: the lend's mappings and
    # interrupts go at once); Device Lending's notice reaches the borrower 20 us later
    # (timing.dl_notice_ps) and the guest hot-unplugs the drive there.
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [FAULT_FIO, "echo after", "ls /sys/bus/pci/devices/"], device="nvme0",
            outdir=tmp_path, timeout_s=400, faults=[("revoke", "nvme0", 200_000_000)])
    assert r.device["faults_struck"] == [("revoke", "nvme0", False)]
    assert r.returncodes == [1, 0, 0], r.outputs[0][-800:]
    assert r.device["unplugged_ns"] == 200_000_000 + DL_NOTICE_NS
    assert r.outputs[2].strip() == "", r.outputs[2]
    assert r.device["guest_ns"] < 1_000_000_000


def test_bad_faults_are_refused_before_the_guest_boots(tmp_path):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(LinuxGuestError, match="at_ns"):
        run(topo, "borrower", ["true"], device="nvme0", outdir=tmp_path, faults=[("link-down", "ntb-b", -5)])
    with pytest.raises(LinuxGuestError, match="no-such-ntb"):
        run(topo, "borrower", ["true"], device="nvme0", outdir=tmp_path, faults=[("link-down", "no-such-ntb", 5)], timeout_s=60)


def test_the_guest_cannot_write_a_host_file(tmp_path):
    probe = tmp_path / "host-file"
    probe.write_text("host")
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    r = run(topo, "borrower", [f"echo guest > {probe}"], outdir=tmp_path / "g", timeout_s=120)
    assert r.returncodes[0] != 0
    assert probe.read_text() == "host"


def test_a_guest_that_never_powers_off_is_ended_with_its_console(tmp_path):
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(LinuxGuestError) as e:
        run(topo, "borrower", ["sleep 100000"], outdir=tmp_path, timeout_s=8)
    assert e.value.kind == "timeout"
    assert "Linux version" in e.value.console_tail or e.value.console_tail
    assert os.path.exists(tmp_path / "console.log")


def test_no_kernel_source_is_one_clear_error(tmp_path):
    with pytest.raises(lbuild.LinuxBuildError) as e:
        lbuild.build(source=str(tmp_path))
    assert e.value.kind == "source"
    assert "not a Linux source tree" in str(e.value)


def test_the_cache_key_follows_the_config_fragment(monkeypatch, tmp_path):
    a = lbuild.kernel_key("src", (6, 12, 1))
    frag = tmp_path / "uml.config"
    frag.write_text(lbuild.FRAGMENT.read_text() + "CONFIG_NTB_PERF=n\n")
    monkeypatch.setattr(lbuild, "FRAGMENT", frag)
    assert lbuild.kernel_key("src", (6, 12, 1)) != a


def test_the_device_server_gives_up_when_no_guest_connects(tmp_path):
    from devlend import _core
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(_core.UmlError, match="no guest connected"):
        _core.uml_serve(topo.to_json(), "borrower", "nvme0", str(tmp_path / "s.sock"), str(tmp_path / "t.sock"), 1024, 0.2)


def test_the_device_server_names_an_unknown_drive(tmp_path):
    from devlend import _core
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    with pytest.raises(_core.UmlError, match="nvme9"):
        _core.uml_serve(topo.to_json(), "borrower", "nvme9", str(tmp_path / "s.sock"), str(tmp_path / "t.sock"), 1024, 0.2)


def test_the_controller_speaks_uml_time_travel(tmp_path):
    # A stand-in guest on the time socket, as arch/um/kernel/time.c talks (no kernel needed):
    # START's ACK carries the two fds 6.12 reads; GET_TOD is the fixed simulated epoch; a WAIT
    # for a REQUESTed time is answered by FREE_UNTIL (the engine has nothing to do: "never")
    # and RUN at exactly that time; the guest's closing the socket ends the session cleanly.
    import array
    import socket
    import struct
    import threading
    from devlend import _core
    topo = devlend.load(topo_path("nvme-back-to-back.yaml"))
    tsock, out = tmp_path / "t.sock", {}

    def serve():
        try:
            out["r"] = _core.uml_serve(topo.to_json(), "borrower", "nvme0", str(tmp_path / "d.sock"), str(tsock), 1024, 10.0)
        except Exception as e:  # noqa: BLE001 - checked below
            out["e"] = e
    t = threading.Thread(target=serve)
    t.start()
    while not (tmp_path / "d.sock").exists():
        pass
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(str(tsock))
    seq = iter(range(1, 100))

    def ask(op, time=0):
        c.sendall(struct.pack("<IIQ", op, next(seq), time))

    def recv(fds=0):
        data, anc, _, _ = c.recvmsg(16, socket.CMSG_SPACE(fds * 4) if fds else 0)
        got = array.array("i")
        for level, kind, d in anc:
            got.frombytes(d[: len(d) - len(d) % 4])
        return struct.unpack("<IIQ", data), list(got)

    ask(1, 7)                       # START
    (op, sq, _), fds = recv(fds=2)
    assert (op, sq) == (0, 1) and len(fds) == 2
    ask(8)                          # GET_TOD
    assert recv()[0] == (0, 2, 1_767_225_600 * 10**9)
    ask(2, 5000)                    # REQUEST 5 us
    assert recv()[0][:2] == (0, 3)
    ask(3)                          # WAIT
    assert recv()[0][:2] == (0, 4)
    (op, s1, until), _ = recv()
    assert op == 7 and until == 2**63 - 1   # FREE_UNTIL: the engine has nothing to do
    c.sendall(struct.pack("<IIQ", 0, s1, 0))
    (op, s2, at), _ = recv()
    assert (op, at) == (6, 5000)            # RUN at the requested time
    c.sendall(struct.pack("<IIQ", 0, s2, 0))
    ask(4)                          # GET: the guest's time is now the RUN's
    assert recv()[0] == (0, 5, 5000)
    c.close()
    t.join(10)
    assert not t.is_alive() and "e" not in out, out
    assert out["r"]["guest_ns"] == 5000 and out["r"]["waits"] == 1


def test_devlend_linux_run_runs_commands_in_a_guest(tmp_path):
    import subprocess
    import sys
    args = [sys.executable, "-m", "devlend.cli", "linux", "run", "--topology", topo_path("nvme-back-to-back.yaml"),
            "--host", "borrower", "--device", "nvme0", "--out", str(tmp_path), "--timeout", "120", "--",
            "nvme list", "exit 3"]
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 3, r.stderr
    assert "devlnd modelled NVMe" in r.stdout and "$ exit 3   (exit 3)" in r.stdout, r.stdout
    assert (tmp_path / "console.log").exists()
    r = subprocess.run(args[: args.index("--")], capture_output=True, text=True)
    assert r.returncode == 2 and "no commands" in r.stderr, r.stderr
