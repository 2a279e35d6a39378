//! The vhost-user protocol's frontend-to-backend messages (QEMU docs/interop/vhost-user.rst),
//! the subset UML's virtio_uml driver sends: a 12-byte header (request, flags, size) then the
//! payload, file descriptors as SCM_RIGHTS ancillary data.

use crate::error::{UmlError, UmlResult};
use std::os::fd::RawFd;

pub const GET_FEATURES: u32 = 1;
pub const SET_FEATURES: u32 = 2;
pub const SET_OWNER: u32 = 3;
pub const RESET_OWNER: u32 = 4;
pub const SET_MEM_TABLE: u32 = 5;
pub const SET_VRING_NUM: u32 = 8;
pub const SET_VRING_ADDR: u32 = 9;
pub const SET_VRING_BASE: u32 = 10;
pub const GET_VRING_BASE: u32 = 11;
pub const SET_VRING_KICK: u32 = 12;
pub const SET_VRING_CALL: u32 = 13;
pub const SET_VRING_ERR: u32 = 14;
pub const GET_PROTOCOL_FEATURES: u32 = 15;
pub const SET_PROTOCOL_FEATURES: u32 = 16;
pub const GET_QUEUE_NUM: u32 = 17;
pub const SET_VRING_ENABLE: u32 = 18;
pub const SET_SLAVE_REQ_FD: u32 = 21;
pub const GET_CONFIG: u32 = 24;
pub const SET_CONFIG: u32 = 25;
/// In-band kick (INBAND_NOTIFICATIONS): payload vring_state (index, num).
pub const VRING_KICK: u32 = 35;
/// Backend-to-frontend request on the SLAVE_REQ channel: an in-band call (interrupt) of a virtqueue.
pub const SLAVE_VRING_CALL: u32 = 4;

/// Header flags: protocol version 1, this is a reply, the sender wants a REPLY_ACK.
pub const VERSION: u32 = 1;
pub const REPLY: u32 = 1 << 2;
pub const NEED_REPLY: u32 = 1 << 3;

/// Feature bits: VIRTIO_F_VERSION_1 (virtio 1.1 §6), VHOST_USER_F_PROTOCOL_FEATURES.
pub const F_VERSION_1: u64 = 1 << 32;
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
/// Protocol features REPLY_ACK (3), SLAVE_REQ (5) and CONFIG (9). UML's virtio_uml (6.12)
/// allocates the device's interrupt only when SLAVE_REQ is offered: without it every virtqueue's
/// call fd is requested as IRQ 0, the timer's, and the probe fails with EBUSY.
pub const PF_REPLY_ACK: u64 = 1 << 3;
pub const PF_SLAVE_REQ: u64 = 1 << 5;
pub const PF_CONFIG: u64 = 1 << 9;
/// INBAND_NOTIFICATIONS (14): kicks come as VRING_KICK messages and calls go as SLAVE_VRING_CALL,
/// so that under time travel the guest takes each interrupt at the simulated time it is given.
pub const PF_INBAND_NOTIFICATIONS: u64 = 1 << 14;

pub const HEADER: usize = 12;
const MAX_FDS: usize = 8;

/// One message: request, flags, payload and the file descriptors that came with it.
#[derive(Debug)]
pub struct Msg {
    pub request: u32,
    pub flags: u32,
    pub payload: Vec<u8>,
    pub fds: Vec<RawFd>,
}

impl Msg {
    /// Payload field `i` as a little-endian u64 (most payloads are u64s or u32 pairs).
    pub fn u64_at(&self, off: usize) -> UmlResult<u64> {
        self.payload.get(off..off + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).ok_or(UmlError::Protocol {
            request: self.request,
            what: "payload too short",
            offset: off,
        })
    }

    pub fn u32_at(&self, off: usize) -> UmlResult<u32> {
        self.payload.get(off..off + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).ok_or(UmlError::Protocol {
            request: self.request,
            what: "payload too short",
            offset: off,
        })
    }

    pub fn wants_ack(&self) -> bool {
        self.flags & NEED_REPLY != 0
    }
}

pub(crate) fn os_err(what: &'static str) -> UmlError {
    UmlError::Io { what, error: std::io::Error::last_os_error() }
}

/// Receive exactly `buf.len()` bytes (and any fds) with recvmsg; Ok(false) on end of stream.
/// Also the time-travel socket's reader (`timetravel::recv`).
pub(crate) fn recv_exact(sock: RawFd, buf: &mut [u8], fds: &mut Vec<RawFd>) -> UmlResult<bool> {
    let mut got = 0;
    while got < buf.len() {
        let mut iov = libc::iovec { iov_base: buf[got..].as_mut_ptr().cast(), iov_len: buf.len() - got };
        let mut cmsg = [0u64; 64];
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cmsg.as_mut_ptr().cast();
        mh.msg_controllen = std::mem::size_of_val(&cmsg);
        let n = unsafe { libc::recvmsg(sock, &mut mh, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_err("recvmsg on a guest socket"));
        }
        if n == 0 {
            return if got == 0 { Ok(false) } else { Err(UmlError::Closed { during: "a message" }) };
        }
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c) as *const RawFd;
                    let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for i in 0..count.min(MAX_FDS) {
                        fds.push(*data.add(i));
                    }
                }
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
        got += n as usize;
    }
    Ok(true)
}

/// The next message, or None when the guest closed the socket.
pub fn recv(sock: RawFd) -> UmlResult<Option<Msg>> {
    let mut hdr = [0u8; HEADER];
    let mut fds = Vec::new();
    if !recv_exact(sock, &mut hdr, &mut fds)? {
        return Ok(None);
    }
    let request = u32::from_le_bytes(hdr[0..4].try_into().unwrap());
    let flags = u32::from_le_bytes(hdr[4..8].try_into().unwrap());
    let size = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as usize;
    if size > 4096 {
        return Err(UmlError::Protocol { request, what: "payload larger than 4096 bytes", offset: size });
    }
    let mut payload = vec![0u8; size];
    if size > 0 && !recv_exact(sock, &mut payload, &mut fds)? {
        return Err(UmlError::Closed { during: "a message's payload" });
    }
    Ok(Some(Msg { request, flags, payload, fds }))
}

/// Send a reply to `request` with `payload`.
pub fn reply(sock: RawFd, request: u32, payload: &[u8]) -> UmlResult<()> {
    send(sock, request, VERSION | REPLY, payload)
}

/// Send a message with header `flags`.
pub fn send(sock: RawFd, request: u32, flags: u32, payload: &[u8]) -> UmlResult<()> {
    let mut b = Vec::with_capacity(HEADER + payload.len());
    b.extend_from_slice(&request.to_le_bytes());
    b.extend_from_slice(&flags.to_le_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    let mut done = 0;
    while done < b.len() {
        let n = unsafe { libc::send(sock, b[done..].as_ptr().cast(), b.len() - done, libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(os_err("send on the vhost-user socket"));
        }
        done += n as usize;
    }
    Ok(())
}
