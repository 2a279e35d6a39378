//! The guest's memory: the regions of VHOST_USER_SET_MEM_TABLE, each an fd mapped here, addressed
//! by guest-physical address (UML's __pa: offset from uml_physmem).

use crate::error::{UmlError, UmlResult};
use std::os::fd::RawFd;

struct Region {
    guest: u64,
    size: u64,
    ptr: *mut u8,
}

#[derive(Default)]
pub struct GuestMem {
    regions: Vec<Region>,
}

impl GuestMem {
    /// Map the regions of a SET_MEM_TABLE payload (u32 count, u32 padding, then per region
    /// guest_addr, size, user_addr, mmap_offset) with their fds.
    pub fn from_table(payload: &[u8], fds: &[RawFd]) -> UmlResult<GuestMem> {
        let u64_at = |o: usize| payload.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        let bad = |what| UmlError::Protocol { request: crate::vhost::SET_MEM_TABLE, what, offset: 0 };
        let n = payload.get(0..4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).ok_or(bad("no region count"))? as usize;
        if n != fds.len() {
            return Err(bad("region count differs from the file descriptors sent"));
        }
        let mut mem = GuestMem::default();
        for (i, &fd) in fds.iter().enumerate() {
            let o = 8 + 32 * i;
            let (Some(guest), Some(size), Some(off)) = (u64_at(o), u64_at(o + 8), u64_at(o + 24)) else {
                return Err(bad("region entry too short"));
            };
            let ptr = unsafe { libc::mmap(std::ptr::null_mut(), size as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, off as libc::off_t) };
            unsafe { libc::close(fd) };
            if ptr == libc::MAP_FAILED {
                return Err(UmlError::Io { what: "mmap of the guest's memory", error: std::io::Error::last_os_error() });
            }
            mem.regions.push(Region { guest, size, ptr: ptr.cast() });
        }
        Ok(mem)
    }

    /// A host pointer to `len` bytes at guest-physical `addr`, all inside one region.
    pub fn ptr(&self, addr: u64, len: u64, what: &'static str) -> UmlResult<*mut u8> {
        self.regions
            .iter()
            .find(|r| addr >= r.guest && addr.checked_add(len).is_some_and(|e| e <= r.guest + r.size))
            .map(|r| unsafe { r.ptr.add((addr - r.guest) as usize) })
            .ok_or(UmlError::Address { what, addr, len })
    }

    pub fn read(&self, addr: u64, out: &mut [u8], what: &'static str) -> UmlResult<()> {
        let p = self.ptr(addr, out.len() as u64, what)?;
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    pub fn write(&self, addr: u64, data: &[u8], what: &'static str) -> UmlResult<()> {
        let p = self.ptr(addr, data.len() as u64, what)?;
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// (guest-physical start, size, host pointer) of each region.
    pub fn regions(&self) -> impl Iterator<Item = (u64, u64, *mut u8)> + '_ {
        self.regions.iter().map(|r| (r.guest, r.size, r.ptr))
    }
}

impl Drop for GuestMem {
    fn drop(&mut self) {
        for r in &self.regions {
            unsafe { libc::munmap(r.ptr.cast(), r.size as usize) };
        }
    }
}
