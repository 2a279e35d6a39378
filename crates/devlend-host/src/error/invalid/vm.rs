//! A VM's requests that make no sense: a RAM size its layout cannot hold, a device on the wrong
//! path into it, a migration that cannot go; and the guest config-space and MSI-X table writes
//! its hypervisor refuses ([`Refusal`], which `devlend-vm` also records).

use devlend_wire::Bdf;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadVm {
    /// VM `vm` asked for `ram` bytes of RAM: not a multiple of 2 MiB above the guest kernel's
    /// `reserved` bytes.
    RamSize { vm: String, ram: u64, reserved: u64 },
    /// VFIO asked for `device`, which is not in VM `vm`'s host.
    NotLocal { device: String, vm: String },
    /// The mediated parent asked for `device`, which is in VM `vm`'s own host.
    Local { device: String, vm: String },
    /// `device` is not registered with the mediated parent.
    NotRegistered { device: String },
    /// VM `vm` already runs on host `target`.
    AlreadyOn { vm: String, target: String },
    /// VM `vm` cannot migrate to `target`: `device` would be remote there and is not registered
    /// with the mediated parent.
    MigrateUnregistered { vm: String, target: String, device: String },
    /// The target's copy of the guest RAM chunk at guest-physical `gpa` is missing.
    ChunkMissing { gpa: u64 },
    /// A guest config access of `len` bytes at offset `off`: not 1, 2 or 4 bytes, naturally
    /// aligned, inside 4 KiB.
    ConfigAccess { off: usize, len: usize },
    /// Guest device `device` is not attached to its host device yet.
    NotAttached { device: String },
    /// VM `vm`'s hypervisor refused a guest write: `refusal`.
    Refused { vm: String, refusal: Refusal },
}

/// A guest write the hypervisor refuses (`devlend-vm`'s `config`): the rule it breaks and what
/// was written. Its `Display` is the detail after the rule's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// BAR `bar` of `device` (its `reg`th BAR register) written with `new`: the function's BAR
    /// stays at `phys`, the guest's at `gpa`.
    BarRelocation { device: String, bar: u8, reg: usize, new: u32, phys: u64, gpa: u64 },
    /// Read-only config offset `off` of `device` written with `value`.
    ReadOnly { device: String, off: usize, value: u32 },
    /// A config write to offset `off` of `bdf`, where the VM has no device (`host_func`: the
    /// function at that BDF in the hosts, if any).
    OutsideVm { bdf: Bdf, host_func: Option<String>, off: usize },
    /// MSI-X table entry `entry` of `device` given address `value`, outside the guest's MSI
    /// range [`range.0`, `range.1`).
    MsixAddress { device: String, entry: usize, value: u32, range: (u64, u64) },
    /// MSI-X table entry `entry` of `device` given upper address `value` (not 0).
    MsixUpper { device: String, entry: usize, value: u32 },
}

impl Refusal {
    /// The rule the write breaks.
    pub fn what(&self) -> &'static str {
        match self {
            Refusal::BarRelocation { .. } => "BAR relocation",
            Refusal::ReadOnly { .. } => "read-only config register",
            Refusal::OutsideVm { .. } => "config write to a function outside the VM",
            Refusal::MsixAddress { .. } | Refusal::MsixUpper { .. } => "MSI-X table redirection",
        }
    }

    /// The guest device written (or the BDF the guest addressed).
    pub fn device(&self) -> String {
        match self {
            Refusal::BarRelocation { device, .. } | Refusal::ReadOnly { device, .. } => device.clone(),
            Refusal::MsixAddress { device, .. } | Refusal::MsixUpper { device, .. } => device.clone(),
            Refusal::OutsideVm { bdf, .. } => format!("{bdf:?}"),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BarRelocation { device, bar, reg, new, phys, gpa } => write!(
                f,
                "{device} BAR {bar} (register {reg}) written with {new:#x}; BARs of a passed-through device are virtualized: the function's BAR stays at {phys:#x}, the guest's at {gpa:#x}"
            ),
            Refusal::ReadOnly { device, off, value } => {
                write!(f, "{device} config offset {off:#x} written with {value:#x}; only Command, the BARs' sizing and MSI-X Message Control are writable")
            }
            Refusal::OutsideVm { bdf, host_func, off } => {
                write!(f, "no device of this VM at {bdf:?}")?;
                if let Some(name) = host_func {
                    write!(f, " (in the hosts, {bdf:?} is {name})")?;
                }
                write!(f, "; the write to offset {off:#x} is dropped (master abort)")
            }
            Refusal::MsixAddress { device, entry, value, range } => write!(
                f,
                "{device} entry {entry} address {value:#x} is outside the guest's MSI range {:#x}-{:#x}; the device would write its message there",
                range.0,
                range.1 - 1
            ),
            Refusal::MsixUpper { device, entry, value } => write!(
                f,
                "{device} entry {entry} upper address {value:#x}: MSI addresses lie below 4 GiB ({} above 0 refused)",
                vm_size((*value as u64) << 32)
            ),
        }
    }
}

