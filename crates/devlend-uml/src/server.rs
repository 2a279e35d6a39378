//! The session: one guest, its time-travel socket (the controller, `clock.rs`), one vhost-user
//! socket and one device, served by one single-threaded event loop. Virtqueue 0 carries the
//! guest's config and BAR accesses (virtio_pcidev messages; a read's answer goes into its
//! chain's device-writable buffer when the load completes on the engine), virtqueue 1 the
//! device's interrupts (MSI messages, each followed by an in-band call).

use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use crate::pcidev::{Load, LoadCell, NvmeDevice};
use crate::vhost::{self, Msg};
use crate::vring::{Buf, Vring};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// virtio_pcidev operations (include/uapi/linux/virtio_pcidev.h).
const OP_CFG_READ: u8 = 1;
const OP_CFG_WRITE: u8 = 2;
const OP_MMIO_READ: u8 = 3;
const OP_MMIO_WRITE: u8 = 4;
const OP_MMIO_MEMSET: u8 = 5;
const OP_MSI: u8 = 7;
const MSG_HEADER: usize = 16;

/// The messages a session exchanged, by kind.
#[derive(Debug, Default, Clone)]
pub struct Messages {
    /// Time-travel messages both ways (ACKs included).
    pub time: u64,
    /// vhost-user messages from the guest (in-band kicks included) and replies.
    pub vhost: u64,
    pub kicks: u64,
    /// In-band calls (interrupts) sent to the guest.
    pub calls: u64,
    /// The guest's WAITs: each a turn of the engine.
    pub waits: u64,
}

/// What a session did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub simulated_ps: u64,
    /// The guest's simulated time when it ended (ns).
    pub guest_ns: u64,
    pub commands: u64,
    pub counts: crate::pcidev::Counts,
    pub messages: Messages,
    /// Stores the fabric refused (dropped, as posted writes are).
    pub write_faults: u64,
    pub struck: Vec<crate::pcidev::Struck>,
    /// When the guest was told that the device is gone and its connection ended (ns).
    pub unplugged_ns: Option<u64>,
    pub wall: Duration,
}

/// A load the guest waits for: its chain, where the answer goes, and the answer's cell.
pub(crate) struct PendingRead {
    head: u16,
    out: Option<Buf>,
    cell: LoadCell,
}

pub(crate) struct Session {
    pub(crate) time: RawFd,
    pub(crate) sock: Option<UnixStream>,
    pub(crate) mem: Option<GuestMem>,
    pub(crate) rings: [Vring; 2],
    pub(crate) dev: NvmeDevice,
    pub(crate) pending_irqs: Vec<u32>,
    pub(crate) reads: Vec<PendingRead>,
    /// Posted accesses returned to the guest since its last call of virtqueue 0 (it frees their
    /// buffers then; a full queue drops the next posted write).
    pub(crate) unreclaimed: u32,
    /// The backend-request channel (SET_SLAVE_REQ_FD): in-band calls go there.
    pub(crate) req_fd: Option<RawFd>,
    pub(crate) clock: crate::clock::Clock,
    pub(crate) msgs: Messages,
}

/// Serve `dev` to the one guest that connects to `time_socket` (its time-travel controller) and
/// `socket` (the device) within `deadline`; returns when the guest closes the connections (it
/// powered off or was killed).
pub fn serve(socket: &str, time_socket: &str, dev: NvmeDevice, deadline: Duration) -> UmlResult<Summary> {
    serve_with_faults(socket, time_socket, dev, deadline, &[])
}

/// As [`serve`], with faults `(at ns, kind, target)` injected on the engine at those simulated times.
pub fn serve_with_faults(socket: &str, time_socket: &str, mut dev: NvmeDevice, deadline: Duration, faults: &[(u64, String, String)]) -> UmlResult<Summary> {
    for (at, kind, target) in faults {
        dev.fault_at(at.saturating_mul(1000), kind, target)?;
    }
    let bind = |path: &str| {
        let _ = std::fs::remove_file(path);
        UnixListener::bind(path).map_err(|error| UmlError::Io { what: "binding a socket", error })
    };
    let (time_l, dev_l) = (bind(time_socket)?, bind(socket)?);
    let start = Instant::now();
    if !poll_one(time_l.as_raw_fd(), deadline)? {
        return Err(UmlError::NoGuest { socket: time_socket.into(), waited: deadline });
    }
    let (time, _) = time_l.accept().map_err(|error| UmlError::Io { what: "accepting the guest", error })?;
    let mut s = Session {
        time: time.as_raw_fd(),
        sock: None,
        mem: None,
        rings: [Vring { index: 0, ..Default::default() }, Vring { index: 1, ..Default::default() }],
        dev,
        pending_irqs: Vec::new(),
        reads: Vec::new(),
        unreclaimed: 0,
        req_fd: None,
        clock: Default::default(),
        msgs: Messages::default(),
    };
    let ran = s.run(&dev_l);
    if let Some(fd) = s.req_fd.take().filter(|&fd| fd >= 0) {
        unsafe { libc::close(fd) };
    }
    drop(time);
    ran?;
    let _ = std::fs::remove_file(socket);
    let _ = std::fs::remove_file(time_socket);
    let commands = s.dev.ctrl.borrow().commands;
    Ok(Summary {
        simulated_ps: s.dev.machine.now(),
        guest_ns: s.clock.time.now,
        commands,
        counts: s.dev.counts.clone(),
        messages: s.msgs.clone(),
        write_faults: s.dev.write_faults(),
        struck: s.dev.struck(),
        unplugged_ns: s.dev.unplugged_at().map(crate::timetravel::ns_at_or_after),
        wall: start.elapsed(),
    })
}

