//! The device server's typed errors.

use std::fmt;

#[derive(Debug)]
pub enum UmlError {
    /// A system call failed.
    Io { what: &'static str, error: std::io::Error },
    /// The guest closed the socket in the middle of something.
    Closed { during: &'static str },
    /// A vhost-user message the server cannot take.
    Protocol { request: u32, what: &'static str, offset: usize },
    /// A guest-physical address outside the memory the guest shared.
    Address { what: &'static str, addr: u64, len: u64 },
    /// A virtqueue the guest set up wrongly.
    Queue { index: u32, what: &'static str },
    /// No guest connected to the device's socket in time.
    NoGuest { socket: String, waited: std::time::Duration },
    /// The device's BARs do not fit UML's one PCI window.
    BarWindow { device: String, total: u64, window: u64 },
    /// The device has more MSI-X vectors than UML's PCI has in all.
    MsiVectors { device: String, vectors: u16, limit: u16 },
    /// The guest's kernel could not be given an interrupt for an MSI-X entry it programmed.
    MsixEntry { entry: usize, error: Box<dyn std::error::Error> },
    /// A device given to a guest that sits in another host (an NTB endpoint is its host's own).
    NotHers { host: String, device: String },
    /// A device kind the server does not serve.
    UnknownKind { kind: String, device: String },
    /// A region of the guest's memory is not RAM of its host in the topology.
    NotRam { base: u64, size: u64 },
    /// A time-travel message the controller cannot take in that state.
    TimeTravel { op: u32, what: &'static str },
    /// The guest waits with no timer of its own and the model has nothing left to do: nothing
    /// would ever wake it.
    NothingToWaitFor { at_ns: u64 },
    /// devlend's model refused a step (the topology, the borrow, a mapping, the engine).
    Model { during: &'static str, error: Box<dyn std::error::Error> },
}

pub type UmlResult<T> = Result<T, UmlError>;

impl fmt::Display for UmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UmlError::Io { what, error } => write!(f, "{what}: {error}"),
            UmlError::Closed { during } => write!(f, "the guest closed the vhost-user socket during {during}"),
            UmlError::Protocol { request, what, offset } => write!(f, "vhost-user request {request}: {what} (at byte {offset})"),
            UmlError::Address { what, addr, len } => write!(f, "{what}: guest-physical {addr:#x}+{len:#x} is outside the guest's shared memory"),
            UmlError::Queue { index, what } => write!(f, "virtqueue {index}: {what}"),
            UmlError::NoGuest { socket, waited } => write!(f, "no guest connected to {socket} within {waited:?}"),
            UmlError::BarWindow { device, total, window } => {
                write!(f, "{device}: its BARs take {total:#x} bytes; UML's PCI has one {window:#x}-byte window for all BARs")
            }
            UmlError::MsiVectors { device, vectors, limit } => write!(f, "{device}: {vectors} MSI-X vectors; UML's PCI has {limit} in all"),
            UmlError::NotHers { host, device } => write!(f, "{device} is not a device of host {host}: an NTB endpoint serves the host it sits in"),
            UmlError::UnknownKind { kind, device } => write!(f, "{device}: device kind {kind:?}: expected \"nvme\" or \"xeon-ntb\""),
            UmlError::NotRam { base, size } => {
                write!(f, "the guest's memory {base:#x}+{size:#x} is not RAM of its host in the topology (give the host more ram)")
            }
            UmlError::MsixEntry { entry, error } => write!(f, "MSI-X entry {entry}: {error}"),
            UmlError::TimeTravel { op, what } => write!(f, "time-travel message {op}: {what}"),
            UmlError::NothingToWaitFor { at_ns } => {
                write!(
                    f,
                    "at {at_ns} ns (simulated) the guest waits with no timer and the model raised no interrupt for it within {} s: nothing would ever wake it",
                    crate::clock::IDLE_HORIZON_NS / 1_000_000_000
                )
            }
            UmlError::Model { during, error } => write!(f, "{during}: {error}"),
        }
    }
}

impl std::error::Error for UmlError {}
