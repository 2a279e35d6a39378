"""Scenario files: a topology and a timeline of Device Lending actions and workloads, run on one
clock (``devlend run SCENARIO.yaml``, or ``devlend.scenario_file.load(path).run()``).

    name: gpu-and-nvme
    topology: ../topologies/four-server-cluster.yaml      # relative to this file
    timeline:
      - {at: 0, action: borrow, borrower: server1, device: gpu2}
      - {at: 1 us, action: gpu_copy, name: copy, runner: server1, gpu: gpu2, direction: htod, bytes: 64 MiB}
      - {at: 1 us, action: fio, name: reads, runner: server3, drive: nvme1, rw: randread, iodepth: 8, ios: 2000}
      - {at: 50 ms, action: return, device: gpu2}

A ``params`` section (as a topology's) overrides hardware constants for this scenario only.
Times take ns, us, ms or s (a bare number is ns); actions must not go back in time. Actions:
``borrow`` (borrower, device) and ``return`` (device, optional borrower); workloads, each with a
``name``: ``stream`` (requester, addr, bytes, write), ``gpu_copy`` (runner, gpu, direction htod|dtoh,
bytes), ``fio`` (runner, drive, and fio's job options as ``devlend fio`` reads them: rw, bs, bssplit,
iodepth, numjobs, size, offset, runtime, time_based, ramp_time, rwmixread, thinktime, rate_iops...;
``ios`` is fio's number_ios; an asynchronous ioengine, libaio, unless one is given), ``pingpong`` (runner,
gpu_a, gpu_b, via peer|ram, rounds), ``ntb_perf`` (runner, peer, use_dma, threads, chunk_order,
total_order) and ``nic`` (runner, nic, config base|hypertrio, tenants, duration, profile, order,
packets_per_tenant, epoch: the hyper-tenant NIC of 002, ``Scenario.nic``); ``fault`` (kind, target): a fault at that time (kinds in ``devlend.pool.FAULT_KINDS``:
link-down/link-up of an NTB, host-crash/host-reboot, surprise-removal, port-down/port-up of a
device's slot, a root port HOST.rpN or a switch port COMPONENT.PORT, completion-timeout, poisoned of a device
or of a 4 KiB page of a host's RAM, HOST.ram+OFFSET).

A fault strikes the pool (lends it ends are over: a later ``return`` of such a device is skipped)
and the machine at its time: flows in flight stop where it cuts them, and a workload the fault
breaks fails with what its driver saw (an error, or a wait that never ends).

How it runs: the borrows and returns are checked in order on a ``devlend.Pool`` of the topology, so
a device not in the topology, already borrowed, or unreachable, is an error at its line. The
workloads run together on ``devlend.Scenario`` (one machine, one clock), and the borrows and returns
happen on that machine at their times (``Scenario.borrow(at_ns=)``, ``Scenario.return_device``): a
workload that drives a device of another host needs that host to hold it borrowed at its start; a
``return`` at t' needs every workload on the device to have ended by t' (else an error at its line
naming the workload), undoes every mapping of the lend, and another host may borrow the device
afterwards (python/devlend/scenarios/four-server-gpu-handed-over.yaml).
"""

from __future__ import annotations

import os
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .errors import TopologyError, WorkloadError
from .pool import FAULT_KINDS, Pool, PoolError
from .topology import LENDING_OPS, Params, Size, Topology
from .topology import load as load_topology
from .yamlpos import document_path, dotted, load_with_marks, locate

_TIME = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)\s*(ps|ns|us|ms|s)?\s*$")
_NS = {"ps": 1e-3, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, None: 1.0}


def parse_time(value: Any) -> float:
    """A time in ns: a number (ns) or a string with a unit ('10 us', '1.5 ms')."""
    if isinstance(value, bool):
        raise ValueError("expected a time such as 0, 500 or '10 us', not a boolean")
    if isinstance(value, (int, float)):
        return _in_range(value, value)
    m = _TIME.match(value) if isinstance(value, str) else None
    if not m:
        raise ValueError(f"{value!r} is not a time: expected a number of ns or a number with a unit (ps, ns, us, ms, s)")
    return _in_range(value, float(m.group(1)) * _NS[m.group(2)])