pub(crate) fn poll_one(fd: RawFd, timeout: Duration) -> UmlResult<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    if n < 0 {
        return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
    }
    Ok(n > 0)
}

/// Wait until one of `fds` is readable; the index of the first that is.
pub(crate) fn poll_any(fds: &[RawFd]) -> UmlResult<usize> {
    let mut p: Vec<libc::pollfd> = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    loop {
        let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(UmlError::Io { what: "poll", error: std::io::Error::last_os_error() });
        }
        if let Some(i) = p.iter().position(|q| q.revents != 0) {
            return Ok(i);
        }
    }
}

impl Session {
    /// The event loop: the time socket, the device socket's listener until the guest connects,
    /// then the device socket. Ends when the guest closes its time socket.
    fn run(&mut self, listener: &UnixListener) -> UmlResult<()> {
        loop {
            let dev_fd = self.sock.as_ref().map_or(listener.as_raw_fd(), |s| s.as_raw_fd());
            match poll_any(&[self.time, dev_fd])? {
                0 => match crate::timetravel::recv(self.time)? {
                    Some(m) => self.time_message(m, false)?,
                    None => return Ok(()),
                },
                _ if self.sock.is_none() => {
                    let (s, _) = listener.accept().map_err(|error| UmlError::Io { what: "accepting the guest", error })?;
                    self.sock = Some(s);
                }
                _ => match vhost::recv(dev_fd)? {
                    Some(m) => self.message(m)?,
                    // The device went away (the guest is powering off): its time socket ends the session.
                    None => self.sock = None,
                },
            }
        }
    }

    fn dev_fd(&self) -> RawFd {
        self.sock.as_ref().map_or(-1, |s| s.as_raw_fd())
    }

