"""Errors shown to users: one clear message naming the file, line, field and what was expected."""

from __future__ import annotations


class DevlendError(Exception):
    """Base class of every error devlend raises on purpose."""


class TopologyError(DevlendError):
    """A topology description that cannot be built.

    ``file``/``line``/``column`` locate the offending field when the description came from a
    file; ``field`` is the dotted path inside the description (``devices[3].functions[0].bars[1].size``).
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None):
        self.message, self.file, self.line, self.column, self.field = message, file, line, column, field
        super().__init__(self.format())

    def format(self) -> str:
        where = self.file or "<topology>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class FabricError(DevlendError):
    """A request to the live fabric that cannot be carried out (unknown name, bad argument)."""


class DmaFault(DevlendError):
    """A write or read that did not (fully) reach memory: IOMMU fault, unsupported request,
    requester-ID LUT miss, unmapped NTB window. ``failure`` holds the structured record and
    ``delivered`` how many bytes did land."""

    def __init__(self, failure: dict, delivered: int = 0):
        self.failure, self.delivered = failure, delivered
        super().__init__(failure.get("message", str(failure)))


class WorkloadError(DevlendError):
    """A workload a run cannot carry out: an address no route reaches (``kind`` "unreachable",
    ``failure`` the structured record), zero bytes ("invalid"), or a run that cannot finish."""

    def __init__(self, message: str, kind: str = "invalid", failure: dict | None = None):
        self.kind, self.failure = kind, failure
        super().__init__(message)


class WorkloadValueError(WorkloadError, ValueError):
    """A workload argument of the right type but outside what it can be (a time that is not finite,
    negative or past 2^64-1 ps; a count past 2^64-1): ``field`` names it."""

    def __init__(self, message: str, field: str):
        self.field = field
        super().__init__(message, "invalid")


class WorkloadTypeError(WorkloadError, TypeError):
    """A workload argument of the wrong type (a string where a number goes): ``field`` names it."""

    def __init__(self, message: str, field: str):
        self.field = field
        super().__init__(message, "invalid")


class NvmeStatusError(DevlendError):
    """An NVMe command completed with an error status (NVMe 1.3 §4.6.1.2.1), e.g. 0x80 LBA Out of
    Range: ``opcode`` (0x01 write, 0x02 read), ``lba`` and ``status`` name the command."""

    def __init__(self, message: str, *, opcode: int, lba: int, status: int):
        self.opcode, self.lba, self.status = opcode, lba, status
        super().__init__(message)


class DeviceError(DevlendError):
    """A device model, or its run on a machine, that failed (000's GPU and NVMe runs). ``kind``
    names the case: "fabric" or "host" (a name the topology lacks, borrowing, the kernel),
    "params" (a hardware constant), "no-function", "no-bar", "outside-memory", "copy-size", "dma"
    (the GPU model; "dma": a load or store of its SMs that the fabric refused), "gpu" or "nvme" (a driver), "kernel" (a ping-pong kernel did not finish),
    "mismatch" (data that arrived differs from what was sent), "machine" (a thread stuck or failed),
    "not-served" (a device of a kind with no driver for what was asked: fio on a GPU)."""

    def __init__(self, message: str, kind: str):
        self.kind = kind
        super().__init__(message)


class XenIbError(DevlendError):
    """A Xen-IB testbed or benchmark (004) that cannot be built or run. ``kind`` names the case
    ("unknown_name": a configuration, mode or access path; "bad_size", "zero_count": a benchmark
    argument; "verb": a verb failed, ``status`` its errno name such as "EINVAL"; "completion": a
    work request completed in error; "topology", "fabric", "host", "route": the testbed)."""

    def __init__(self, message: str, kind: str, status: str | None = None):
        self.kind, self.status = kind, status
        super().__init__(message)


class HyperTrioError(DevlendError):
    """A HyperTRIO point, grid, QEMU log or .dlt trace (002) that cannot be run or read. The
    message names the place: a log's file and line, a trace's byte and packet, a configuration's
    field, a grid's point. ``kind`` names the case: "unknown_name" (a configuration, workload,
    policy or interleaving), "out_of_range", "geometry" (a cache that does not build),
    "overrides", "io", "log_line", "unknown_event", "trace", "packet", "page", "no_inputs", "no_requests",
    "short_source", "tables", "grid"."""

    def __init__(self, message: str, kind: str):
        self.kind = kind
        super().__init__(message)


U64_END = 1 << 64


class FabricValueError(FabricError, ValueError):
    """A fabric call's argument outside its range (an integer past 2^64-1, negative): ``field`` names it."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(message)


class FabricTypeError(FabricError, TypeError):
    """A fabric call's argument of the wrong type: ``field`` names it."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(message)


def argument_error(method: str, arguments: dict, exc: BaseException) -> FabricError:
    """The devlend error for an argument the Rust core could not take (PyO3 raises OverflowError or
    TypeError while converting it): names the method, the argument and what was expected."""
    for name, v in arguments.items():
        if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v < U64_END:
            return FabricValueError(f"{method}: {name}={v}: expected an integer from 0 to 2^64-1", name)
    for name, v in arguments.items():
        if v is None or isinstance(v, (float, list, dict, tuple, set)):
            return FabricTypeError(f"{method}: {name}={v!r}: expected {_expected(name)}", name)
    return FabricTypeError(f"{method}: {exc}")


def _expected(name: str) -> str:
    if name == "data":
        return "bytes"
    if name in ("requester", "host", "domain", "device", "ntb", "name"):
        return "a name (str)"
    if name == "addr" or name == "iova":
        return "an address (an integer, or a name such as 'gpu0.bar1+0x1000')"
    return "an integer"
