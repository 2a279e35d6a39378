//! Verbs-level types in the style of OpenIB Gen2 (`ib_verbs.h` / libibverbs): return codes are
//! errno-style [`Status`] values, completions carry an IB work-completion status ([`WcStatus`]).

/// A Xen domain id (server B's native Linux and server A's native Linux are domains of kind
/// [`DomKind::Native`]).
pub type DomId = u32;

/// errno-style return codes of the verbs (Gen2 returns `-EINVAL`, `-ENOMEM` ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// EINVAL: a bad argument, a handle that does not exist (destroyed), a QP in the wrong state.
    Inval,
    /// EACCES: the back-end refused (memory or a resource of another domain).
    Access,
    /// ENOMEM: out of memory, UARs, queue entries.
    NoMem,
    /// EAGAIN: the device channel's ring is full; try again later.
    Again,
    /// ETIMEDOUT: nothing will ever arrive (a wait that cannot be satisfied).
    TimedOut,
}

impl Status {
    pub fn errno(self) -> i32 {
        match self {
            Status::Inval => 22,
            Status::Access => 13,
            Status::NoMem => 12,
            Status::Again => 11,
            Status::TimedOut => 110,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Status::Inval => "EINVAL",
            Status::Access => "EACCES",
            Status::NoMem => "ENOMEM",
            Status::Again => "EAGAIN",
            Status::TimedOut => "ETIMEDOUT",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.errno())
    }
}

pub type VResult<T> = Result<T, Status>;

/// The HCA's hardware types (work requests and completions, QP states, access rights), the
/// device model's own (devlend-devices' `ib_hca::types`), which the verbs take and return.
pub use devlend_devices::ib_hca::types::{
    QpState, RecvWr, SendOp, SendWr, Sge, Wc, WcOpcode, WcStatus, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

/// Handles, as the application sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pd(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cq(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Qp(pub u32);

/// A registered memory region: its keys index the HCA's translation and protection table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    pub addr: u64,
    pub len: u64,
    pub lkey: u32,
    pub rkey: u32,
}

/// Where a QP sends: (node index, QP number), exchanged out of band as applications do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttr {
    pub state: QpState,
    pub remote: Option<(usize, u32)>,
}
