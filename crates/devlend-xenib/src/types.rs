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

/// IB work-completion status (IBA 1.2 vol. 1 §11.6.2; `enum ib_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcStatus {
    Success,
    /// A local key did not translate (unknown key, other PD, out of bounds).
    LocProtErr,
    /// The QP's own buffer (bypass: registered guest memory) did not translate.
    LocQpOpErr,
    /// The responder refused the rkey or the access.
    RemAccessErr,
    /// The responder had no receive WQE posted.
    RnrRetryExcErr,
    /// The QP went to the error state; outstanding WQEs are flushed.
    WrFlushErr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WcOpcode {
    RdmaWrite,
    Send,
    Recv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub byte_len: u64,
    pub qp_num: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum QpState {
    Reset,
    Init,
    Rtr,
    Rts,
    Err,
}

pub const ACCESS_LOCAL_WRITE: u32 = 1;
pub const ACCESS_REMOTE_WRITE: u32 = 2;
pub const ACCESS_REMOTE_READ: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u64,
    pub lkey: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    RdmaWrite { remote_addr: u64, rkey: u32 },
    Send,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub sge: Sge,
    pub op: SendOp,
    pub signaled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sge: Sge,
}

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