impl fmt::Display for BadVm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadVm::RamSize { vm, ram, reserved } => {
                write!(f, "VM {vm}: {} of RAM must be a multiple of 2 MiB and more than the guest kernel's {}", vm_size(*ram), vm_size(*reserved))
            }
            BadVm::NotLocal { device, vm } => {
                write!(f, "{device} is not in VM {vm}'s host: VFIO passes through local devices; a remote one goes through the mediated parent (assign_mdev)")
            }
            BadVm::Local { device, vm } => write!(f, "{device} is in VM {vm}'s own host: pass it through with VFIO (assign_vfio)"),
            BadVm::NotRegistered { device } => write!(f, "{device} is not registered with the mediated parent (register_mdev)"),
            BadVm::AlreadyOn { vm, target } => write!(f, "VM {vm} already runs on {target}"),
            BadVm::MigrateUnregistered { vm, target, device } => {
                write!(f, "cannot migrate VM {vm} to {target}: {device} would be remote there and is not registered with the mediated parent (register_mdev)")
            }
            BadVm::ChunkMissing { .. } => f.write_str("target chunk missing"),
            BadVm::ConfigAccess { off, len } => {
                write!(f, "config access of {len} bytes at {off:#x}: must be 1, 2 or 4 bytes, naturally aligned, inside 4 KiB")
            }
            BadVm::NotAttached { device } => write!(f, "{device} is not attached"),
            BadVm::Refused { vm, refusal } => write!(f, "VM {vm}: {} refused: {refusal}", refusal.what()),
        }
    }
}

/// "512 MiB", "4 GiB", "3 KiB": sizes in a VM's messages (whole MiB and GiB; below 1 MiB, KiB
/// rounded up), unlike the host layer's exact sizes.
pub fn vm_size(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    match bytes {
        b if b >= GIB && b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b.div_ceil(1024)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostError;

    /// The messages are the ones `devlend-vm` printed when `Invalid` held a `String`.
    #[test]
    fn each_vm_request_renders_the_vm_layer_s_message() {
        let refused = |refusal| BadVm::Refused { vm: "g".into(), refusal };
        let cases = [
            (
                BadVm::RamSize { vm: "g".into(), ram: 3 << 20, reserved: 16 << 20 },
                "VM g: 3 MiB of RAM must be a multiple of 2 MiB and more than the guest kernel's 16 MiB",
            ),
            (
                BadVm::NotLocal { device: "gpu0".into(), vm: "g".into() },
                "gpu0 is not in VM g's host: VFIO passes through local devices; a remote one goes through the mediated parent (assign_mdev)",
            ),
            (BadVm::Local { device: "gpu0".into(), vm: "g".into() }, "gpu0 is in VM g's own host: pass it through with VFIO (assign_vfio)"),
            (BadVm::NotRegistered { device: "gpu0".into() }, "gpu0 is not registered with the mediated parent (register_mdev)"),
            (BadVm::AlreadyOn { vm: "g".into(), target: "a".into() }, "VM g already runs on a"),
            (
                BadVm::MigrateUnregistered { vm: "g".into(), target: "b".into(), device: "gpu0".into() },
                "cannot migrate VM g to b: gpu0 would be remote there and is not registered with the mediated parent (register_mdev)",
            ),
            (BadVm::ChunkMissing { gpa: 0x20_0000 }, "target chunk missing"),
            (BadVm::ConfigAccess { off: 0x3, len: 2 }, "config access of 2 bytes at 0x3: must be 1, 2 or 4 bytes, naturally aligned, inside 4 KiB"),
            (BadVm::NotAttached { device: "gpu0".into() }, "gpu0 is not attached"),
            (
                refused(Refusal::BarRelocation { device: "gpu0".into(), bar: 0, reg: 0, new: 0x1000, phys: 0xf000_0000, gpa: 0xe000_0000 }),
                "VM g: BAR relocation refused: gpu0 BAR 0 (register 0) written with 0x1000; BARs of a passed-through device are virtualized: the function's BAR stays at 0xf0000000, the guest's at 0xe0000000",
            ),
            (
                refused(Refusal::ReadOnly { device: "gpu0".into(), off: 0x3c, value: 0xff }),
                "VM g: read-only config register refused: gpu0 config offset 0x3c written with 0xff; only Command, the BARs' sizing and MSI-X Message Control are writable",
            ),
            (
                refused(Refusal::OutsideVm { bdf: Bdf::new(0, 9, 0), host_func: None, off: 4 }),
                "VM g: config write to a function outside the VM refused: no device of this VM at 00:09.0; the write to offset 0x4 is dropped (master abort)",
            ),
            (
                refused(Refusal::OutsideVm { bdf: Bdf::new(1, 0, 0), host_func: Some("nvme0".into()), off: 4 }),
                "VM g: config write to a function outside the VM refused: no device of this VM at 01:00.0 (in the hosts, 01:00.0 is nvme0); the write to offset 0x4 is dropped (master abort)",
            ),
            (
                refused(Refusal::MsixAddress { device: "gpu0".into(), entry: 1, value: 0x1000, range: (0xfee0_0000, 0xfef0_0000) }),
                "VM g: MSI-X table redirection refused: gpu0 entry 1 address 0x1000 is outside the guest's MSI range 0xfee00000-0xfeefffff; the device would write its message there",
            ),
            (
                refused(Refusal::MsixUpper { device: "gpu0".into(), entry: 1, value: 1 }),
                "VM g: MSI-X table redirection refused: gpu0 entry 1 upper address 0x1: MSI addresses lie below 4 GiB (4 GiB above 0 refused)",
            ),
        ];
        for (request, text) in cases {
            assert_eq!(HostError::from(request).to_string(), text);
        }
        assert_eq!([vm_size(3 << 10), vm_size((1 << 20) + 1), vm_size(3 << 30)], ["3 KiB", "1 MiB", "3 GiB"]);
        let outside = Refusal::OutsideVm { bdf: Bdf::new(0, 9, 0), host_func: None, off: 4 };
        let upper = Refusal::MsixUpper { device: "gpu0".into(), entry: 1, value: 1 };
        assert_eq!([outside.device(), upper.device()], ["00:09.0", "gpu0"], "a refusal names the device, or the BDF the guest addressed");
    }
}