def _in_range(given: Any, ns: float) -> float:
    """A time the machine's clock can hold: finite, not negative, below 2^64 ps (about 213 days)."""
    if not math.isfinite(ns):
        raise ValueError(f"time {given} is not a finite number")
    if ns < 0:
        raise ValueError(f"time {given} is negative")
    if ns * 1000 >= 1 << 64:
        raise ValueError(f"time {given} is past the clock's end: expected at most {((1 << 64) - 1) / 1e12:.4g} s")
    return float(ns)


Time = Annotated[float, BeforeValidator(parse_time)]


class ScenarioFileError(TopologyError):
    """A scenario file that cannot be run: file, line and field of the offending entry."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BorrowAction(_Model):
    at: Time
    action: Literal["borrow"]
    borrower: str
    device: str
    dma_window: Optional[Size] = None


class ReturnAction(_Model):
    at: Time
    action: Literal["return"]
    device: str
    borrower: Optional[str] = None


class StreamWork(_Model):
    at: Time
    action: Literal["stream"]
    name: str
    requester: str = Field(description="HOST:cpu or a function name")
    addr: Union[int, str]
    bytes: Size
    write: bool = True


class GpuCopyWork(_Model):
    at: Time
    action: Literal["gpu_copy"]
    name: str
    runner: str
    gpu: str
    direction: Literal["htod", "dtoh"]
    bytes: Size


class FioWork(_Model):
    """An fio job: besides these, any of fio's job options (rw, bs, bssplit, iodepth, numjobs, size,
    offset, runtime, time_based, rwmixread, thinktime, rate_iops, ...), read by the same parser as
    ``devlend fio``'s job files (devlend.fio.jobfile.apply); ``ios`` is fio's ``number_ios``."""
    model_config = ConfigDict(extra="allow")
    at: Time
    action: Literal["fio"]
    name: str
    runner: str
    drive: str

    def options(self) -> list[tuple[str, Optional[str]]]:
        """The job options as written, as fio's text (a flag with no value: None)."""
        def text(v: Any) -> Optional[str]:
            if v is None or isinstance(v, str):
                return v
            return ("1" if v else "0") if isinstance(v, bool) else str(v)
        return [("number_ios" if k == "ios" else k, text(v)) for k, v in (self.model_extra or {}).items()]


class PingPongWork(_Model):
    at: Time
    action: Literal["pingpong"]
    name: str
    runner: str
    gpu_a: str
    gpu_b: str
    via: Literal["peer", "ram"] = "peer"
    rounds: int = Field(default=100, ge=1)


class NtbPerfWork(_Model):
    at: Time
    action: Literal["ntb_perf"]
    name: str
    runner: str
    peer: str = Field(description="the host whose memory the runner writes through the NTB joining them")
    use_dma: bool = False
    threads: int = Field(default=1, ge=1)
    chunk_order: int = Field(default=19, ge=0, le=30)
    total_order: int = Field(default=20, ge=0, le=30)


class NicWork(_Model):
    at: Time
    action: Literal["nic"]
    name: str
    runner: str = Field(description="the tenants' host (its root complex holds their IOMMU); it borrows the NIC if it sits elsewhere")
    nic: str
    config: Literal["base", "hypertrio"]
    tenants: int = Field(ge=1, le=1024)
    duration: Time = Field(description="how long packets arrive")
    profile: str = "iperf3"
    order: str = "RR1"
    packets_per_tenant: Optional[int] = Field(default=None, ge=1)
    epoch: Time = Field(default=5000.0, description="how often the loaded round trip is fed back to the HyperTRIO pipeline")


class FaultAction(_Model):
    at: Time
    action: Literal["fault"]
    kind: Literal[tuple(FAULT_KINDS)]  # type: ignore[valid-type]
    target: str = Field(description="what the kind names: an NTB, a host, a device, a root port HOST.rpN or a switch port COMPONENT.PORT")


Entry = Annotated[Union[BorrowAction, ReturnAction, StreamWork, GpuCopyWork, FioWork, PingPongWork, NtbPerfWork, NicWork, FaultAction],
                  Field(discriminator="action")]
