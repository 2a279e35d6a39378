//! The device types devlend models, keyed by the `kind` of their profile in
//! `params/hardware.toml` (or of a device described by its functions): the one place outside the
//! device models and their drivers that names them. Each type says what it serves; a workload
//! asks for "a device that serves block I/O" ([`check`]), the Python binding lists the kinds
//! (`devlend._core.device_kinds()`, which the topology schema's `kind` is built from), and a new
//! device type is an entry in [`TYPES`] beside its model (devlend-devices), its driver and its
//! run (this crate) and its profile. A type whose driver serves block I/O or device copies also
//! gives, in its entry, the function that makes its device and driver ready for that service
//! (`crate::service`), which the workloads get by the device's kind ([`block_io_of`],
//! [`device_copy_of`]) and never by naming the type.

use crate::error::{DResult, DeviceError};
use crate::service::block::BlockType;
use crate::service::copy::CopyType;
use devlend_fabric::spec::DeviceKind;
use devlend_fabric::Fabric;
use std::sync::RwLock;

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

/// One device type: its profile kind, what it serves, and for the services a workload drives
/// through a driver trait, its entry there (`crate::service`).
#[derive(Debug)]
pub struct DeviceType {
    pub kind: &'static str,
    pub serves: &'static [Serves],
    /// Its drive described, its model and its driver's probe, if it serves block I/O.
    pub block_io: Option<BlockType>,
    /// Its model and its driver's probe, if it serves device copies.
    pub device_copy: Option<CopyType>,
}

/// Every device type with a model, in the order the schema lists them.
pub const TYPES: &[DeviceType] = &[
    DeviceType { kind: "gpu", serves: &[Serves::DeviceCopy], block_io: None, device_copy: Some(crate::gpu_driver::copy::COPY) },
    DeviceType { kind: "nvme", serves: &[Serves::BlockIo], block_io: Some(crate::nvme_driver::block::drive), device_copy: None },
    DeviceType { kind: "nic", serves: &[Serves::TenantPackets], block_io: None, device_copy: None },
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
    let serves = kind.as_deref().is_some_and(|k| serves_as(k, s));
    match serves {
        true => Ok(()),
        false => Err(kind),
    }
}

/// A device type registered while the program runs rather than in [`TYPES`]: a type from outside
/// this crate (a test's own device and driver), with its drivers for the services it serves.
/// The fabric takes a device's kind only when a profile has it: such a type registers its
/// profile and its kind's table first (`devlend_fabric::params::register_profiles`, checked as
/// params/hardware.toml's are), as devlend-workloads' tests do for their RAM disk (`ramdisk`)
/// and copy engine (`copyengine`); the schema and [`kinds`] do not change, and [`serving`] names
/// only [`TYPES`].
#[derive(Clone, Copy)]
pub struct Registered {
    pub kind: &'static str,
    pub block_io: Option<BlockType>,
    pub device_copy: Option<CopyType>,
}

static REGISTERED: RwLock<Vec<Registered>> = RwLock::new(Vec::new());

/// Register `t` (in place of a type registered before with its kind).
pub fn register(t: Registered) {
    let mut r = REGISTERED.write().unwrap_or_else(|e| e.into_inner());
    r.retain(|x| x.kind != t.kind);
    r.push(t);
}

fn registered(kind: &str) -> Option<Registered> {
    REGISTERED.read().unwrap_or_else(|e| e.into_inner()).iter().find(|t| t.kind == kind).copied()
}

/// Whether kind `kind` serves `s`, registered in [`TYPES`] or with [`register`].
fn serves_as(kind: &str, s: Serves) -> bool {
    listed(kind).is_some_and(|t| t.serves.contains(&s))
        || registered(kind).is_some_and(|t| match s {
            Serves::BlockIo => t.block_io.is_some(),
            Serves::DeviceCopy => t.device_copy.is_some(),
            Serves::TenantPackets => false,
        })
}

fn listed(kind: &str) -> Option<&'static DeviceType> {
    TYPES.iter().find(|t| t.kind == kind)
}

/// The block-I/O entry of kind `kind`.
pub fn block_io(kind: &str) -> Option<BlockType> {
    listed(kind).and_then(|t| t.block_io).or_else(|| registered(kind)?.block_io)
}

/// The device-copy entry of kind `kind`.
pub fn device_copy(kind: &str) -> Option<CopyType> {
    listed(kind).and_then(|t| t.device_copy).or_else(|| registered(kind)?.device_copy)
}

/// `entry` of `device`'s kind, or [`DeviceError::NotServed`] naming its kind and the kinds that
/// serve `s`.
fn entry_of<T>(fabric: &Fabric, device: &str, s: Serves, entry: fn(&str) -> Option<T>) -> DResult<T> {
    let kind = kind_of(fabric, device);
    kind.as_deref().and_then(entry).ok_or_else(|| DeviceError::NotServed { device: device.into(), kind, expected: serving(s) })
}

/// The block-I/O entry of `device`'s kind.
pub fn block_io_of(fabric: &Fabric, device: &str) -> DResult<BlockType> {
    entry_of(fabric, device, Serves::BlockIo, block_io)
}

/// The device-copy entry of `device`'s kind.
pub fn device_copy_of(fabric: &Fabric, device: &str) -> DResult<CopyType> {
    entry_of(fabric, device, Serves::DeviceCopy, device_copy)
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

    #[test]
    fn each_kind_that_serves_a_driven_service_has_its_driver() {
        for t in TYPES {
            assert_eq!(t.serves.contains(&Serves::BlockIo), block_io(t.kind).is_some(), "{}: block I/O", t.kind);
            assert_eq!(t.serves.contains(&Serves::DeviceCopy), device_copy(t.kind).is_some(), "{}: device copies", t.kind);
        }
    }

    #[test]
    fn a_registered_type_serves_what_its_drivers_serve() {
        fn none(_: &Fabric, device: &str) -> crate::error::DResult<std::rc::Rc<dyn crate::service::block::Drive>> {
            Err(crate::error::DeviceError::Mismatch { what: device.into() })
        }
        assert!(block_io("registry-test-disk").is_none());
        register(Registered { kind: "registry-test-disk", block_io: Some(none), device_copy: None });
        assert!(serves_as("registry-test-disk", Serves::BlockIo) && !serves_as("registry-test-disk", Serves::DeviceCopy));
        assert!(block_io("registry-test-disk").is_some() && device_copy("registry-test-disk").is_none());
        assert!(!kinds().any(|k| k == "registry-test-disk"));
    }
}
