"""The kernel's own NTB stack on two guests joined by devlend's NTB: the guest commands that drive
``ntb_tool`` (debugfs), ``ntb_pingpong`` and ``ntb_transport`` + ``ntb_netdev`` across an Intel
Xeon gen1 NTB pair (``ntb_hw_intel``; devlend_devices::ntb_xeon is its register face), as the
tests and ``devlend experiment linux-ntb`` run them. Every client is built in (uml.config); the
NTB device binds to the first one registered, so each script rebinds it through sysfs
(``/sys/bus/ntb/drivers/CLIENT/bind``) to the client it uses.
"""

from __future__ import annotations

from pathlib import Path

#: The guests' ping (ICMP echo on a raw socket with the host's python3; no iputils needed).
PING = f"python3 {Path(__file__).with_name('icmp_ping.py')}"

#: The topology: two hosts, their Xeon NTBs cabled back to back.
TOPOLOGY = "xeon-ntb-two-host.yaml"
HOSTS = ("a", "b")
DEVICES = {"a": ["ntb-a"], "b": ["ntb-b"]}
#: ntb_hw_gen1.c: 15 doorbells (bit 15 reports the link); ntb_tool's masks start all set.
DB_VALID = 0x7FFF
#: 2 MiB, the window (BAR) size of the xeon-gen1 profile; ntb_hw_intel wants translations
#: aligned to it, so ntb_tool's inbound buffer is one whole window.
MW_SIZE = 2 << 20
MW_TEXT = "devlend-across-the-ntb"

#: Bind the NTB device to client ``{client}`` (unbinding whatever took it at boot); $D is its name.
BIND = ("D=$(ls /sys/bus/ntb/devices | head -1); [ -n \"$D\" ] || {{ echo no NTB device; exit 1; }}; "
        "for d in /sys/bus/ntb/drivers/*/; do [ -e \"$d$D\" ] && echo $D > \"${{d}}unbind\"; done; "
        "echo $D > /sys/bus/ntb/drivers/{client}/bind")


#: Where ntb_tool's files for the NTB device are.
TOOL_DIR = "D=$(ls /sys/bus/ntb/devices | head -1); T=/sys/kernel/debug/ntb_tool/$D; "


def _tool(body: str, bind: bool = False) -> str:
    return (BIND.format(client="ntb_tool") + "; " if bind else "") + TOOL_DIR + body


def tool_commands() -> dict[str, list[str]]:
    """ntb_tool on both guests: link up, a scratchpad value and a doorbell each way, and a memory
    window written by a (through its outbound window) and read by b (its inbound buffer). The
    doorbells also order the two guests' steps: each waits on ``db_event`` for the other's ring."""
    up = f"echo Y > $T/link; echo Y > $T/peer0/link_event; echo 'c {DB_VALID:#x}' > $T/db_mask; cat $T/peer0/link"
    a = [
        _tool(up, bind=True),
        _tool("echo 0xcafe0001 > $T/peer0/spad0; echo 's 0x2' > $T/peer_db; echo 0x4 > $T/db_event; cat $T/spad1; echo 'c 0x4' > $T/db"),
        _tool(f"echo 0:{MW_SIZE} > $T/peer0/peer_mw_trans0; echo 0x8 > $T/db_event; printf {MW_TEXT} > $T/peer0/peer_mw0; "
              "echo 'c 0x8' > $T/db; echo 's 0x10' > $T/peer_db; echo 0x20 > $T/db_event; echo done"),
    ]
    b = [
        _tool(up, bind=True),
        _tool("echo 0x2 > $T/db_event; cat $T/spad0; echo 'c 0x2' > $T/db; echo 0xbeef0002 > $T/peer0/spad1; echo 's 0x4' > $T/peer_db"),
        _tool(f"echo {MW_SIZE} > $T/peer0/mw_trans0; echo 's 0x8' > $T/peer_db; echo 0x10 > $T/db_event; "
              f"head -c {len(MW_TEXT)} $T/peer0/mw0; echo; echo 's 0x20' > $T/peer_db"),
    ]
    return {"a": a, "b": b}


#: ntb_pingpong's debugfs counter of the NTB device (pongs this side took).
PP_COUNT = "cat /sys/kernel/debug/ntb_pingpong/$D/count"


def pingpong_commands(delay_ms: int = 1, run_s: float = 0.2) -> dict[str, list[str]]:
    """ntb_pingpong on both guests for ``run_s`` simulated seconds, each pinging back ``delay_ms``
    after the peer's doorbell (its module parameter); each side prints the pongs it counted.
    The counts are of simulated time: two runs count the same."""
    cmd = (f"echo {delay_ms} > /sys/module/ntb_pingpong/parameters/delay_ms; " + BIND.format(client="ntb_pingpong")
           + f"; sleep {run_s}; {PP_COUNT}")
    return {h: [cmd] for h in HOSTS}


#: ntb_netdev attaches (at late_initcall) only to an NTB that ntb_transport took at boot: keep the
#: other built-in clients' initcalls from running (their module_init functions) so that it does.
TRANSPORT_BOOT = ["initcall_blacklist=pp_init,tool_init,perf_init"]

#: The guests' addresses on the ntb_netdev link.
NET_ADDR = {"a": "10.32.0.1", "b": "10.32.0.2"}


def netdev_commands(pings: int = 3) -> dict[str, list[str]]:
    """ntb_transport (which takes the NTB device at boot: run with ``kernel_args=TRANSPORT_BOOT``)
    and ntb_netdev on both guests: the network device ntb_netdev creates gets the guest's address,
    and each guest pings the other across it."""
    out = {}
    for h, peer in (("a", "b"), ("b", "a")):
        up = ("sleep 0.2; IF=$(ls /sys/class/net | grep '^eth' | head -1); "
              f"[ -n \"$IF\" ] || {{ echo no ntb_netdev interface; exit 1; }}; ip addr add {NET_ADDR[h]}/24 dev $IF; "
              "ip link set $IF up; echo $IF")
        ping = f"sleep 0.2; {PING} {NET_ADDR[peer]} {pings} 0.1"
        out[h] = [up, ping]
    return out


def cable_pull_commands(pings: int = 40, interval_s: float = 0.05) -> dict[str, list[str]]:
    """ntb_netdev traffic for a cable pull: a pings b ``pings`` times, ``interval_s`` apart, and
    prints the replies (ping's own lines); b keeps its side up meanwhile."""
    cmds = netdev_commands()
    cmds["a"][1] = f"{PING} {NET_ADDR['b']} {pings} {interval_s}; true"
    cmds["b"][1] = f"sleep {pings * interval_s + 1:g}"
    return cmds


def replied_seqs(ping_output: str) -> list[int]:
    """The icmp_seq of every reply in ping's output."""
    import re
    return [int(m.group(1)) for m in re.finditer(r"icmp_seq=(\d+)", ping_output)]
