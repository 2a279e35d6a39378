//! The session: one unix socket, one guest's vhost-user connection, one device. Virtqueue 0
//! carries the guest's config and BAR accesses (virtio_pcidev messages; reads wait for the
//! answer in their chain's device-writable buffer), virtqueue 1 the device's interrupts.

use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use crate::pcidev::NvmeDevice;
use crate::vhost::{self, Msg};
use crate::vring::{Buf, Vring};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

/// virtio_pcidev operations (include/uapi/linux/virtio_pcidev.h).
const OP_CFG_READ: u8 = 1;
const OP_CFG_WRITE: u8 = 2;
const OP_MMIO_READ: u8 = 3;
const OP_MMIO_WRITE: u8 = 4;
const OP_MMIO_MEMSET: u8 = 5;
const OP_MSI: u8 = 7;
const MSG_HEADER: usize = 16;

/// What a session did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub simulated_ps: u64,
    pub commands: u64,
    pub counts: crate::pcidev::Counts,
    pub wall: Duration,
}

struct Session {
    sock: RawFd,
    mem: Option<GuestMem>,
    rings: [Vring; 2],
    dev: NvmeDevice,
    pending_irqs: Vec<u32>,
    /// The write end of the guest's backend-request pipe (SET_SLAVE_REQ_FD): held open, unused
    /// (the device never changes its config or asks the guest anything).
    req_fd: Option<RawFd>,
}

/// Serve `dev` to the one guest that connects to `socket` within `deadline`; returns when the
/// guest closes the connection (it powered off or was killed).
pub fn serve(socket: &str, dev: NvmeDevice, deadline: Duration) -> UmlResult<Summary> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket).map_err(|error| UmlError::Io { what: "binding the device socket", error })?;
    let start = Instant::now();
    if !poll_one(listener.as_raw_fd(), deadline)? {
        return Err(UmlError::NoGuest { socket: socket.into(), waited: deadline });
    }
    let (stream, _) = listener.accept().map_err(|error| UmlError::Io { what: "accepting the guest", error })?;
    let mut s = Session {
        sock: stream.as_raw_fd(),
        mem: None,
        rings: [Vring { index: 0, ..Default::default() }, Vring { index: 1, ..Default::default() }],
        dev,
        pending_irqs: Vec::new(),
        req_fd: None,
    };
    for (i, r) in s.rings.iter_mut().enumerate() {
        r.index = i as u32;
    }
    let ran = s.run();
    if let Some(fd) = s.req_fd.take().filter(|&fd| fd >= 0) {
        unsafe { libc::close(fd) };
    }
    ran?;
    let _ = std::fs::remove_file(socket);
    let commands = s.dev.ctrl.borrow().commands;
    Ok(Summary { simulated_ps: s.dev.machine.now(), commands, counts: s.dev.counts.clone(), wall: start.elapsed() })
}

fn poll_one(fd: RawFd, timeout: Duration) -> UmlResult<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    if n < 0 {
        return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
    }
    Ok(n > 0)
}

