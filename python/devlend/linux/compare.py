"""The same fio job on a real kernel in a guest and on devlend's own fio model: both reports in
one shape (IOPS, mean and p99 completion latency), so they can be set side by side."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..fio import jobfile
from ..fio import run as fiorun

#: What the guest's time leaves out and devlend's own driver model charges: the interrupt's way
#: to its handler on the host's CPU ([timing] irq_entry_ps). UML's time travel has no CPU model,
#: so a guest's interrupt is handled at the instant it lands.
GUEST_FREE = {"timing.irq_entry_ps": 0}


@dataclass
class FioSide:
    iops: float
    clat_mean_ns: float
    clat_p99_ns: float
    ios: int


def side(doc: dict, write: bool = False) -> FioSide:
    """One side from fio's JSON document (the guest's fio or devlend's)."""
    d = doc["jobs"][0]["write" if write else "read"]
    return FioSide(d["iops"], d["clat_ns"]["mean"], d["clat_ns"]["percentile"]["99.000000"], d["total_ios"])


def fio_json(text: str) -> dict:
    """fio's JSON from a command's output (fio may print notes before it)."""
    return json.loads(text[text.index("{"):])


def job_text(rw: str, iodepth: int, ios: int, size: str = "2m") -> str:
    return f"[job]\nioengine=libaio\nrw={rw}\nbs=4k\niodepth={iodepth}\nsize={size}\nnumber_ios={ios}\ndirect=1\n"


def guest_command(rw: str, iodepth: int, ios: int, engine: str = "libaio", size: str = "2m") -> str:
    """The fio command line for the guest that runs `job_text`'s job on /dev/nvme0n1."""
    return (f"fio --name=job --filename=/dev/nvme0n1 --direct=1 --thread --clocksource=clock_gettime "
            f"--ioengine={engine} --rw={rw} --bs=4k --iodepth={iodepth} --size={size} --number_ios={ios} "
            f"--output-format=json")


def model(topology, host: str, device: str, rw: str, iodepth: int, ios: int, guest_free: bool = False) -> FioSide:
    """devlend's fio model of the job (its own NVMe driver on the engine); `guest_free`: without
    the CPU time a guest's kernel does not spend (GUEST_FREE)."""
    topo = topology.with_params(GUEST_FREE, origin="linux.compare") if guest_free else topology
    jobs, global_opts = jobfile.load(job_text(rw, iodepth, ios), "<linux.compare>")
    outs = fiorun.simulate(topo.to_json(), host, device, jobs)
    return side(fiorun.to_json(jobs, outs, global_opts, device), write=rw.endswith("write"))
