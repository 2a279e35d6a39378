//! Functional memory: a sparse byte store of 4 KiB pages, one per host RAM and one per BAR.
//! Unwritten bytes read as zero. A range can be backed by memory owned elsewhere
//! ([`SparseMem::attach`]): a real guest's RAM shared with devlend (devlend-uml), so the DMA of a
//! modelled device lands where the guest's kernel reads it.

use rustc_hash::FxHashMap;

pub(crate) const PAGE: u64 = 4096;

#[derive(Clone, Default)]
pub struct SparseMem {
    pages: FxHashMap<u64, Box<[u8; PAGE as usize]>>,
    backing: Vec<Backing>,
}

/// Bytes [base, base + len) live at `ptr` (kept as an address so the store stays Send).
#[derive(Clone, Copy)]
struct Backing {
    base: u64,
    len: u64,
    ptr: usize,
}

impl SparseMem {
    /// Back [base, base + len) with the memory at `ptr`: reads and writes there go to it.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as this store (and
    /// every clone of it) is used.
    pub unsafe fn attach(&mut self, base: u64, ptr: *mut u8, len: u64) {
        self.backing.push(Backing { base, len, ptr: ptr as usize });
    }

    /// The backed pointer for `n` bytes at `a`, when [a, a + n) lies in one backed range.
    fn backed(&self, a: u64, n: usize) -> Option<*mut u8> {
        let b = self.backing.iter().find(|b| a >= b.base && a + n as u64 <= b.base + b.len)?;
        Some((b.ptr + (a - b.base) as usize) as *mut u8)
    }

    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let a = addr + done as u64;
            if !self.backing.is_empty() {
                let n = (PAGE - a % PAGE) as usize;
                let n = n.min(data.len() - done);
                if let Some(p) = self.backed(a, n) {
                    // SAFETY: `attach`'s contract; the range was checked by `backed`.
                    unsafe { std::ptr::copy_nonoverlapping(data[done..].as_ptr(), p, n) };
                    done += n;
                    continue;
                }
            }
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(data.len() - done);
            let page = self.pages.entry(a / PAGE).or_insert_with(|| Box::new([0; PAGE as usize]));
            page[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    pub fn read(&self, addr: u64, out: &mut [u8]) {
        let mut done = 0usize;
        while done < out.len() {
            let a = addr + done as u64;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(out.len() - done);
            if let Some(p) = if self.backing.is_empty() { None } else { self.backed(a, n) } {
                // SAFETY: `attach`'s contract; the range was checked by `backed`.
                unsafe { std::ptr::copy_nonoverlapping(p, out[done..].as_mut_ptr(), n) };
                done += n;
                continue;
            }
            match self.pages.get(&(a / PAGE)) {
                Some(p) => out[done..done + n].copy_from_slice(&p[off..off + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
        }
    }

    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// A deterministic digest of the contents (page numbers and bytes, in address order), so
    /// tests can check that a faulting access changed nothing.
    pub fn digest(&self) -> u64 {
        let mut keys: Vec<_> = self.pages.keys().copied().collect();
        keys.sort_unstable();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a
        for k in keys {
            for b in k.to_le_bytes().iter().chain(self.pages[&k].iter()) {
                h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_across_pages_reads_back_and_holes_are_zero() {
        let mut m = SparseMem::default();
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 251) as u8).collect();
        m.write(4090, &data);
        let mut out = vec![0xffu8; 10010];
        m.read(4085, &mut out);
        assert_eq!(&out[..5], &[0; 5]);
        assert_eq!(&out[5..10005], &data[..]);
        assert_eq!(&out[10005..], &[0; 5]);
        assert_eq!(m.pages(), 4);
    }

    #[test]
    fn an_attached_range_is_read_and_written_in_place() {
        let mut m = SparseMem::default();
        let mut outside = vec![0u8; 8192];
        unsafe { m.attach(0x10000, outside.as_mut_ptr(), 8192) };
        m.write(0x10ffe, &[1, 2, 3, 4]);
        m.write(0xfffe, &[9, 9, 7, 7]);
        assert_eq!(&outside[0xffe..0x1002], &[1, 2, 3, 4]);
        assert_eq!(&outside[..2], &[7, 7]);
        let mut out = [0u8; 4];
        m.read(0xfffe, &mut out);
        assert_eq!(out, [9, 9, 7, 7]);
        assert_eq!(m.pages(), 1);
    }
}
