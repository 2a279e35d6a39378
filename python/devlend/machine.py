"""Several workloads at once on one clock (the engine's Machine): timing-only DMA streams that
share links, credits and tags the way concurrent DMA engines or tenants do.

    run = fab.machine()
    run.stream("a", "gpu0", "ntb-l.mw1", 16 << 20)
    run.stream("b", "gpu0", "ntb-l.mw1+0x1000000", 16 << 20, write=False)
    run.run()
    run.results()      # one row per stream: start, end, bandwidth
    run.link_stats()   # one row per link direction that carried TLPs

The run works on a copy of the fabric as it is when ``machine()`` is called.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Union

from . import _core
from . import checks
from .errors import U64_END, FabricError, WorkloadError, WorkloadTypeError, WorkloadValueError

if TYPE_CHECKING:
    import pandas as pd

    from .fabric import Fabric

Addr = Union[int, str]


def _call(fn, *a):
    try:
        return fn(*a)
    except _core.MachineError as e:
        kind, message, failure = e.args
        raise WorkloadError(message, kind, json.loads(failure) if failure else None) from None
    except _core.FabricError as e:
        raise FabricError(str(e)) from None
    except TypeError as e:  # an argument the core cannot take; PyO3's message names it ("argument 'runner': ...")
        raise WorkloadTypeError(str(e), None) from None
    except (OverflowError, ValueError) as e:
        raise WorkloadValueError(str(e), None) from None


class Run:
    """Streams started on one machine, run together. Times are in nanoseconds (float)."""

    def __init__(self, fabric: "Fabric"):
        self._m = _core.Machine(fabric._core)
        self._requesters: list[str] = []

    def stream(self, name: str, requester: str, addr: Addr, nbytes: int, *, write: bool = True, at_ns: float = 0) -> int:
        """Start `nbytes` of max-payload writes (or max-read-request reads) by `requester` at
        `addr`, at `at_ns`. Raises WorkloadError when the address is unreachable or nbytes is 0."""
        what = f"workload {name}"
        if isinstance(nbytes, int) and not isinstance(nbytes, bool) and not 0 <= nbytes < U64_END:
            raise WorkloadValueError(f"{what}: nbytes={nbytes}: bytes must be from 0 to 2^64-1", "nbytes")
        n = checks.count(nbytes, "nbytes", what, WorkloadValueError, WorkloadTypeError)
        at = checks.time_ps(at_ns, "at_ns", what, WorkloadValueError, WorkloadTypeError)
        i = _call(self._m.stream, name, requester, addr, n, bool(write), at)
        self._requesters.append(requester)
        return i

    def run(self) -> "Run":
        """Run until every stream has ended."""
        _call(self._m.run)
        return self

    @property
    def now_ns(self) -> float:
        return self._m.now_ps() / 1000

    def params(self) -> dict:
        """The effective parameters (the topology's overrides merged in) and devlend's version;
        ``results()`` carries them as ``DataFrame.attrs["params"]``."""
        return dict(self._m.params())

    def results(self) -> "pd.DataFrame":
        """One row per stream: name, requester, addr, bytes, write, start_ns, end_ns, time_ns, GBps."""
        import pandas as pd
        rows = []
        for (name, addr, nbytes, write, start, end), req in zip(self._m.streams(), self._requesters):
            t = None if end is None else end - start
            rows.append({"name": name, "requester": req, "addr": addr, "bytes": nbytes, "write": write,
                         "start_ns": start / 1000, "end_ns": None if end is None else end / 1000,
                         "time_ns": None if t is None else t / 1000,
                         "GBps": None if not t else nbytes / (t * 1e-12) / 1e9})
        df = pd.DataFrame(rows, columns=["name", "requester", "addr", "bytes", "write", "start_ns", "end_ns", "time_ns", "GBps"])
        df.attrs["params"] = self.params()
        return df

    def link_stats(self) -> "pd.DataFrame":
        """One row per link direction that carried TLPs: link ("comp.port -> comp.port"), TLPs,
        wire bytes, payload bytes, utilisation (busy / elapsed run time), credit stall and mean
        queueing delay per TLP (ns)."""
        import pandas as pd
        elapsed = self._m.now_ps()
        rows = []
        for link, down, a, b, tlps, wire, payload, busy, queue, stall in self._m.port_stats():
            rows.append({"link": f"{a} -> {b}", "link_index": link, "towards_down": down, "tlps": tlps,
                         "bytes": wire, "payload": payload, "utilisation": busy / elapsed if elapsed else 0.0,
                         "busy_ns": busy / 1000, "credit_stall_ns": stall / 1000, "mean_queue_ns": queue / tlps / 1000})
        return pd.DataFrame(rows, columns=["link", "link_index", "towards_down", "tlps", "bytes", "payload", "utilisation",
                                           "busy_ns", "credit_stall_ns", "mean_queue_ns"])

    def sim_stats(self) -> dict:
        """What the engine did: TLP-hops and events simulated, most TLP records alive at once."""
        hops, events, peak = self._m.sim_stats()
        return {"tlp_hops": hops, "events": events, "peak_tlps": peak}

    def analytic(self, requester: str, addr: Addr, *, write: bool = True) -> dict:
        """The analytic model for one stream alone: its saturated bandwidth and its bottleneck
        link's capacity (bytes/s), from the fabric this run was made from."""
        stream, link = _call(self._m.analytic, requester, addr, write)
        return {"stream_Bps": stream, "link_Bps": link}
