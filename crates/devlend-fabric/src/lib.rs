//! # devlend-fabric: the PCIe cluster as a static, programmable picture
//!
//! The fabric layer of devlend, above the wire (see the README's architecture section). A
//! topology description ([`spec::TopologySpec`]) is built into a [`fabric::Fabric`]: every host
//! is its own PCIe domain with a root complex, root ports, switches, endpoints and NTB adapters;
//! [`enumerate`] numbers buses and assigns BARs and bridge windows as Linux does; [`route`]
//! answers "where does this go?" for any requester and address, hop by hop, through switches,
//! root complexes, IOMMUs and NTBs; [`memory`] stores the bytes that land. Software programs the
//! fabric only through the Linux-named interfaces on `Fabric` (NTB API, IOMMU API, PCI config
//! space).
//!
//! ## What outer layers may ask and change
//!
//! `Fabric`'s fields are this crate's own. Outer layers (engine, host, devices, ...):
//! - **ask** (`access`): `name`, `hosts`/`host(id)`, `nodes`/`node(id)`, `funcs`/`func(id)`,
//!   `links`, `ntbs`/`ntb(id)`, `switches`, `devices`, `iommus`/`iommu(host)`,
//!   `config_state(func)`, `ram(host)`, `bar_mem(func, bar)`, `events`, `tuning`,
//!   `cluster_switches`, `trained_down`, `route_cache_stats`; and by name: `host_id`, `func_id`,
//!   `ntb_id`, `requester`, `resolve_expr`/`resolve_for`; where a TLP goes: `route_tlp` (the
//!   TLP's header, cached), `walk_tlp` (uncached), `route_generation`, and by address `route`,
//!   `lookup`, `route_uncached` (all in [`route`]);
//! - **change**, by what the change is: memory as a requester would (`write`, `read`), or as
//!   one TLP of a flow lands along the route the flow carries (`route_to_carry`, `write_tlp`,
//!   `read_tlp`, `arrival_along`; [`route`]); the Linux NTB API (`ntb_mw_set_trans`,
//!   `peer_db_set`, `ntb_peer_spad_write`, ..., `ntb_api`), the IOMMU API
//!   (`iommu_domain_alloc`, `iommu_attach`, `iommu_map`, ..., [`iommu`]), interrupt remapping
//!   (`intremap`), config space (`config_write`, `set_bus_master`); injected faults (`link`,
//!   `aer`: `ntb_link_disable`, `port_disable`, `func_hang`, `flr`, ...); and the few direct
//!   changes a model needs (`access`): `ntb_mut(id)` (an NTB register face; drops cached routes),
//!   `bar_store` (a device model's own registers), `ram_store` and `attach_ram` (RAM set up
//!   without a TLP), `record_event` and `retain_events` (the event log as a kernel consumes it).
//!
//! A TLP's walk is three files of this crate: [`iommu`] (the IOMMU whole: its tables,
//! `Iommu::map`, the IOMMU API, and the router's IOMMU piece that translates a request),
//! [`route`] (the router whole: the route cache and carried routes, the walk, one `mod` per
//! kind of component, the NTB's translation on the path, the bytes stored along a route) and
//! [`memory`] (the sparse memory the bytes land in). [`fabric`] keeps `Fabric`'s struct,
//! assembly, name lookups, config space and set-up programs, off the walk.
//!
//! Read seeds 000 §2 and §4-6 and 003 §2 for the hardware this models; each module's docs say
//! what it takes from them.
//!
//! Build two hosts joined by an NTB, route a CPU store to host `a`'s own RAM, and see an
//! unprogrammed NTB window refuse one:
//!
//! ```
//! use devlend_fabric::route::{Failure, Outcome, Requester};
//! use devlend_wire::Access;
//!
//! let json = devlend_fabric::fixtures::two_hosts_pxh830("amd-epyc", 1 << 30, false, false);
//! let mut f = devlend_fabric::build_json(&json)?;
//! let cpu = Requester::Cpu(f.host_id("a")?);
//! let ram = f.resolve_expr("a.ram+0x1000")?;
//! assert!(matches!(f.route(cpu, ram, Access::Write).outcome, Outcome::Delivered(_)));
//! let window = f.resolve_expr("na.mw0")?;
//! let refused = f.route(cpu, window, Access::Write);
//! assert!(matches!(refused.outcome, Outcome::Failed(Failure::NtbUnmapped { .. })), "{refused:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod access;
pub mod aer;
pub mod build;
pub mod cluster;
pub mod config;
mod decoding;
pub mod enumerate;
pub mod error;
pub mod events;
pub mod fabric;
pub mod fixtures;
pub mod intremap;
pub mod iommu;
pub mod link;
pub mod memory;
pub mod model;
pub mod ntb;
pub mod ntb_api;
pub mod params;
pub mod programmed;
pub mod report;
pub mod route;
pub mod show;
pub mod spec;
pub mod transfer;
pub mod tuning;

pub use error::{BadAddress, BadIommu, BadNtb, BadRequest, FabricError, SpecError, SpecFault, Unknown};
pub use fabric::Fabric;
pub use route::{Arrival, CarriedRoute, Hop, HopKind, Outcome, Requester, Route, Target};

/// Build and enumerate a fabric from a description, then apply its setup section.
pub fn build(spec: &spec::TopologySpec) -> Result<Fabric, SpecError> {
    let mut f = build::build(spec)?;
    f.apply_setup(&spec.setup)?;
    Ok(f)
}

/// Parse a JSON description (as the Python front end produces) and build it.
pub fn build_json(json: &str) -> Result<Fabric, SpecError> {
    let spec: spec::TopologySpec = serde_json::from_str(json).map_err(|e| SpecError::at("", error::JsonError::from(e)))?;
    build(&spec)
}
