"""Probes: each computes one published measurement's quantity on the model, by calling the
experiments' own functions (so a probe measures the path the experiment measures). They run
inside experiments.overrides, so every shipped topology they load carries the overrides under
test. Each returns a number in its measurement's unit, or for an ordering the two quantities."""

from __future__ import annotations

import functools
import json
from typing import Callable

from ..experiments import overrides_key

PROBES: dict[str, Callable] = {}


def probe(fn: Callable) -> Callable:
    PROBES[fn.__name__] = fn
    return fn


@functools.lru_cache(maxsize=512)
def _round_trip_ns(scenario: str, _params: str) -> float:
    from ..experiments import pingpong
    return pingpong.round_trip_ns(scenario)


def round_trip_ns(scenario: str) -> float:
    """D3's ping-pong round trip of `scenario` (000 Table 1), cached per set of overrides."""
    return _round_trip_ns(scenario, overrides_key())


@probe
def ram_to_ram_ns(topology: str, near_ntb: str, far_ntb: str, far_ram: str, cpu: str) -> float:
    """One-way latency of a CPU store into the other host's RAM through an NTB pair (000 §7.2, §7.4)."""
    from ..experiments._latency import ram_to_ram_ns as r2r
    return r2r(topology, near_ntb, far_ntb, far_ram, cpu)


@probe
def pingpong_difference_ns(scenario: str, baseline: str) -> float:
    """How much longer `scenario`'s ping-pong round trip is than `baseline`'s."""
    return round_trip_ns(scenario) - round_trip_ns(baseline)


@probe
def pingpong_pair_ns(a: str, b: str) -> tuple[float, float]:
    """Two scenarios' round trips, for an ordering."""
    return round_trip_ns(a), round_trip_ns(b)


@probe
def gpu_read_GBps(scenario: str, size: int) -> float:
    """D1's bandwidthTest host-to-device copy (the GPU's DMA reads of host RAM) in `scenario`."""
    from ..experiments._gpu import memcpy_ps, topology_json
    from ..experiments.bandwidth import SCENARIOS
    runner, lender_iommu = SCENARIOS[scenario]
    js = topology_json("pxh830-two-host.yaml", (("lender", lender_iommu),))
    return size / (memcpy_ps(js, runner, "gpu0", False, size) * 1e-12) / 1e9


@probe
def nvme_added_latency_ns(blocks: int) -> float:
    """D5: how much longer a `blocks`-block read takes on the borrower than on the lender, in steady
    state (the time of the last of three reads, as the experiment times its reads)."""
    from ..experiments import nvme
    lbas = [4096, 8192, 12288]
    return (nvme.read("NatRem", "borrower", lbas, blocks)[0] - nvme.read("NatLoc", "lender", lbas, blocks)[0])


@probe
def rdma_MBps(method: str, size: int) -> float:
    """R1/R2: host B's transfer into host A's buffer through the PEX8749 NT port, MB/s."""
    from ..experiments._rdma import sweep
    return sweep([method], [size])[method, size]


@probe
def vm_pingpong_pair_ns(a: str, b: str) -> tuple[float, float]:
    """D4's ping-pong round trips of two expansion-chassis scenarios (000 §7.3, Fig 18)."""
    from ..experiments import vm
    return vm.round_trip_ns(a), vm.round_trip_ns(b)


@probe
def vm_transfer_pair_GBps(a: str, b: str, size: int) -> tuple[float, float]:
    """D4's GPU-to-GPU bandwidth of two expansion-chassis scenarios at `size` (000 §7.3, Fig 16)."""
    from ..experiments import vm
    return tuple(size / (vm.transfer_ps(n, size) * 1e-12) / 1e9 for n in (a, b))


def _engine(topology: str, device: str):
    """`topology` built with `device` allowed to master the bus (its firmware's DMA, no driver)."""
    from ..experiments import shipped
    f = shipped(topology).build()
    f.set_bus_master(device, True)
    return f


@probe
def engine_dma_read_ns(topology: str, device: str, ram: str, size: int) -> float:
    """pcie-bench's LAT_DMA_RD (Neugebauer et al., SIGCOMM 2018, §5): one DMA read of `size` bytes
    of host RAM by `device`, from its engine deciding on it to the data in hand: the engine's issue
    time, the read on the path (warm: the IOTLB, where there is one, already holds the page), and
    the engine's completion time, which is what the GPU and NVMe actors charge around a read."""
    f = _engine(topology, device)
    issue, done = f.engine_ps(device)
    return (issue + f.dma(device, ram, size, write=False, warm=True).time_ps + done) / 1000


