//! The static picture after building and enumeration: hosts, the tree of ports in each host's
//! PCIe domain, functions with their BARs, and links. Software-programmable state (IOMMU, NTB,
//! config space, memory) lives in its own modules and is owned by `Fabric`.

use crate::params::CpuProfile;
use crate::spec::LinkKind;
use devlend_wire::Bdf;

pub type HostId = u16;
pub type NodeId = u32;
pub type FuncId = u32;
pub type LinkId = u32;

/// A half-open address range [start, end).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    pub fn new(start: u64, size: u64) -> Range {
        Range { start, end: start + size }
    }
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }
    pub fn size(&self) -> u64 {
        self.end - self.start
    }
    pub fn overlaps(&self, o: &Range) -> bool {
        self.start < o.end && o.start < self.end
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}-{:#x}", self.start, self.end.saturating_sub(1))
    }
}

#[derive(Clone)]
pub struct Host {
    pub name: String,
    pub cpu_name: String,
    pub cpu: CpuProfile,
    pub ram: u64,
    /// RAM as it appears in the physical address map (low part below the 32-bit hole, high part from 4 GiB).
    pub ram_regions: Vec<Range>,
    pub mmio32: Range,
    pub mmio64: Range,
    pub msi: Range,
    pub iommu: bool,
    pub rc: NodeId,
    pub root_ports: Vec<NodeId>,
    pub spec_path: String,
}

impl Host {
    pub fn in_ram(&self, addr: u64) -> bool {
        self.ram_regions.iter().any(|r| r.contains(addr))
    }
    /// Highest physical address + 1 this host can decode.
    pub fn phys_limit(&self) -> u64 {
        1u64 << self.cpu.phys_addr_bits
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    RootComplex,
    RootPort {
        index: u8,
    },
    SwitchUp {
        switch: u32,
    },
    SwitchDown {
        switch: u32,
        index: u8,
    },
    Endpoint {
        device: u32,
    },
    Ntb {
        ntb: u32,
    },
    /// A port of an NTB cluster switch (in no host's domain).
    ClusterPort {
        switch: u32,
        index: u8,
    },
}

impl NodeKind {
    /// Bridges that face downstream: a link below them leads to a child component.
    pub fn faces_down(self) -> bool {
        matches!(self, NodeKind::RootPort { .. } | NodeKind::SwitchDown { .. })
    }
    pub fn is_bridge(self) -> bool {
        matches!(self, NodeKind::RootPort { .. } | NodeKind::SwitchDown { .. } | NodeKind::SwitchUp { .. })
    }
}

/// Resources of a PCI-to-PCI bridge (root port or switch port) after enumeration.
#[derive(Clone, Copy, Debug, Default)]
pub struct BridgeRes {
    pub bdf: Bdf,
    pub secondary: u8,
    pub subordinate: u8,
    /// Non-prefetchable memory window (32-bit).
    pub mem: Option<Range>,
    /// Prefetchable memory window (64-bit).
    pub pref: Option<Range>,
}

impl BridgeRes {
    pub fn claims(&self, addr: u64) -> bool {
        self.mem.is_some_and(|r| r.contains(addr)) || self.pref.is_some_and(|r| r.contains(addr))
    }
    pub fn claims_bus(&self, bus: u8) -> bool {
        bus >= self.secondary && bus <= self.subordinate
    }
}

#[derive(Clone)]
pub struct Node {
    pub kind: NodeKind,
    /// Component name (host, switch, device or NTB) and port name, as users write them.
    pub component: String,
    pub port: String,
    pub host: HostId,
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    /// The link to the parent, for nodes directly below a root port or switch downstream port.
    pub uplink: Option<LinkId>,
    pub bridge: BridgeRes,
    /// Functions of an endpoint or NTB (function 0 first, then other functions, then VFs).
    pub functions: Vec<FuncId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    pub index: u8,
    pub size: u64,
    pub bits: u8,
    pub pref: bool,
    pub addr: u64,
}

impl Bar {
    pub fn range(&self) -> Range {
        Range::new(self.addr, self.size)
    }
    /// 64-bit prefetchable BARs go into the bridges' prefetchable (high) window, the rest below 4 GiB.
    pub fn goes_high(&self) -> bool {
        self.bits == 64 && self.pref
    }
    pub fn describe(&self) -> String {
        format!("{}-bit {}", self.bits, if self.pref { "prefetchable" } else { "non-prefetchable" })
    }
}

#[derive(Clone)]
pub struct Function {
    pub node: NodeId,
    pub name: String,
    pub bdf: Bdf,
    /// Config-space class code (base class, sub-class, programming interface).
    pub class_code: u32,
    pub vendor: u16,
    pub device_id: u16,
    /// For SR-IOV virtual functions: the VF number and the physical function.
    pub vf: Option<(u16, FuncId)>,
    pub bars: Vec<Bar>,
    pub msix_vectors: u16,
    /// JSON pointer of the function's BAR list in the description, for error messages.
    pub spec_path: String,
}

impl Function {
    pub fn bar_at(&self, addr: u64) -> Option<&Bar> {
        self.bars.iter().find(|b| b.range().contains(addr))
    }
}

#[derive(Clone)]
pub struct Link {
    pub up: NodeId,
    pub down: NodeId,
    pub gen: u8,
    pub width: u8,
    pub kind: LinkKind,
    pub spec_path: String,
}
