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
    /// The topology or device cannot be served (beyond UML's PCI, unknown names, the model).
    Setup { what: String },
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
            UmlError::Setup { what } => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for UmlError {}