fn drain_eventfd(fd: RawFd) {
    let mut v = 0u64;
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

impl Session {
    fn run(&mut self) -> UmlResult<()> {
        loop {
            let mut fds = vec![libc::pollfd { fd: self.sock, events: libc::POLLIN, revents: 0 }];
            for r in &self.rings {
                if let Some(k) = r.kick {
                    fds.push(libc::pollfd { fd: k, events: libc::POLLIN, revents: 0 });
                }
            }
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1000) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
            }
            for p in &fds[1..] {
                if p.revents & libc::POLLIN != 0 {
                    drain_eventfd(p.fd);
                }
            }
            if fds[0].revents & (libc::POLLIN | libc::POLLHUP) != 0 {
                match vhost::recv(self.sock)? {
                    Some(m) => self.message(m)?,
                    None => return Ok(()),
                }
            }
            self.process()?;
        }
    }

    fn message(&mut self, m: Msg) -> UmlResult<()> {
        let mut answered = false;
        match m.request {
            vhost::GET_FEATURES => {
                vhost::reply(self.sock, m.request, &(vhost::F_VERSION_1 | vhost::F_PROTOCOL_FEATURES).to_le_bytes())?;
                answered = true;
            }
            vhost::GET_PROTOCOL_FEATURES => {
                vhost::reply(self.sock, m.request, &(vhost::PF_REPLY_ACK | vhost::PF_SLAVE_REQ).to_le_bytes())?;
                answered = true;
            }
            vhost::SET_MEM_TABLE => {
                let mem = GuestMem::from_table(&m.payload, &m.fds)?;
                self.dev.attach(&mem)?;
                self.mem = Some(mem);
            }
            vhost::SET_VRING_NUM => self.ring(&m)?.num = m.u32_at(4)? as u16,
            vhost::SET_VRING_ADDR => {
                let (desc, used, avail) = (m.u64_at(8)?, m.u64_at(16)?, m.u64_at(24)?);
                let r = self.ring(&m)?;
                (r.desc, r.used, r.avail) = (desc, used, avail);
            }
            vhost::SET_VRING_BASE => self.ring(&m)?.last_avail = m.u32_at(4)? as u16,
            vhost::GET_VRING_BASE => {
                let r = self.ring(&m)?;
                let mut b = [0u8; 8];
                b[0..4].copy_from_slice(&r.index.to_le_bytes());
                b[4..8].copy_from_slice(&(r.last_avail as u32).to_le_bytes());
                r.enabled = false;
                vhost::reply(self.sock, m.request, &b)?;
                answered = true;
            }
            vhost::SET_VRING_KICK | vhost::SET_VRING_CALL | vhost::SET_VRING_ERR => {
                let v = m.u64_at(0)?;
                let fd = if v & 0x100 == 0 { m.fds.first().copied() } else { None };
                let idx = (v & 0xff) as usize;
                let r = self.rings.get_mut(idx).ok_or(UmlError::Queue { index: idx as u32, what: "no such virtqueue (the device has 2)" })?;
                match m.request {
                    vhost::SET_VRING_KICK => r.kick = fd,
                    vhost::SET_VRING_CALL => r.call = fd,
                    _ => {
                        if let Some(fd) = fd {
                            unsafe { libc::close(fd) };
                        }
                    }
                }
            }
            vhost::SET_SLAVE_REQ_FD => {
                if let Some(old) = self.req_fd.replace(m.fds.first().copied().unwrap_or(-1)) {
                    unsafe { libc::close(old) };
                }
            }
            vhost::SET_VRING_ENABLE => {
                let on = m.u32_at(4)? != 0;
                self.ring(&m)?.enabled = on;
            }
            _ => {}
        }
        if m.wants_ack() && !answered {
            vhost::reply(self.sock, m.request, &0u64.to_le_bytes())?;
        }
        Ok(())
    }

    fn ring(&mut self, m: &Msg) -> UmlResult<&mut Vring> {
        let i = m.u32_at(0)?;
        self.rings.get_mut(i as usize).ok_or(UmlError::Queue { index: i, what: "no such virtqueue (the device has 2)" })
    }

    /// Every request the guest queued, then the interrupts the device raised meanwhile.
    fn process(&mut self) -> UmlResult<()> {
        let Some(mem) = self.mem.take() else { return Ok(()) };
        let r = self.serve_queues(&mem);
        self.mem = Some(mem);
        r
    }

    fn serve_queues(&mut self, mem: &GuestMem) -> UmlResult<()> {
        while let Some((head, bufs)) = self.rings[0].pop(mem)? {
            let written = self.request(mem, &bufs)?;
            self.rings[0].push(mem, head, written)?;
        }
        self.pending_irqs.extend(self.dev.take_interrupts());
        while !self.pending_irqs.is_empty() {
            let Some((head, bufs)) = self.rings[1].pop(mem)? else { break };
            let data = self.pending_irqs.remove(0);
            let mut msg = vec![0u8; MSG_HEADER + 4];
            msg[0] = OP_MSI;
            msg[4..8].copy_from_slice(&4u32.to_le_bytes());
            msg[MSG_HEADER..].copy_from_slice(&data.to_le_bytes());
            let buf = bufs
                .iter()
                .find(|b| b.device_writes && b.len as usize >= msg.len())
                .ok_or(UmlError::Queue { index: 1, what: "an interrupt buffer too small for a message" })?;
            mem.write(buf.addr, &msg, "interrupt message")?;
            self.rings[1].push(mem, head, msg.len() as u32)?;
        }
        Ok(())
    }

    /// One virtio_pcidev message; returns the bytes written into the chain's answer buffer.
    fn request(&mut self, mem: &GuestMem, bufs: &[Buf]) -> UmlResult<u32> {
        let mut msg = Vec::new();
        for b in bufs.iter().filter(|b| !b.device_writes) {
            let at = msg.len();
            msg.resize(at + b.len as usize, 0);
            mem.read(b.addr, &mut msg[at..], "a virtio_pcidev message")?;
        }
        if msg.len() < MSG_HEADER {
            return Err(UmlError::Queue { index: 0, what: "a message shorter than its 16-byte header" });
        }
        let (op, bar) = (msg[0], msg[1]);
        let size = u32::from_le_bytes(msg[4..8].try_into().unwrap()) as usize;
        let addr = u64::from_le_bytes(msg[8..16].try_into().unwrap());
        let data = &msg[MSG_HEADER..];
        let answer = match op {
            OP_CFG_READ => Some(self.dev.cfg_read(addr as usize, size.min(8)).to_le_bytes()[..size.min(8)].to_vec()),
            OP_CFG_WRITE => {
                let mut v = [0u8; 8];
                v[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
                self.dev.cfg_write(addr as usize, size.min(8), u64::from_le_bytes(v));
                None
            }
            OP_MMIO_READ => Some(self.dev.mmio_read(bar, addr, size)?),
            OP_MMIO_WRITE => {
                self.dev.mmio_write(bar, addr, &data[..size.min(data.len())])?;
                None
            }
            OP_MMIO_MEMSET => {
                let fill = vec![data.first().copied().unwrap_or(0); size];
                self.dev.mmio_write(bar, addr, &fill)?;
                None
            }
            _ => None,
        };
        let Some(answer) = answer else { return Ok(0) };
        let Some(out) = bufs.iter().find(|b| b.device_writes) else { return Ok(0) };
        let n = answer.len().min(out.len as usize);
        mem.write(out.addr, &answer[..n], "a virtio_pcidev answer")?;
        Ok(n as u32)
    }
}
