//! A split virtqueue (virtio 1.1 §2.6) in the guest's memory: the device's side.

use crate::error::{UmlError, UmlResult};
use crate::mem::GuestMem;
use std::sync::atomic::{fence, Ordering};

const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;

#[derive(Default, Clone, Debug)]
pub struct Vring {
    pub index: u32,
    pub num: u16,
    pub desc: u64,
    pub avail: u64,
    pub used: u64,
    pub last_avail: u16,
    pub kick: Option<i32>,
    pub call: Option<i32>,
    pub enabled: bool,
}

/// One buffer of a chain: guest-physical address, length, whether the device writes it.
#[derive(Clone, Copy, Debug)]
pub struct Buf {
    pub addr: u64,
    pub len: u32,
    pub device_writes: bool,
}

fn u16_at(m: &GuestMem, a: u64) -> UmlResult<u16> {
    let mut b = [0u8; 2];
    m.read(a, &mut b, "virtqueue ring")?;
    Ok(u16::from_le_bytes(b))
}

impl Vring {
    pub fn ready(&self) -> bool {
        self.num > 0 && self.desc != 0
    }

    /// The next available chain: its head and buffers; None when the guest offered nothing new.
    pub fn pop(&mut self, m: &GuestMem) -> UmlResult<Option<(u16, Vec<Buf>)>> {
        if !self.ready() {
            return Ok(None);
        }
        let avail_idx = u16_at(m, self.avail + 2)?;
        if avail_idx == self.last_avail {
            return Ok(None);
        }
        fence(Ordering::Acquire);
        let head = u16_at(m, self.avail + 4 + 2 * (self.last_avail % self.num) as u64)?;
        self.last_avail = self.last_avail.wrapping_add(1);
        let mut bufs = Vec::new();
        let mut i = head;
        loop {
            if i >= self.num || bufs.len() > self.num as usize {
                return Err(UmlError::Queue { index: self.index, what: "descriptor index out of the ring, or a loop" });
            }
            let mut d = [0u8; 16];
            m.read(self.desc + 16 * i as u64, &mut d, "virtqueue descriptor")?;
            let flags = u16::from_le_bytes([d[12], d[13]]);
            bufs.push(Buf {
                addr: u64::from_le_bytes(d[0..8].try_into().unwrap()),
                len: u32::from_le_bytes(d[8..12].try_into().unwrap()),
                device_writes: flags & F_WRITE != 0,
            });
            if flags & F_NEXT == 0 {
                break;
            }
            i = u16::from_le_bytes([d[14], d[15]]);
        }
        Ok(Some((head, bufs)))
    }

    /// Return chain `head` to the guest with `written` bytes written, then signal its call fd.
    pub fn push(&mut self, m: &GuestMem, head: u16, written: u32) -> UmlResult<()> {
        let idx = u16_at(m, self.used + 2)?;
        let slot = self.used + 4 + 8 * (idx % self.num) as u64;
        let mut e = [0u8; 8];
        e[0..4].copy_from_slice(&(head as u32).to_le_bytes());
        e[4..8].copy_from_slice(&written.to_le_bytes());
        m.write(slot, &e, "virtqueue used ring")?;
        fence(Ordering::Release);
        m.write(self.used + 2, &idx.wrapping_add(1).to_le_bytes(), "virtqueue used ring")?;
        fence(Ordering::SeqCst);
        if let Some(fd) = self.call {
            let one: u64 = 1;
            unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
        }
        Ok(())
    }
}
