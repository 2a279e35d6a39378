//! What a request named that does not exist, or no longer exists ([`super::HostError::NoDevice`]):
//! the names and numbers as values, rendered to the host layer's messages.

use devlend_fabric::model::HostId;
use devlend_fabric::FabricError;
use std::fmt;

/// A host, device, device handle or VM that does not exist (or no longer exists).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoSuch {
    /// A name the fabric does not know (a host, device or function, NTB, IOMMU domain): the
    /// fabric's own refusal ([`FabricError::UnknownName`]). Boxed: it is as large as the
    /// largest [`super::HostError`].
    Name(Box<FabricError>),
    /// Host number `0` beyond the cluster's hosts.
    HostNumber(HostId),
    /// Device handle `handle` that host `host`'s device tree does not hold; `asked`: what the
    /// caller wanted of it.
    Handle { host: String, handle: u32, asked: HandleUse },
    /// No device named `name` in host `host`, whose tree holds `sees`.
    DeviceName { host: String, name: String, sees: Box<[String]> },
    /// Lender `host` does not list `device`, which the fabric places in it.
    NotListed { host: String, device: String },
    /// `device` was removed (hot-plug) and its driver's remove ran on `host` at `at` ps: its
    /// requests fail with ENODEV.
    Removed { device: String, host: String, at: u64 },
    /// `0` names neither a device nor a switch port with a link (the target of a port fault).
    Port(String),
    /// Device `0` is not in its host's device tree.
    NotInTree(String),
    /// A VM, or a device of a VM.
    Vm(InVm),
}

/// What the caller wanted of a device handle that its host does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleUse {
    /// To look at the device.
    Read,
    /// To change the device's state.
    Change,
    /// To remove the device from the tree.
    Remove,
}

/// A VM, or a device of a VM, that does not exist (or no longer exists). `vm` numbers a VM,
/// `dev` a device handle in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InVm {
    /// No VM `vm` (shut down, or never started).
    Number { vm: u32 },
    /// VM `vm`, which the caller changes, is not there.
    NumberToChange { vm: u32 },
    /// VM `vm` vanished while it migrated.
    Vanished { vm: u32 },
    /// VM `vm`, whose guest kernel was called, is gone.
    Gone { vm: u32 },
    /// Device `dev` of VM `vm` vanished while it was attached.
    DeviceVanished { vm: u32, dev: u32 },
    /// The guest kernel of VM `vm` has no device `dev`.
    GuestDevice { vm: u32, dev: u32 },
    /// VM `vm` has no device `dev`, in its virtual config space.
    VirtDevice { vm: u32, dev: u32 },
    /// VM named `vm` has no device with handle `dev`.
    Handle { vm: String, dev: u32 },
    /// VM `vm`'s guest sees no device named `name`.
    DeviceName { vm: String, name: String },
    /// VM `vm` has no device `device`: its description does not give it one.
    NotDescribed { vm: String, device: String },
}