@probe
def engine_dma_read_GBps(topology: str, device: str, ram: str, size: int, count: int) -> float:
    """pcie-bench's BW_DMA_RD: `count` DMA reads of `size` bytes back to back, as many in flight as
    the device's tags allow (one stream of reads of at most its Max_Read_Request_Size), GB/s."""
    t = _engine(topology, device).dma(device, ram, size * count, write=False, warm=True)
    return size * count / (t.time_ps * 1e-12) / 1e9


@probe
def gpu_memcpy_ns(scenario: str, size: int, dtoh: bool) -> float:
    """One synchronous cudaMemcpy of `size` bytes by D1's driver in `scenario` (bandwidth.SCENARIOS),
    from the call to its return: the runtime's CPU time, the doorbell, the GPFIFO and methods
    fetches, the copy and the semaphore the driver polls."""
    from ..experiments._gpu import memcpy_ps, topology_json
    from ..experiments.bandwidth import SCENARIOS
    runner, lender_iommu = SCENARIOS[scenario]
    js = topology_json("pxh830-two-host.yaml", (("lender", lender_iommu),))
    return memcpy_ps(js, runner, "gpu0", dtoh, size) / 1000


@probe
def nvme_read_ns(scenario: str, runner: str, blocks: int) -> float:
    """D5's read of `blocks` 512-byte blocks in `scenario` from the call to the data in hand, in
    steady state (the last of three reads, as nvme_added_latency_ns times them)."""
    from ..experiments import nvme
    return nvme.read(scenario, runner, [4096, 8192, 12288], blocks)[0]


# pcie-bench's NFP6000 on each corpus host (params/corpus/corpus.yaml `hosts`): the shipped
# testbed with the host's CPU profile, link, MPS and MRRS (and the current overrides).
PCIE_BENCH_TESTBED = "pcie-bench-nfp6000.yaml"
PCIE_BENCH_RAM = "host.ram+0x1000000"


def _corpus_host(setup: dict):
    f = _corpus_topology(json.dumps(setup, sort_keys=True), overrides_key()).build()
    f.set_bus_master("nfp0", True)
    return f


@functools.lru_cache(maxsize=64)
def _corpus_topology(setup: str, overrides: str):
    """The testbed set up as corpus host `setup` (JSON) under the current overrides (`overrides`,
    their key: a fit's probes at one point share it). Never edited: each probe builds its own fabric."""
    from ..experiments import shipped
    setup = json.loads(setup)
    topo = shipped(PCIE_BENCH_TESTBED)
    topo.hosts[0].cpu, topo.hosts[0].iommu = setup["profile"], bool(setup["iommu"])
    topo.links[0].gen, topo.links[0].width = int(setup["gen"]), int(setup["width"])
    return topo.with_params({"devices": {"nfp0": {"max_payload": int(setup["mps"]), "max_read_request": min(int(setup["mrrs"]), 4096)}}},
                            origin="params/corpus/corpus.yaml host setup")


@probe
def nfp_dma_read_ns(host: str, setup: dict, quantity: str, size: int) -> float:
    """pcie-bench's LAT_DMA_RD on corpus host `host`: one DMA read of `size` bytes by the NFP's
    engine, issue to data in hand: as engine_dma_read_ns, with the engine's intake of the read's
    lines (`dma_read_line_ps`)."""
    f = _corpus_host(setup)
    issue, done = f.engine_ps("nfp0", size)
    return (issue + f.dma("nfp0", PCIE_BENCH_RAM, size, write=False, warm=True).time_ps + done) / 1000


# Bytes a bandwidth probe moves: enough transfers that the stream's ramp is under 1% of it.
BW_BYTES = 256 << 10


@probe
def nfp_dma_Gbps(host: str, setup: dict, quantity: str, size: int) -> float:
    """pcie-bench's BW_DMA_RD / BW_DMA_WR on corpus host `host`: back-to-back DMA transfers of
    `size` bytes each (reads: as many in flight as the NFP's tags allow), Gb/s."""
    total = max(BW_BYTES // size, 256) * size
    t = _corpus_host(setup).dma("nfp0", PCIE_BENCH_RAM, total, write=quantity == "dma_write_bw", warm=True, transfer=size)
    return total * 8 / (t.time_ps * 1e-12) / 1e9
