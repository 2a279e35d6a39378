//! Functional memory: a sparse byte store of 4 KiB pages, one per host RAM and one per BAR.
//! Unwritten bytes read as zero.

use rustc_hash::FxHashMap;

const PAGE: u64 = 4096;

#[derive(Clone, Default)]
pub struct SparseMem {
    pages: FxHashMap<u64, Box<[u8; PAGE as usize]>>,
}

impl SparseMem {
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let a = addr + done as u64;
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
}