_ACTIONS = {"borrow": BorrowAction, "return": ReturnAction, "stream": StreamWork, "gpu_copy": GpuCopyWork, "fio": FioWork,
            "pingpong": PingPongWork, "ntb_perf": NtbPerfWork, "nic": NicWork, "fault": FaultAction}


class ScenarioSpec(_Model):
    name: str
    description: Optional[str] = None
    topology: str = Field(description="topology file, relative to the scenario file")
    timeline: list[Entry] = Field(min_length=1)
    params: Optional[Params] = Field(default=None, description="overrides merged into the topology's params section")
    hygiene: Literal["scrub", "none"] = Field(default="scrub", description="scrub: a returned device is cleared before its next borrower; none: it is not (what real lending may leak)")


@dataclass
class _Where:
    """Where an entry came from, for errors."""
    file: Optional[str]
    marks: dict
    path: tuple

    def error(self, field: Optional[str], message: str) -> ScenarioFileError:
        path = self.path + ((field,) if field else ())
        line, col = locate(self.marks, path) if self.marks else (None, None)
        return ScenarioFileError(message, file=self.file, line=line, column=col, field=dotted(path) or None)


def _validation_error(e: ValidationError, file: str, marks: dict, data: Any) -> ScenarioFileError:
    err = sorted(e.errors(include_url=False), key=lambda x: x["type"] != "extra_forbidden")[0]
    loc = document_path(err["loc"], _ACTIONS)
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        model: Any = ScenarioSpec
        if len(loc) == 3 and loc[0] == "timeline":
            try:
                model = _ACTIONS.get(data["timeline"][loc[1]]["action"])
            except (KeyError, IndexError, TypeError):
                model = None
        msg = f"unknown key '{loc[-1]}'" + (f": expected one of {', '.join(model.model_fields)}" if model else "")
    elif err["type"] == "missing":
        msg = f"required field '{loc[-1]}' is missing"
    elif not isinstance(err.get("input"), (dict, list)):
        msg += f" (got {err.get('input')!r})"
    line, col = locate(marks, loc) if marks else (None, None)
    return ScenarioFileError(msg, file=file, line=line, column=col, field=dotted(loc) or None)


