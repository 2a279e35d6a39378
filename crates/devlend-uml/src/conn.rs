//! One device of a guest on its vhost-user socket: virtqueue 0 carries the guest's config and
//! BAR accesses (virtio_pcidev messages; a read's answer goes into its chain's device-writable
//! buffer when the load completes on the engine), virtqueue 1 the device's interrupts (MSI
//! messages, each followed by an in-band call on the backend-request channel).

use crate::engine::Engine;
use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use crate::pcidev::{Load, LoadCell, PciFunction};
use crate::trace::Trace;
use crate::vhost::{self, Msg};
use crate::vring::{Buf, Vring};
use devlend_fabric::events::Event;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};

/// virtio_pcidev operations (include/uapi/linux/virtio_pcidev.h).
const OP_CFG_READ: u8 = 1;
const OP_CFG_WRITE: u8 = 2;
const OP_MMIO_READ: u8 = 3;
const OP_MMIO_WRITE: u8 = 4;
const OP_MMIO_MEMSET: u8 = 5;
const OP_MSI: u8 = 7;
const MSG_HEADER: usize = 16;

/// vhost-user traffic of one device.
#[derive(Debug, Default, Clone)]
pub struct Traffic {
    /// vhost-user messages from the guest (in-band kicks included) and replies.
    pub vhost: u64,
    pub kicks: u64,
    /// In-band calls (interrupts) sent to the guest.
    pub calls: u64,
}

/// A load the guest waits for: its chain, where the answer goes, and the answer's cell.
struct PendingRead {
    head: u16,
    out: Option<Buf>,
    cell: LoadCell,
}

/// What a message from the guest asks of its controller.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// Nothing more.
    Done,
    /// It kicked virtqueue 0: its accesses may have put work on the engine, so its FREE_UNTIL
    /// must be told again before it goes on (it waits for the kick's reply: [`Conn::kick_done`]).
    Kicked,
    /// It closed the device's socket (it is powering off).
    Closed,
}

pub struct Conn {
    path: String,
    listener: UnixListener,
    sock: Option<UnixStream>,
    mem: Option<GuestMem>,
    rings: [Vring; 2],
    pub dev: PciFunction,
    pending_irqs: Vec<u32>,
    reads: Vec<PendingRead>,
    /// Posted accesses returned to the guest since its last call of virtqueue 0 (it frees their
    /// buffers then; a full queue drops the next posted write).
    unreclaimed: u32,
    /// The backend-request channel (SET_SLAVE_REQ_FD): in-band calls go there.
    req_fd: Option<RawFd>,
    /// A kick's reply held back until the guest has been told its FREE_UNTIL.
    kick_ack: Option<u32>,
    pub traffic: Traffic,
    /// What the connection handles, when `DEVLEND_UML_TRACE` asks for it.
    pub trace: Trace,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(fd) = self.req_fd.take().filter(|&fd| fd >= 0) {
            unsafe { libc::close(fd) };
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Conn {
    /// Listen for the guest on `path` for device `dev`.
    pub fn bind(path: &str, dev: PciFunction) -> UmlResult<Conn> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).map_err(|error| UmlError::Io { what: "binding a device socket", error })?;
        Ok(Conn {
            path: path.into(),
            listener,
            sock: None,
            mem: None,
            rings: [Vring { index: 0, ..Default::default() }, Vring { index: 1, ..Default::default() }],
            dev,
            pending_irqs: Vec::new(),
            reads: Vec::new(),
            unreclaimed: 0,
            req_fd: None,
            kick_ack: None,
            traffic: Traffic::default(),
            trace: Trace::for_socket(path)?,
        })
    }

    /// The fd to poll: the listener until the guest connects, then the socket; None once closed.
    pub fn fd(&self) -> Option<RawFd> {
        match &self.sock {
            Some(s) => Some(s.as_raw_fd()),
            None if self.mem.is_none() => Some(self.listener.as_raw_fd()),
            None => None,
        }
    }

    fn dev_fd(&self) -> RawFd {
        self.sock.as_ref().map_or(-1, |s| s.as_raw_fd())
    }

    /// The fd is readable: accept the guest, or take its message at its time `now_ps`.
    pub fn readable(&mut self, e: &mut Engine, now_ps: u64) -> UmlResult<Turn> {
        if self.sock.is_none() {
            let (s, _) = self.listener.accept().map_err(|error| UmlError::Io { what: "accepting the guest", error })?;
            self.sock = Some(s);
            return Ok(Turn::Done);
        }
        match vhost::recv(self.dev_fd())? {
            Some(m) => self.message(e, m, now_ps),
            None => {
                self.sock = None;
                Ok(Turn::Closed)
            }
        }
    }