    fn message(&mut self, m: Msg) -> UmlResult<()> {
        self.msgs.vhost += 1;
        let sock = self.dev_fd();
        let mut answered = false;
        match m.request {
            vhost::GET_FEATURES => {
                vhost::reply(sock, m.request, &(vhost::F_VERSION_1 | vhost::F_PROTOCOL_FEATURES).to_le_bytes())?;
                answered = true;
            }
            vhost::GET_PROTOCOL_FEATURES => {
                let pf = vhost::PF_REPLY_ACK | vhost::PF_SLAVE_REQ | vhost::PF_INBAND_NOTIFICATIONS;
                vhost::reply(sock, m.request, &pf.to_le_bytes())?;
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
                vhost::reply(sock, m.request, &b)?;
                answered = true;
            }
            vhost::SET_VRING_KICK | vhost::SET_VRING_CALL | vhost::SET_VRING_ERR => {
                // With in-band notifications these come without an fd (bit 8: no fd).
                for fd in m.fds.iter() {
                    unsafe { libc::close(*fd) };
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
            vhost::VRING_KICK => {
                self.msgs.kicks += 1;
                if m.u32_at(0)? == 0 {
                    self.serve_requests()?;
                }
                // The accesses may have put work on the engine: the guest may not run past it.
                self.tell_free_until(true)?;
            }
            _ => {}
        }
        if m.wants_ack() && !answered {
            self.msgs.vhost += 1;
            vhost::reply(sock, m.request, &0u64.to_le_bytes())?;
        }
        Ok(())
    }

    fn ring(&mut self, m: &Msg) -> UmlResult<&mut Vring> {
        let i = m.u32_at(0)?;
        self.rings.get_mut(i as usize).ok_or(UmlError::Queue { index: i, what: "no such virtqueue (the device has 2)" })
    }

    /// Every access the guest queued, at its current time.
    fn serve_requests(&mut self) -> UmlResult<()> {
        self.with_mem(|s, mem| {
            while let Some((head, bufs)) = s.rings[0].pop(mem)? {
                let out = bufs.iter().find(|b| b.device_writes).copied();
                match s.request(mem, &bufs)? {
                    Some(Load::Later(cell)) => s.reads.push(PendingRead { head, out, cell }),
                    Some(Load::Now(answer)) => s.answer(mem, head, out, &answer)?,
                    None => {
                        s.rings[0].push(mem, head, 0)?;
                        s.unreclaimed += 1;
                    }
                }
            }
            Ok(())
        })
    }

    fn answer(&mut self, mem: &GuestMem, head: u16, out: Option<Buf>, answer: &[u8]) -> UmlResult<()> {
        let n = out.map_or(0, |o| answer.len().min(o.len as usize));
        if let Some(o) = out {
            mem.write(o.addr, &answer[..n], "a virtio_pcidev answer")?;
        }
        self.rings[0].push(mem, head, n as u32)
    }

    /// Answer the loads that have completed on the engine (the guest polls for them).
    pub(crate) fn finish_reads(&mut self) -> UmlResult<()> {
        self.with_mem(|s, mem| {
            let mut i = 0;
            while i < s.reads.len() {
                match s.dev.load_done(&s.reads[i].cell) {
                    Some(v) => {
                        let p = s.reads.remove(i);
                        s.answer(mem, p.head, p.out, &v)?;
                    }
                    None => i += 1,
                }
            }
            Ok(())
        })
    }

    /// Hot-unplug, once the guest's host has been told that the device is gone: the loads still
    /// waiting read all ones, and the device's backend-request channel closes. UML takes that
    /// as its device gone (virtio_uml `vu_conn_broken`): it breaks and unregisters the virtio
    /// device, virt-pci removes the PCI device (`um_pci_virtio_remove`), the driver's `remove`
    /// runs, and the guest closes the device socket itself (which stays open until then, so the
    /// messages of the unregistering are answered). True when it happened now.
    pub(crate) fn hot_unplug(&mut self) -> UmlResult<bool> {
        if !self.dev.take_unplug() {
            return Ok(false);
        }
        self.with_mem(|s, mem| {
            for p in std::mem::take(&mut s.reads) {
                let n = p.out.map_or(0, |o| o.len as usize);
                s.answer(mem, p.head, p.out, &vec![0xff; n])?;
            }
            Ok(())
        })?;
        if let Some(fd) = self.req_fd.take().filter(|&fd| fd >= 0) {
            unsafe { libc::close(fd) };
        }
        Ok(true)
    }

    /// Put the interrupts the device raised into virtqueue 1's buffers; how many went.
    pub(crate) fn queue_interrupts(&mut self) -> UmlResult<usize> {
        self.pending_irqs.extend(self.dev.take_interrupts());
        self.with_mem(|s, mem| {
            let mut sent = 0;
            while !s.pending_irqs.is_empty() {
                let Some((head, bufs)) = s.rings[1].pop(mem)? else { break };
                let data = s.pending_irqs.remove(0);
                let mut msg = vec![0u8; MSG_HEADER + 4];
                msg[0] = OP_MSI;
                msg[4..8].copy_from_slice(&4u32.to_le_bytes());
                msg[MSG_HEADER..].copy_from_slice(&data.to_le_bytes());
                let buf = bufs
                    .iter()
                    .find(|b| b.device_writes && b.len as usize >= msg.len())
                    .ok_or(UmlError::Queue { index: 1, what: "an interrupt buffer too small for a message" })?;
                mem.write(buf.addr, &msg, "interrupt message")?;
                s.rings[1].push(mem, head, msg.len() as u32)?;
                sent += 1;
            }
            Ok(sent)
        })
    }

    /// Run `f` with the guest's memory (lent out of the session for the call, and put back
    /// whatever `f` returns); `T::default()` before the guest has sent its memory table.
    fn with_mem<T: Default>(&mut self, f: impl FnOnce(&mut Self, &GuestMem) -> UmlResult<T>) -> UmlResult<T> {
        let Some(mem) = self.mem.take() else { return Ok(T::default()) };
        let r = f(self, &mem);
        self.mem = Some(mem);
        r
    }

    /// One virtio_pcidev message at the guest's current time: None for a posted access, else
    /// the answer (now, or when the load completes).
    fn request(&mut self, mem: &GuestMem, bufs: &[Buf]) -> UmlResult<Option<Load>> {
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
        let at = self.clock.now_ps();
        Ok(match op {
            OP_CFG_READ => Some(Load::Now(self.dev.cfg_read(addr as usize, size.min(8)).to_le_bytes()[..size.min(8)].to_vec())),
            OP_CFG_WRITE => {
                let mut v = [0u8; 8];
                v[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
                self.dev.cfg_write(addr as usize, size.min(8), u64::from_le_bytes(v));
                None
            }
            OP_MMIO_READ => Some(self.dev.mmio_read(bar, addr, size, at)?),
            OP_MMIO_WRITE => {
                self.dev.mmio_write(bar, addr, &data[..size.min(data.len())], at)?;
                None
            }
            OP_MMIO_MEMSET => {
                let fill = vec![data.first().copied().unwrap_or(0); size];
                self.dev.mmio_write(bar, addr, &fill, at)?;
                None
            }
            _ => None,
        })
    }
}