impl fmt::Display for NoSuch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoSuch::Name(e) => write!(f, "{e}"),
            NoSuch::HostNumber(h) => write!(f, "no host #{h}"),
            NoSuch::Handle { host, handle, asked } => {
                let tail = match asked {
                    HandleUse::Read => " (removed or never added)",
                    HandleUse::Change => "",
                    HandleUse::Remove => " to remove",
                };
                write!(f, "host {host}: no device with handle {handle}{tail}")
            }
            NoSuch::DeviceName { host, name, sees } => write!(f, "host {host} sees no device named '{name}' (it sees: {})", sees.join(", ")),
            NoSuch::NotListed { host, device } => write!(f, "{host} does not list {device}"),
            NoSuch::Removed { device, host, at } => write!(
                f,
                "{device} was removed (hot-plug) and its driver's remove ran on {host} at {:.3} us: no such device (ENODEV); its requests in flight fail",
                *at as f64 / 1e6
            ),
            NoSuch::Port(name) => {
                write!(f, "no device and no port '{name}' with a link: name a device (its slot) or a switch port as COMPONENT.PORT")
            }
            NoSuch::NotInTree(device) => write!(f, "{device} is not in its host's tree"),
            NoSuch::Vm(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Display for InVm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InVm::Number { vm } => write!(f, "no VM #{vm} (shut down, or never started)"),
            InVm::NumberToChange { vm } => write!(f, "no VM #{vm}"),
            InVm::Vanished { .. } => f.write_str("VM vanished"),
            InVm::Gone { .. } => f.write_str("VM is gone"),
            InVm::DeviceVanished { .. } => f.write_str("device vanished"),
            InVm::GuestDevice { dev, .. } => write!(f, "guest has no device {dev}"),
            InVm::VirtDevice { vm, dev } => write!(f, "VM #{vm} has no device {dev}"),
            InVm::Handle { vm, dev } => write!(f, "VM {vm} has no device with handle {dev}"),
            InVm::DeviceName { vm, name } => write!(f, "VM {vm} sees no device named '{name}'"),
            InVm::NotDescribed { vm, device } => write!(f, "VM {vm} has no device {device}: a VM's devices come from its description (vms: devices)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> String {
        x.to_string()
    }

    #[test]
    fn each_missing_thing_renders_the_host_layer_s_message() {
        let cases = [
            (NoSuch::Name(Box::new(FabricError::from(devlend_fabric::Unknown::Ntb { name: s("x") }))), "no NTB named 'x'"),
            (NoSuch::HostNumber(7), "no host #7"),
            (NoSuch::Handle { host: s("a"), handle: 3, asked: HandleUse::Read }, "host a: no device with handle 3 (removed or never added)"),
            (NoSuch::Handle { host: s("a"), handle: 3, asked: HandleUse::Change }, "host a: no device with handle 3"),
            (NoSuch::Handle { host: s("a"), handle: 3, asked: HandleUse::Remove }, "host a: no device with handle 3 to remove"),
            (
                NoSuch::DeviceName { host: s("a"), name: s("gpu9"), sees: Box::new([s("gpu0"), s("ntb-l")]) },
                "host a sees no device named 'gpu9' (it sees: gpu0, ntb-l)",
            ),
            (NoSuch::NotListed { host: s("lender"), device: s("gpu0") }, "lender does not list gpu0"),
            (
                NoSuch::Removed { device: s("gpu0"), host: s("b"), at: 1_234_567 },
                "gpu0 was removed (hot-plug) and its driver's remove ran on b at 1.235 us: no such device (ENODEV); its requests in flight fail",
            ),
            (NoSuch::Port(s("sw.p9")), "no device and no port 'sw.p9' with a link: name a device (its slot) or a switch port as COMPONENT.PORT"),
            (NoSuch::NotInTree(s("gpu0")), "gpu0 is not in its host's tree"),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn each_missing_vm_thing_renders_the_vm_layer_s_message() {
        let cases = [
            (InVm::Number { vm: 2 }, "no VM #2 (shut down, or never started)"),
            (InVm::NumberToChange { vm: 2 }, "no VM #2"),
            (InVm::Vanished { vm: 2 }, "VM vanished"),
            (InVm::Gone { vm: 2 }, "VM is gone"),
            (InVm::DeviceVanished { vm: 2, dev: 5 }, "device vanished"),
            (InVm::GuestDevice { vm: 2, dev: 5 }, "guest has no device 5"),
            (InVm::VirtDevice { vm: 2, dev: 5 }, "VM #2 has no device 5"),
            (InVm::Handle { vm: s("g"), dev: 5 }, "VM g has no device with handle 5"),
            (InVm::DeviceName { vm: s("g"), name: s("nic") }, "VM g sees no device named 'nic'"),
            (InVm::NotDescribed { vm: s("g"), device: s("nic") }, "VM g has no device nic: a VM's devices come from its description (vms: devices)"),
        ];
        for (e, text) in cases {
            assert_eq!(NoSuch::Vm(e).to_string(), text);
        }
    }
}