class ScenarioFile:
    """A validated scenario file: its topology and its timeline, ready to run."""

    def __init__(self, spec: ScenarioSpec, topology: Topology, file: Optional[str], marks: dict):
        self.spec, self.topology, self.file, self.marks = spec, topology, file, marks
        self._check_order()

    def with_params(self, overrides: dict, origin: str = "override") -> "ScenarioFile":
        """The same scenario on its topology with `overrides` merged in (see Topology.with_params)."""
        return ScenarioFile(self.spec, self.topology.with_params(overrides, origin), self.file, self.marks)

    def _where(self, i: int) -> _Where:
        return _Where(self.file, self.marks, ("timeline", i))

    def _check_order(self) -> None:
        for i in range(1, len(self.spec.timeline)):
            prev, cur = self.spec.timeline[i - 1].at, self.spec.timeline[i].at
            if cur < prev:
                raise self._where(i).error("at", f"{cur:g} ns is before the previous action's {prev:g} ns: the timeline runs forwards")

    def _steps(self) -> list[tuple[Any, _Where]]:
        """The topology's own borrow/return operations (at 0) and the timeline, in order."""
        topo = [(op, _Where(self.topology._file, self.topology._marks, ("setup", i))) for i, op in self.topology.lending_ops()]
        return topo + [(e, self._where(i)) for i, e in enumerate(self.spec.timeline)]

    def run(self, progress: "Optional[Callable[[float], Any]]" = None) -> "ScenarioRun":
        """Replay the lending on a pool, run the workloads on one machine, check the returns;
        `progress` gets how far the workloads are (0 to 1) as the last stretch runs (Scenario.run)."""
        from .scenario import Scenario
        fabric_only = self.topology.model_copy(update={"setup": [op for op in self.topology.setup if not isinstance(op, LENDING_OPS)]})
        fabric_only._file, fabric_only._marks = self.topology._file, self.topology._marks
        pool = Pool(fabric_only, hygiene=self.spec.hygiene)
        # a fault ends a workload, not the run: every workload gets a row
        sc = Scenario(fabric_only, hygiene=self.spec.hygiene).keep_going()
        holder: dict[str, str] = {}      # device -> borrower now
        uses: dict[str, list[str]] = {}  # device -> workloads driving it
        ended: set[str] = set()          # devices whose lend a fault ended
        for op, where in self._steps():
            kind = getattr(op, "action", getattr(op, "op", None))
            try:
                if kind == "borrow":
                    self._borrow(pool, sc, op, where, holder)
                elif kind == "fault":
                    self._fault(sc, pool, op, where, holder, ended)
                elif kind == "return" and self._name(pool, op.device) in ended:
                    ended.discard(self._name(pool, op.device))
                elif kind == "return":
                    self._return(pool, sc, op, where, holder)
                else:
                    self._workload(sc, pool, op, where, holder, uses)
            except PoolError as e:
                field = {"no-such-host": "borrower", "unreachable": "borrower", "window-too-large": "dma_window"}.get(e.kind, "device")
                raise where.error(field, str(e)) from None
            except WorkloadError as e:
                raise where.error(None, str(e)) from None
        sc.run(progress=progress)
        return ScenarioRun(self, sc, pool, uses)

    def _return(self, pool: Pool, sc: Any, op: Any, where: _Where, holder: dict) -> None:
        """The pool's return (its checks), then the machine's at the action's time: the device's
        workloads must have ended by then; every mapping of the lend is undone."""
        name = self._name(pool, op.device)
        pool.return_device(op.device, op.borrower)
        try:
            sc.return_device(name, at_ns=getattr(op, "at", 0.0), borrower=op.borrower)
        except WorkloadError as e:
            raise where.error("at", str(e)) from None
        holder.pop(name, None)

    @staticmethod
    def _fault(sc: Any, pool: Pool, op: "FaultAction", where: _Where, holder: dict, ended: set) -> None:
        try:
            lost = pool.fault(op.kind, op.target)
            sc.fault(op.kind, op.target, at_ns=op.at)
        except (PoolError, WorkloadError) as e:
            raise where.error("target", str(e)) from None
        for lend in lost:
            holder.pop(lend["device"], None)
            ended.add(lend["device"])

    @staticmethod
    def _name(pool: Pool, device: str) -> str:
        return pool.show(device)["device"]

    def _borrow(self, pool: Pool, sc: Any, op: Any, where: _Where, holder: dict) -> None:
        entry = pool.show(op.device)
        if op.borrower not in entry["visible_to"]:
            pool.connect(entry["lender"], op.borrower)
        if entry["state"] == "not added":
            pool.add(op.device)
        if entry["state"] in ("not added", "unavailable"):
            pool.available(op.device)
        name = entry["device"]
        pool.borrow(op.borrower, op.device, dma_window=op.dma_window)
        try:
            sc.borrow(op.borrower, name, dma_window=op.dma_window, at_ns=getattr(op, "at", 0.0))
        except WorkloadError as e:
            field = "at" if e.kind == "scrubbing" else "dma_window" if op.dma_window is not None else "borrower"
            raise where.error(field, str(e)) from None
        holder[name] = op.borrower

    def _workload(self, sc: Any, pool: Pool, w: Any, where: _Where, holder: dict, uses: dict) -> None:
        if isinstance(w, StreamWork):
            sc.stream(w.name, w.requester, w.addr, w.bytes, write=w.write, at_ns=w.at)
            return
        if isinstance(w, NtbPerfWork):
            sc.ntb_perf(w.name, w.runner, w.peer, use_dma=w.use_dma, threads=w.threads, chunk_order=w.chunk_order,
                        total_order=w.total_order, at_ns=w.at)
            return
        devices = {GpuCopyWork: [("gpu", "gpu")], FioWork: [("drive", "drive")],
                   PingPongWork: [("gpu_a", "gpu_a"), ("gpu_b", "gpu_b")], NicWork: [("nic", "nic")]}[type(w)]
        used = [self._driven_by(pool, w, field, getattr(w, attr), where, holder) for field, attr in devices]
        if isinstance(w, GpuCopyWork):
            sc.gpu_copy(w.name, w.runner, w.gpu, w.direction, w.bytes, at_ns=w.at)
        elif isinstance(w, NicWork):
            sc.nic(w.name, w.runner, w.nic, config=w.config, tenants=w.tenants, duration_ns=w.duration, profile=w.profile,
                   order=w.order, packets_per_tenant=w.packets_per_tenant, epoch_ns=w.epoch, at_ns=w.at)
        elif isinstance(w, PingPongWork):
            sc.gpu_pingpong(w.name, w.runner, w.gpu_a, w.gpu_b, via=w.via, rounds=w.rounds, at_ns=w.at)
        else:
            self._fio(sc, w, where)
        for device in used:
            uses.setdefault(device, []).append(w.name)

    def _fio(self, sc: Any, w: FioWork, where: _Where) -> None:
        """The job from its options (devlend fio's parser, on the drive's capacity), started on the scenario."""
        from .errors import FabricError
        from .fio import jobfile
        try:
            drive = jobfile.capacity(self.topology.to_json(), w.drive)
        except FabricError as e:
            raise where.error("drive", str(e)) from None
        line = locate(where.marks, where.path)[0] if where.marks else None
        try:
            job = jobfile.job_from_options(w.name, w.options(), drive, f"{self.file}:{line}")
        except jobfile.FioOptionError as e:
            written = e.key if e.key in (w.model_extra or {}) else "ios"
            raise where.error(written, e.why) from None
        sc.fio_job(w.name, w.runner, w.drive, job, at_ns=w.at)

    def _driven_by(self, pool: Pool, w: Any, field: str, device: str, where: _Where, holder: dict) -> str:
        """The pool's name of `device`, after checking the workload's runner may drive it at its time
        (a VM drives the devices its description gives it)."""
        vm = next((v for v in self.topology.vms if v.name == w.runner), None)
        if vm is not None:
            if device not in [d.device for d in vm.devices]:
                raise where.error(field, f"VM {vm.name} has no device {device}: a VM's devices come from its description (vms: devices)")
            return device
        try:
            e = pool.show(device)
        except PoolError as err:
            raise where.error(field, str(err)) from None
        lender, by = e["lender"], holder.get(e["device"])
        if lender != w.runner and by != w.runner:
            raise where.error(field, f"{w.runner} has not borrowed {device} at {w.at:g} ns: add a borrow action before this workload")
        if lender == w.runner and by is not None:
            raise where.error(field, f"{device} is lent to {by} at {w.at:g} ns: {lender} cannot drive it")
        return e["device"]