    fn message(&mut self, e: &mut Engine, m: Msg, now_ps: u64) -> UmlResult<Turn> {
        self.traffic.vhost += 1;
        // Longer payloads (the memory table, ring addresses) hold the guest process's host addresses.
        let short = if m.payload.len() <= 8 { &m.payload[..] } else { &[] };
        self.trace.line(|| format!("vu< request={} flags={:#x} payload={short:02x?} at_ps={now_ps}", m.request, m.flags))?;
        let sock = self.dev_fd();
        let mut answered = false;
        let mut turn = Turn::Done;
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
                self.dev.attach(e, &mem)?;
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
                self.traffic.kicks += 1;
                if m.u32_at(0)? == 0 {
                    self.serve_requests(e, now_ps)?;
                }
                turn = Turn::Kicked;
            }
            _ => {}
        }
        if m.wants_ack() && !answered {
            if turn == Turn::Kicked {
                // Answered by `kick_done`, once the guest has been told how far it may run.
                self.kick_ack = Some(m.request);
            } else {
                self.ack(m.request)?;
            }
        }
        Ok(turn)
    }

    fn ack(&mut self, request: u32) -> UmlResult<()> {
        self.traffic.vhost += 1;
        vhost::reply(self.dev_fd(), request, &0u64.to_le_bytes())
    }

    /// After [`Turn::Kicked`]: the guest knows its FREE_UNTIL; answer the kick (it waits for that
    /// reply, reading only time messages meanwhile, so FREE_UNTIL must come first).
    pub fn kick_done(&mut self) -> UmlResult<()> {
        match self.kick_ack.take() {
            Some(r) => self.ack(r),
            None => Ok(()),
        }
    }

    fn ring(&mut self, m: &Msg) -> UmlResult<&mut Vring> {
        let i = m.u32_at(0)?;
        self.rings.get_mut(i as usize).ok_or(UmlError::Queue { index: i, what: "no such virtqueue (the device has 2)" })
    }

    /// Every access the guest queued, at its current time.
    fn serve_requests(&mut self, e: &mut Engine, now_ps: u64) -> UmlResult<()> {
        self.with_mem(|s, mem| {
            while let Some((head, bufs)) = s.rings[0].pop(mem)? {
                let out = bufs.iter().find(|b| b.device_writes).copied();
                match s.request(e, mem, &bufs, now_ps)? {
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
    pub fn finish_reads(&mut self) -> UmlResult<()> {
        self.with_mem(|s, mem| {
            let mut i = 0;
            while i < s.reads.len() {
                match s.dev.load_done(&s.reads[i].cell) {
                    Some(v) => {
                        let p = s.reads.remove(i);
                        s.trace.line(|| format!("load-done head={} value={v:02x?}", p.head))?;
                        s.answer(mem, p.head, p.out, &v)?;
                    }
                    None => i += 1,
                }
            }
            Ok(())
        })
    }

    /// Hot-unplug, once the guest's host has been told that the device is gone
    /// ([`PciFunction::take_unplug`]): the loads still waiting read all ones, and the device's
    /// backend-request channel is called (virtqueue 0, a reply needed) and handed back for
    /// [`Conn::end_channel`], which closes it once the guest has replied. UML takes the closed
    /// channel as its device gone (virtio_uml `vu_conn_broken`): it breaks and unregisters the
    /// virtio device, virt-pci removes the PCI device (`um_pci_virtio_remove`), the driver's
    /// `remove` runs, and the guest closes the device socket itself (which stays open until
    /// then, so the messages of the unregistering are answered).
    ///
    /// Why the call first: a guest that waits (time travel) reads the channel's end in its
    /// time-travel handler (`vu_req_read_message`), which schedules an interrupt only for a
    /// message it read; the end alone would wait for the guest's next timer (`dd` blocked in a
    /// read failed 10-65 ms after the unplug in the tests' runs; BENCHMARKS.md). The call makes the guest schedule its interrupt
    /// now (it asks the time and REQUESTs it), so that the controller's RUN comes at the unplug's
    /// time; its handler (`vu_req_interrupt`) then finds the channel's end, which the guest read
    /// in the meantime, and breaks the connection. (A RUN at the unplug's time without that
    /// interrupt is a time the guest has no event for: UML's `BUG` in `time_travel_update_time`.)
    /// `Some(-1)` when the guest never gave the channel, `None` when no unplug is due.
    pub fn hot_unplug(&mut self, e: &Engine) -> UmlResult<Option<RawFd>> {
        if !self.dev.take_unplug(e) {
            return Ok(None);
        }
        self.with_mem(|s, mem| {
            for p in std::mem::take(&mut s.reads) {
                let n = p.out.map_or(0, |o| o.len as usize);
                s.answer(mem, p.head, p.out, &vec![0xff; n])?;
            }
            Ok(())
        })?;
        self.trace.line(|| "unplug".into())?;
        let Some(req) = self.req_fd.take().filter(|&fd| fd >= 0) else { return Ok(Some(-1)) };
        let mut state = [0u8; 8];
        state[0..4].copy_from_slice(&0u32.to_le_bytes());
        if let Err(e) = vhost::send(req, vhost::SLAVE_VRING_CALL, vhost::VERSION | vhost::NEED_REPLY, &state) {
            // Taken from `req_fd`: nothing else would close it.
            Conn::end_channel(req);
            return Err(e);
        }
        self.traffic.calls += 1;
        Ok(Some(req))
    }

    /// Close the backend-request channel [`Conn::hot_unplug`] handed back.
    pub fn end_channel(req: RawFd) {
        if req >= 0 {
            unsafe { libc::close(req) };
        }
    }

    /// When the guest's host was told that the device is gone (ps), if it was.
    pub fn unplugged_at(&self, e: &Engine) -> Option<u64> {
        self.dev.unplugged_at(e)
    }

    /// Keep the interrupts among `events` that are this device's, for [`Conn::start_calls`].
    pub fn take_interrupts(&mut self, events: &[Event]) {
        let irqs = self.dev.take_interrupts(events);
        self.pending_irqs.extend(irqs);
    }

    /// Put the interrupts kept so far into virtqueue 1's buffers; how many went.
    fn queue_interrupts(&mut self) -> UmlResult<usize> {
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

    /// Deliver the interrupts kept so far: MSI messages into virtqueue 1 and an in-band call for
    /// it (and one for virtqueue 0 when posted accesses' buffers wait to be freed). Returns the
    /// channel the guest replies on and how many replies to wait for (0: nothing delivered).
    pub fn start_calls(&mut self) -> UmlResult<(RawFd, usize)> {
        let mut calls = Vec::new();
        if self.queue_interrupts()? > 0 {
            calls.push(1u32);
        }
        let half = (self.rings[0].num / 2).max(1) as u32;
        if (!calls.is_empty() && self.unreclaimed > 0) || self.unreclaimed >= half {
            calls.push(0);
            self.unreclaimed = 0;
        }
        let Some(req) = self.req_fd.filter(|&fd| fd >= 0 && !calls.is_empty()) else { return Ok((-1, 0)) };
        for &q in &calls {
            self.trace.line(|| format!("call> queue={q}"))?;
            let mut state = [0u8; 8];
            state[0..4].copy_from_slice(&q.to_le_bytes());
            vhost::send(req, vhost::SLAVE_VRING_CALL, vhost::VERSION | vhost::NEED_REPLY, &state)?;
            self.traffic.calls += 1;
        }
        Ok((req, calls.len()))
    }

    /// One reply to a call has come on the backend-request channel: read it.
    pub fn take_reply(&mut self, req: RawFd) -> UmlResult<()> {
        vhost::recv(req)?.ok_or(UmlError::Closed { during: "an interrupt's reply" })?;
        self.traffic.vhost += 1;
        self.trace.line(|| "reply<".into())?;
        Ok(())
    }

    /// Run `f` with the guest's memory (lent out of the connection for the call, and put back
    /// whatever `f` returns); `T::default()` before the guest has sent its memory table.
    fn with_mem<T: Default>(&mut self, f: impl FnOnce(&mut Self, &GuestMem) -> UmlResult<T>) -> UmlResult<T> {
        let Some(mem) = self.mem.take() else { return Ok(T::default()) };
        let r = f(self, &mem);
        self.mem = Some(mem);
        r
    }

    /// One virtio_pcidev message at the guest's current time: None for a posted access, else
    /// the answer (now, or when the load completes).
    fn request(&mut self, e: &mut Engine, mem: &GuestMem, bufs: &[Buf], at: u64) -> UmlResult<Option<Load>> {
        let mut msg = Vec::new();
        for b in bufs.iter().filter(|b| !b.device_writes) {
            let o = msg.len();
            msg.resize(o + b.len as usize, 0);
            mem.read(b.addr, &mut msg[o..], "a virtio_pcidev message")?;
        }
        if msg.len() < MSG_HEADER {
            return Err(UmlError::Queue { index: 0, what: "a message shorter than its 16-byte header" });
        }
        let (op, bar) = (msg[0], msg[1]);
        let size = u32::from_le_bytes(msg[4..8].try_into().unwrap()) as usize;
        let addr = u64::from_le_bytes(msg[8..16].try_into().unwrap());
        let data = &msg[MSG_HEADER..];
        self.trace.line(|| format!("pci op={op} bar={bar} addr={addr:#x} size={size} data={data:02x?} at_ps={at}"))?;
        Ok(match op {
            OP_CFG_READ => Some(Load::Now(self.dev.cfg_read(e, addr as usize, size.min(8)).to_le_bytes()[..size.min(8)].to_vec())),
            OP_CFG_WRITE => {
                let mut v = [0u8; 8];
                v[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
                self.dev.cfg_write(e, addr as usize, size.min(8), u64::from_le_bytes(v));
                None
            }
            OP_MMIO_READ => Some(self.dev.mmio_read(e, bar, addr, size, at)?),
            OP_MMIO_WRITE => {
                self.dev.mmio_write(e, bar, addr, &data[..size.min(data.len())], at)?;
                None
            }
            OP_MMIO_MEMSET => {
                let fill = vec![data.first().copied().unwrap_or(0); size];
                self.dev.mmio_write(e, bar, addr, &fill, at)?;
                None
            }
            _ => None,
        })
    }
}
