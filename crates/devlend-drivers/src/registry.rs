//! The device types devlend models, keyed by the `kind` of their profile in
//! `params/hardware.toml` (or of a device described by its functions): the one place outside the
//! device models and their drivers that names them. Each type says what it serves; a workload
//! asks for "a device that serves block I/O" ([`check`]), the Python binding lists the kinds
//! (`devlend._core.device_kinds()`, which the topology schema's `kind` is built from), and a new
//! device type is an entry in [`TYPES`] beside its model (devlend-devices), its driver and its
//! run (this crate) and its profile.

use devlend_fabric::spec::DeviceKind;
use devlend_fabric::Fabric;

/// What a device type serves: the workloads that may drive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serves {
    /// Copies between host memory and device memory by the device's copy engine (`gpu_copy`),
    /// and kernels that store into and poll memory (`pingpong`): [`crate::gpu_run`].
    DeviceCopy,
    /// Block reads and writes through submission and completion queues (`fio`):
    /// [`crate::nvme_run`].
    BlockIo,
    /// Packets whose buffers the device translates per tenant (the hyper-tenant NIC, `nic`).
    TenantPackets,
}

/// One device type: its profile kind and what it serves.
#[derive(Debug)]
pub struct DeviceType {
    pub kind: &'static str,
    pub serves: &'static [Serves],
}

/// Every device type with a model, in the order the schema lists them.
pub const TYPES: &[DeviceType] = &[
    DeviceType { kind: "gpu", serves: &[Serves::DeviceCopy] },
    DeviceType { kind: "nvme", serves: &[Serves::BlockIo] },
    DeviceType { kind: "nic", serves: &[Serves::TenantPackets] },
];

/// The kind of a device without a model of its own: BARs that decode, no behaviour behind them.
pub const GENERIC: &str = DeviceKind::GENERIC;

/// Every kind a device may be: the registered types, then [`GENERIC`].
pub fn kinds() -> impl Iterator<Item = &'static str> {
    TYPES.iter().map(|t| t.kind).chain([GENERIC])
}

/// The kinds that serve `s`, as an error names them ("gpu", "gpu or fpga").
pub fn serving(s: Serves) -> String {
    let kinds: Vec<&str> = TYPES.iter().filter(|t| t.serves.contains(&s)).map(|t| t.kind).collect();
    kinds.join(" or ")
}

/// The kind of `device`: its profile's, or for a device described by its functions (an imported
/// device whose IDs devlend does not know) the `kind` its description gives. `None` when no
/// device has that name (an NTB adapter).
pub fn kind_of(fabric: &Fabric, device: &str) -> Option<String> {
    let d = fabric.devices().iter().find(|d| d.name == device)?;
    match &d.profile {
        Some(profile) => devlend_fabric::params::params().device.get(profile).map(|p| p.kind.clone()),
        None => Some(d.kind.as_str().to_string()),
    }
}

/// Whether `device` serves `s`: `Err` with the kind it has (`None`: no device of that name).
pub fn check(fabric: &Fabric, device: &str, s: Serves) -> Result<(), Option<String>> {
    let kind = kind_of(fabric, device);
    let serves = kind.as_deref().and_then(|k| TYPES.iter().find(|t| t.kind == k)).is_some_and(|t| t.serves.contains(&s));
    match serves {
        true => Ok(()),
        false => Err(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_kind_is_registered() {
        for (name, p) in &devlend_fabric::params::params().device {
            assert!(kinds().any(|k| k == p.kind), "profile {name}: kind {} is not in the registry", p.kind);
        }
    }

    #[test]
    fn every_registered_kind_has_a_profile_so_the_fabric_takes_it() {
        for t in TYPES {
            assert!(devlend_fabric::params::params().device.values().any(|p| p.kind == t.kind), "{}: no profile of this kind", t.kind);
        }
    }

    #[test]
    fn each_service_is_served_and_named() {
        assert_eq!(serving(Serves::DeviceCopy), "gpu");
        assert_eq!(serving(Serves::BlockIo), "nvme");
        assert_eq!(serving(Serves::TenantPackets), "nic");
    }

    #[test]
    fn a_drive_serves_block_io_and_not_copies() {
        let f = devlend_fabric::build_json(include_str!("../tests/b2b.json")).unwrap();
        assert_eq!(check(&f, "nvme0", Serves::BlockIo), Ok(()));
        assert_eq!(check(&f, "nvme0", Serves::DeviceCopy), Err(Some("nvme".into())));
        assert_eq!(check(&f, "no-such", Serves::BlockIo), Err(None));
    }
}
