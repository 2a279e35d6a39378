"""devlend: a faithful model of PCIe device sharing across hosts and tenants.

Layers (inner to outer): wire (TLP vocabulary) -> fabric (topology, enumeration, IOMMU, NTB,
routing, memory; Rust) -> engine (timing) -> devices -> host software -> experiments (Python).

Quick start::

    import devlend
    fab = devlend.load("topologies/pxh830-two-host.yaml").build()
    print(fab.route("borrower:cpu", "ntb-borrower.mw1+0x1000").text())
"""

from .errors import DeviceError, DevlendError, DmaFault, FabricError, HyperTrioError, NvmeStatusError, TopologyError, WorkloadError, XenIbError
from .machine import Run
from .pool import Pool, PoolError
from .scenario import Scenario
from .topology import Topology, load, loads

__all__ = ["DeviceError", "DevlendError", "DmaFault", "FabricError", "HyperTrioError", "NvmeStatusError", "TopologyError", "WorkloadError", "XenIbError", "Pool", "PoolError", "Run", "Scenario", "Topology", "load", "loads"]
__version__ = "0.1.0"
