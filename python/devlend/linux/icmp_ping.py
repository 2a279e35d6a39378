"""ping for a guest without iputils: ICMP echo requests (RFC 792) through the guest kernel's own IP
stack on a raw socket, one every INTERVAL seconds, each waited for up to a second; prints ping's
lines (``icmp_seq=N time=T ms`` per reply, ``N packets transmitted, M received``). Run inside a
guest as ``python3 icmp_ping.py ADDRESS COUNT INTERVAL``; the guest's clock is simulated time.
Standard library only: the guest runs the host's python3, not devlend's virtual environment."""

import os
import select
import socket
import struct
import sys
import time


def checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo(ident: int, seq: int) -> bytes:
    payload = b"devlend-ntb-ping" * 3
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, checksum(head + payload), ident, seq) + payload


def main(addr: str, count: int, interval: float) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident, received = os.getpid() & 0xFFFF, 0
    for seq in range(1, count + 1):
        sent = time.monotonic()
        s.sendto(echo(ident, seq), (addr, 0))
        deadline = sent + 1.0
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([s], [], [], left)[0]:
                break
            pkt = s.recv(2048)
            ihl = (pkt[0] & 0xF) * 4
            kind, _, _, rid, rseq = struct.unpack("!BBHHH", pkt[ihl:ihl + 8])
            if kind == 0 and rid == ident and rseq == seq:
                received += 1
                print(f"{len(pkt) - ihl} bytes from {addr}: icmp_seq={seq} time={(time.monotonic() - sent) * 1e3:.3f} ms", flush=True)
                break
        if seq < count:
            time.sleep(max(0.0, sent + interval - time.monotonic()))
    print(f"{count} packets transmitted, {received} received")
    return 0 if received else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
