//! UML's time-travel protocol (include/uapi/linux/um_timetravel.h, arch/um/kernel/time.c): a
//! guest started with `time-travel=ext:SOCKET` asks this controller for its time. Every message,
//! both ways, is `struct um_timetravel_msg` (op, seq, time in ns) and is answered by an ACK with
//! the same seq. The guest REQUESTs the time of its next event, WAITs for it and is told RUN at
//! that time; it may run without asking up to FREE_UNTIL (forgotten at every WAIT); it says
//! UPDATE before it kicks a device, so the device learns the time of the access; GET and GET_TOD
//! ask for the time.

use crate::error::UmlResult;
use crate::vhost::os_err;
use std::os::fd::RawFd;

pub const ACK: u32 = 0;
pub const START: u32 = 1;
pub const REQUEST: u32 = 2;
pub const WAIT: u32 = 3;
pub const GET: u32 = 4;
pub const UPDATE: u32 = 5;
pub const RUN: u32 = 6;
pub const FREE_UNTIL: u32 = 7;
pub const GET_TOD: u32 = 8;

/// What UML treats as "never" (time.c: S64_MAX, "sleep forever").
pub const NEVER_NS: u64 = i64::MAX as u64;
/// The simulated time of day at time 0: 2026-01-01T00:00:00Z, fixed so that two runs see the
/// same dates (the guest's clock starts here, not at the machine's).
pub const TOD_START_NS: u64 = 1_767_225_600 * 1_000_000_000;

#[derive(Clone, Copy, Debug)]
pub struct TtMsg {
    pub op: u32,
    pub seq: u32,
    pub time: u64,
}

impl TtMsg {
    fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.op.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.time.to_le_bytes());
        b
    }
}

/// The next message, or None when the guest closed the socket.
pub fn recv(fd: RawFd) -> UmlResult<Option<TtMsg>> {
    let (mut b, mut fds) = ([0u8; 16], Vec::new());
    let open = crate::vhost::recv_exact(fd, &mut b, &mut fds)?;
    for fd in fds {
        // The guest sends none on this socket; one that came is not kept open.
        unsafe { libc::close(fd) };
    }
    if !open {
        return Ok(None);
    }
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    Ok(Some(TtMsg { op: u32_at(0), seq: u32_at(4), time: u64::from_le_bytes(b[8..16].try_into().unwrap()) }))
}

/// Send `m`, with `fds` as SCM_RIGHTS.
pub fn send(fd: RawFd, m: TtMsg, fds: &[RawFd]) -> UmlResult<()> {
    let b = m.bytes();
    let mut iov = libc::iovec { iov_base: b.as_ptr() as *mut _, iov_len: b.len() };
    let mut cmsg = [0u64; 8];
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if !fds.is_empty() {
        let len = std::mem::size_of_val(fds) as u32;
        mh.msg_control = cmsg.as_mut_ptr().cast();
        mh.msg_controllen = unsafe { libc::CMSG_SPACE(len) } as _;
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(len) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c) as *mut RawFd, fds.len());
        }
    }
    let n = unsafe { libc::sendmsg(fd, &mh, libc::MSG_NOSIGNAL) };
    if n != b.len() as isize {
        return Err(os_err("writing the time-travel socket"));
    }
    Ok(())
}

/// The file descriptors START's ACK must carry (6.12 reads two, shared memory and log, and uses
/// them uninitialised when none come): a zeroed page whose version (0) is not the shared-memory
/// version (2), so the guest maps it, finds the version wrong and goes on with messages.
pub fn start_fds() -> UmlResult<[RawFd; 2]> {
    let fd = unsafe { libc::memfd_create(c"devlend-timetravel".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 || unsafe { libc::ftruncate(fd, 4096) } != 0 {
        return Err(os_err("creating the time-travel page"));
    }
    let log = unsafe { libc::dup(fd) };
    if log < 0 {
        unsafe { libc::close(fd) };
        return Err(os_err("creating the time-travel page"));
    }
    Ok([fd, log])
}

/// One guest's time as a controller knows it: what every controller answers from.
#[derive(Debug, Default, Clone, Copy)]
pub struct GuestTime {
    /// The guest's current time (ns): the last RUN, UPDATE or GET.
    pub now: u64,
    /// The time the guest last REQUESTed.
    pub requested: Option<u64>,
}

/// Answer `m` from guest `fd` if it is one every controller answers alike (ACK, START, GET,
/// GET_TOD, UPDATE, REQUEST), counting each message sent in `sent`; false for the others
/// (WAIT, and anything unexpected), which the caller's scheduling decides.
pub fn answer(fd: RawFd, t: &mut GuestTime, m: TtMsg, sent: &mut u64) -> UmlResult<bool> {
    let mut ack = |time: u64, fds: &[RawFd]| {
        *sent += 1;
        send(fd, TtMsg { op: ACK, seq: m.seq, time }, fds)
    };
    match m.op {
        ACK => {}
        START => {
            let fds = start_fds()?;
            let out = ack(0, &fds);
            fds.iter().for_each(|&fd| unsafe {
                libc::close(fd);
            });
            out?;
        }
        GET_TOD => ack(TOD_START_NS + t.now, &[])?,
        GET => ack(t.now, &[])?,
        UPDATE => {
            t.now = t.now.max(m.time);
            ack(0, &[])?;
        }
        REQUEST => {
            t.requested = Some(m.time);
            ack(0, &[])?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Picoseconds on the engine to the first guest nanosecond not before them.
pub fn ns_at_or_after(ps: u64) -> u64 {
    ps.div_ceil(1000)
}
