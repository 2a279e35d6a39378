//! Identify data structures (NVMe 1.3 §5.15): what an unmodified driver (Linux's nvme) reads to
//! bring the controller up and find its namespace.

use super::{Controller, MAX_QUEUE_ENTRIES};

/// The one namespace's ID.
const NSID: u32 = 1;

fn put(d: &mut [u8], off: usize, bytes: &[u8]) {
    d[off..off + bytes.len()].copy_from_slice(bytes);
}

/// An ASCII field padded with spaces (§1.5: "ASCII string ... padded with spaces").
fn ascii(d: &mut [u8], off: usize, len: usize, s: &str) {
    d[off..off + len].fill(b' ');
    put(d, off, &s.as_bytes()[..s.len().min(len)]);
}

impl Controller {
    /// The 4 KiB Identify structure for CNS `cns` and namespace `nsid`.
    pub(super) fn identify(&self, cns: u64, nsid: u32) -> Vec<u8> {
        let mut d = vec![0u8; 4096];
        match cns {
            // Namespace (Figure 114): size, capacity, utilisation; LBA format 0 = 512-byte blocks.
            0 if nsid == NSID => {
                put(&mut d, 0, &self.blocks.to_le_bytes());
                put(&mut d, 8, &self.blocks.to_le_bytes());
                put(&mut d, 16, &self.blocks.to_le_bytes());
                d[130] = 9;
            }
            0 => {}
            // Active namespace ID list (CNS 02h): namespace 1.
            2 => put(&mut d, 0, &NSID.to_le_bytes()),
            // Namespace identification descriptors (CNS 03h): none.
            3 => {}
            _ => self.identify_controller(&mut d),
        }
        d
    }

    /// Identify Controller (Figure 109).
    fn identify_controller(&self, d: &mut [u8]) {
        put(d, 0, &0x8086u16.to_le_bytes()); // VID
        put(d, 2, &0x8086u16.to_le_bytes()); // SSVID
        ascii(d, 4, 20, &format!("devlend{:013}", self.func)); // SN
        ascii(d, 24, 40, "devlnd modelled NVMe"); // MN
        ascii(d, 64, 8, "devlend"); // FR
        d[77] = 5; // MDTS: 2^5 minimum pages (128 KiB) per command
        put(d, 80, &0x0001_0300u32.to_le_bytes()); // VER 1.3
        d[512] = 0x66; // SQES: 64-byte entries
        d[513] = 0x44; // CQES: 16-byte entries
        put(d, 514, &(MAX_QUEUE_ENTRIES as u16 - 1).to_le_bytes()); // MAXCMD
        put(d, 516, &NSID.to_le_bytes()); // NN
    }
}