class ScenarioRun:
    """A scenario file's results: the workloads, the links, the parameters."""

    def __init__(self, file: ScenarioFile, scenario: Any, pool: Pool, uses: dict):
        self.file, self.scenario, self.pool, self.uses = file, scenario, pool, uses

    def results(self):
        """One row per workload (Scenario.results() with the device it drives and its runner)."""
        df = self.scenario.results()
        who = {}
        for e in self.file.spec.timeline:
            if isinstance(e, GpuCopyWork):
                who[e.name] = (e.runner, e.gpu)
            elif isinstance(e, FioWork):
                who[e.name] = (e.runner, e.drive)
            elif isinstance(e, StreamWork):
                who[e.name] = (e.requester, str(e.addr))
            elif isinstance(e, PingPongWork):
                who[e.name] = (e.runner, f"{e.gpu_a},{e.gpu_b}")
            elif isinstance(e, NtbPerfWork):
                who[e.name] = (e.runner, e.peer)
            elif isinstance(e, NicWork):
                who[e.name] = (e.runner, e.nic)
        df.insert(2, "runner", [who.get(n, ("", ""))[0] for n in df.name])
        df.insert(3, "device", [who.get(n, ("", ""))[1] for n in df.name])
        return df

    def link_stats(self):
        return self.scenario.link_stats()

    def header(self) -> str:
        return self.scenario.header() + f"; scenario={self.file.spec.name}"

    def provenance(self, command: "Optional[str]" = None) -> dict:
        """How this run was made: the scenario's and its topology's hashes, every override, the effective parameters."""
        return self.scenario.provenance(scenario=self.file.file, command=command)

    def to_csv(self, path: "Union[str, os.PathLike]", links_path: "Union[str, os.PathLike, None]" = None, *,
               provenance: "Optional[dict]" = None) -> None:
        """The workloads (and the links) as CSV, each under the parameters line, ending with the provenance."""
        from .provenance import write_csv
        rec = provenance or self.provenance()
        for p, df in ((path, self.results()), (links_path, self.link_stats())):
            if p is not None:
                write_csv(p, df, rec, self.header())

    def plot(self, path: "Union[str, os.PathLike]", busiest: int = 8, *, provenance: "Optional[dict]" = None) -> None:
        """Per-workload bandwidth and latency, and the utilisation of the busiest link directions
        (the PNG carries the provenance, `provenance` or ``self.provenance()``)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        res, links = self.results(), self.link_stats().nlargest(busiest, "utilisation")
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        axes[0].barh(res.name, res.GBps.fillna(0))
        axes[0].set_xlabel("bandwidth (GB/s)")
        def latency_us(r) -> float:
            if r.kind == "fio":
                return r.lat_mean_us
            if r.rtt_mean_ns == r.rtt_mean_ns:  # a ping-pong: its mean round trip
                return r.rtt_mean_ns / 1000
            return (r.end_ns - r.start_ns) / 1000
        lat = [(r.name, latency_us(r)) for r in res.itertuples() if r.end_ns == r.end_ns]
        axes[1].barh([n for n, _ in lat], [v for _, v in lat])
        axes[1].set_xscale("log")
        axes[1].set_xlabel("latency (us, log): fio mean per I/O, ping-pong mean round trip, else start to end")
        axes[2].barh(links.link, links.utilisation * 100)
        axes[2].set_xlabel(f"utilisation (%), {len(links)} busiest link directions")
        for ax in axes:
            ax.invert_yaxis()
            ax.grid(True, axis="x", alpha=0.3)
        fig.suptitle(f"devlend: scenario {self.file.spec.name} on {self.file.topology.name}")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        from .provenance import stamp_png
        stamp_png(path, provenance or self.provenance())


def loads(text: str, file: str = "<string>") -> ScenarioFile:
    data, marks = load_with_marks(text, file)
    if not isinstance(data, dict):
        raise ScenarioFileError(f"expected a mapping with 'name', 'topology' and 'timeline', got {type(data).__name__}", file=file, line=1)
    try:
        spec = ScenarioSpec.model_validate(data)
    except ValidationError as e:
        raise _validation_error(e, file, marks, data) from None
    base = os.path.dirname(file) if file and not file.startswith("<") else "."
    topo_path = os.path.join(base, spec.topology)
    try:
        topo = load_topology(topo_path)
    except TopologyError as e:
        if e.message in ("no such file",) or e.line is None:
            where = _Where(file, marks, ())
            raise where.error("topology", f"{e.message}: {topo_path}") from None
        raise
    if spec.params:
        topo = _with_own_params(topo, spec.params.model_dump(), file, marks)
    return ScenarioFile(spec, topo, file, marks)


def _with_own_params(topo: Any, params: dict, file: str, marks: dict) -> Any:
    """`topo` with the scenario's own ``params`` merged in, each override named by the file and line
    it sits on (so an error in one points there, as in a topology's own section)."""
    def leaves(path: tuple, value: Any):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from leaves(path + (k,), v)
        else:
            yield path, value
    for path, value in leaves(("params",), params):
        line = marks.get(path, marks.get(path[:2], (None,)))[0]
        topo = topo.with_params({".".join(path[1:]): value}, (file, line))
    return topo


def load(path: "Union[str, os.PathLike]") -> ScenarioFile:
    """Load and validate a scenario file (YAML)."""
    path = os.fspath(path)
    from .inputs import not_regular
    if (kind := not_regular(path)) is not None:
        raise ScenarioFileError(f"is {kind}, expected a scenario file", file=path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise ScenarioFileError(f"cannot read: {e.strerror}", file=path) from None
    return loads(text, path)


__all__ = ["ScenarioFile", "ScenarioRun", "ScenarioFileError", "load", "loads", "parse_time"]
