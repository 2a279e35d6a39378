//! Identify data structures (NVMe 1.3 §5.15): what an unmodified driver (Linux's nvme) reads to
//! bring the controller up and find its namespace.

use super::{Controller, MAX_QUEUE_ENTRIES};

/// The one namespace's ID.
const NSID: u32 = 1;
/// PCI vendor and subsystem vendor IDs the controller reports (Intel's, as the modelled Optanes).
const VID: u16 = 0x8086;
const SSVID: u16 = 0x8086;
/// Model number.
const MN: &str = "devlnd modelled NVMe";

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
            _ => identify_controller(&mut d, &format!("devlend{:013}", self.func)),
        }
        d
    }
}

/// Identify Controller (Figure 109) of the controller with serial number `sn`.
fn identify_controller(d: &mut [u8], sn: &str) {
    put(d, 0, &VID.to_le_bytes());
    put(d, 2, &SSVID.to_le_bytes());
    ascii(d, 4, 20, sn); // SN
    ascii(d, 24, 40, MN);
    ascii(d, 64, 8, "devlend"); // FR
    d[77] = 5; // MDTS: 2^5 minimum pages (128 KiB) per command
    put(d, 80, &0x0001_0300u32.to_le_bytes()); // VER 1.3
    d[512] = 0x66; // SQES: 64-byte entries
    d[513] = 0x44; // CQES: 16-byte entries
    put(d, 514, &(MAX_QUEUE_ENTRIES as u16 - 1).to_le_bytes()); // MAXCMD
    put(d, 516, &NSID.to_le_bytes()); // NN
                                      // SUBNQN (bytes 768-1023, required from NVMe 1.2.1 on; Linux warns "missing or invalid
                                      // SUBNQN field" without it): a drive with no NQN from a naming authority reports the form
                                      // §7.9 defines for one, "nqn.2014.08.org.nvmexpress:" then VID and SSVID in hex, then SN
                                      // and MN as the structure holds them (space-padded). NUL-padded to 256 bytes.
    let nqn = [b"nqn.2014.08.org.nvmexpress:".as_slice(), format!("{VID:04x}{SSVID:04x}").as_bytes(), &d[4..24], &d[24..64]].concat();
    put(d, 768, &nqn);
}

#[cfg(test)]
mod tests {
    /// The SUBNQN field holds the §7.9 form built from the structure's own VID, SSVID, SN and MN.
    #[test]
    fn identify_controller_reports_a_subsystem_nqn() {
        let mut d = vec![0u8; 4096];
        super::identify_controller(&mut d, "devlend0000000000003");
        let field = &d[768..1024];
        let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
        let nqn = std::str::from_utf8(&field[..end]).unwrap();
        let sn = std::str::from_utf8(&d[4..24]).unwrap();
        let mn = std::str::from_utf8(&d[24..64]).unwrap();
        assert_eq!(nqn, format!("nqn.2014.08.org.nvmexpress:80868086{sn}{mn}"));
        assert_eq!(nqn.len(), 27 + 8 + 20 + 40);
        assert!(field[end..].iter().all(|&b| b == 0));
    }
}
