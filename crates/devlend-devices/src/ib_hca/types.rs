//! What the HCA's hardware works with, in the terms of the InfiniBand specification and OpenIB
//! Gen2 (`ib_verbs.h`): work requests and their scatter/gather entries, work completions with an
//! IB status, QP states and the access rights of a registered region. The verbs layer on top
//! (devlend-xenib's `types`) re-exports them beside its own handles and errno-style statuses.

/// Who owns an HCA resource (a UAR page, a PD, a region, a CQ, a QP), as the driver side names
/// it: for Xen-IB, a domain id.
pub type Owner = u32;

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

/// A packet on the 4X link between two HCAs, in the receiving HCA's inbox until it arrives.
#[derive(Debug, Clone)]
pub enum Packet {
    Data {
        msg: u64,
        first: bool,
        last: bool,
        rqpn: u32,
        op: SendOp,
        len: u64,
        offset: u64,
        data: Vec<u8>,
    },
    /// The responder's answer to message `msg`: None for an ACK, else the NAK's status.
    Ack {
        msg: u64,
        nak: Option<WcStatus>,
    },
}
