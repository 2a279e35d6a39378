"""devlend: a faithful model of PCIe device sharing across hosts and tenants.

Layers (inner to outer): wire (TLP vocabulary) -> fabric (topology, enumeration, IOMMU, NTB,
routing, memory; Rust) -> engine (timing) -> devices -> host software -> experiments (Python).

Quick start (run as a doctest by tests/test_docs.py, from the repository's root)::

    >>> import devlend
    >>> fab = devlend.load("topologies/pxh830-two-host.yaml").build()
    >>> print(fab.route("borrower:cpu", "ntb-b.mw0+0x10").text().splitlines()[-1])
      => delivered to gpu0 BAR1 offset 0x10 (host lender); 5 hops, 0 root complex(es), 1 NTB crossing(s)
    >>> fab.write("borrower:cpu", "ntb-b.mw0+0x10", b"hello")   # a CPU store through the NTB: 5 bytes ...
    5
    >>> fab.read("lender:cpu", "gpu0.bar1+0x10", 5)               # ... lands in the lender's GPU
    b'hello'
"""

from .errors import DeviceError, DevlendError, DmaFault, FabricError, HyperTrioError, NvmeStatusError, TopologyError, WorkloadError, XenIbError

# Imported on first use (PEP 562), so that `import devlend.cli` and `devlend --help` do not pay
# for the extension and the topology models (pydantic) before a command needs them.
_LAZY = {"Run": "machine", "Pool": "pool", "PoolError": "pool", "Scenario": "scenario", "Topology": "topology",
         "load": "topology", "loads": "topology"}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'devlend' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = ["DeviceError", "DevlendError", "DmaFault", "FabricError", "HyperTrioError", "NvmeStatusError", "TopologyError", "WorkloadError", "XenIbError", "Pool", "PoolError", "Run", "Scenario", "Topology", "load", "loads"]
__version__ = "0.1.0"
