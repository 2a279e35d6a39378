//! Each host's decoding BARs as a list sorted by address, for the question every delivery to RAM
//! asks ([`Fabric::decoding_bar`]): does a decoding BAR of this host claim the address? A binary
//! search over the host's few dozen BARs instead of a look at every function's config space and
//! BARs. A host's list is made on first use and dropped with the route cache
//! ([`Fabric::invalidate_routes`]): what moves a BAR or turns its decoding on or off is a config
//! write, which drops both.

use crate::fabric::Fabric;
use crate::model::{FuncId, HostId, Range};
use std::sync::OnceLock;

/// One decoding BAR: its range, function and index.
#[derive(Clone, Copy, Debug)]
struct Claim {
    range: Range,
    func: FuncId,
    bar: u8,
    /// The largest `range.end` of this claim and every one before it in the list: a search
    /// walks back from the last claim starting at or below an address only while this reaches it.
    reach: u64,
}

/// Per host, its decoding BARs sorted by start (made when first asked).
#[derive(Clone, Default)]
pub(crate) struct DecodingBars {
    hosts: Vec<OnceLock<Box<[Claim]>>>,
}

impl DecodingBars {
    pub(crate) fn new(hosts: usize) -> DecodingBars {
        DecodingBars { hosts: (0..hosts).map(|_| OnceLock::new()).collect() }
    }

    /// Forget every host's list (BARs or Memory Space Enable may have changed).
    pub(crate) fn clear(&mut self) {
        for h in &mut self.hosts {
            h.take();
        }
    }
}

impl Fabric {
    /// A decoding BAR of any function in `host` that claims `addr` (the lowest function id, then
    /// its first such BAR, where two overlap), as (function, BAR index, offset in the BAR).
    pub(crate) fn decoding_bar_claim(&self, host: HostId, addr: u64) -> Option<(FuncId, u8, u64)> {
        let claims = self.decoding_bars.hosts[host as usize].get_or_init(|| self.decoding_claims(host));
        let below = claims.partition_point(|c| c.range.start <= addr);
        claims[..below]
            .iter()
            .rev()
            .take_while(|c| c.reach > addr)
            .filter(|c| c.range.contains(addr))
            .min_by_key(|c| (c.func, self.funcs[c.func as usize].bars.iter().position(|b| b.index == c.bar)))
            .map(|c| (c.func, c.bar, addr - c.range.start))
    }

    /// The decoding BARs of `host`'s functions, sorted by start, each with its reach.
    fn decoding_claims(&self, host: HostId) -> Box<[Claim]> {
        let mut claims: Vec<Claim> = self.host_funcs[host as usize]
            .iter()
            .copied()
            .filter(|f| self.decodes(*f))
            .flat_map(|f| self.funcs[f as usize].bars.iter().map(move |b| Claim { range: b.range(), func: f, bar: b.index, reach: 0 }))
            .filter(|c| c.range.start < c.range.end)
            .collect();
        claims.sort_by_key(|c| (c.range.start, c.func));
        let mut reach = 0;
        for c in &mut claims {
            reach = reach.max(c.range.end);
            c.reach = reach;
        }
        claims.into_boxed_slice()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{CMD_BUS_MASTER, CMD_MEMORY, COMMAND};
    use crate::model::{FuncId, HostId};
    use crate::Fabric;

    /// Two hosts: a GPU, an NVMe drive and a NIC in one, a GPU in the other.
    const JSON: &str = r#"{"name":"decoding","hosts":[
        {"name":"l","cpu":"intel-xeon-e5","ram":8589934592,"iommu":false,"root_ports":3},
        {"name":"m","cpu":"intel-xeon-e5","ram":8589934592,"iommu":false,"root_ports":1}],
      "devices":[{"name":"gpu0","profile":"quadro-k420"},{"name":"nvme0","profile":"optane-900p"},
        {"name":"nic0","profile":"sriov-nic"},{"name":"gpu1","profile":"quadro-k420"}],
      "links":[{"a":"l.rp0","b":"gpu0","gen":2,"width":16},{"a":"l.rp1","b":"nvme0","gen":3,"width":4},
        {"a":"l.rp2","b":"nic0","gen":3,"width":8},{"a":"m.rp0","b":"gpu1","gen":2,"width":16}]}"#;

    /// What `decoding_bar` answered before the sorted lists: every decoding function of the host
    /// in id order, its first BAR that holds `addr`.
    fn scan(f: &Fabric, host: HostId, addr: u64) -> Option<(FuncId, u8, u64)> {
        f.host_funcs[host as usize]
            .iter()
            .copied()
            .filter(|g| f.decodes(*g))
            .find_map(|g| f.funcs[g as usize].bar_at(addr).map(|b| (g, b.index, addr - b.addr)))
    }

    /// Each BAR's first, last and one-past-last byte and the bytes around them, in every host.
    fn probes(f: &Fabric) -> Vec<(HostId, u64)> {
        let mut v = Vec::new();
        for h in 0..f.hosts.len() as HostId {
            for g in &f.host_funcs[h as usize] {
                for b in &f.funcs[*g as usize].bars {
                    for a in [b.addr.wrapping_sub(1), b.addr, b.addr + 1, b.addr + b.size / 2, b.addr + b.size - 1, b.addr + b.size] {
                        v.push((h, a));
                    }
                }
            }
            v.push((h, 0));
            v.push((h, u64::MAX));
        }
        v
    }

    fn agree(f: &Fabric) {
        for (h, a) in probes(f) {
            assert_eq!(f.decoding_bar(h, a), scan(f, h, a), "host {h}, address {a:#x}");
        }
    }

    #[test]
    fn the_sorted_lists_answer_as_a_scan_of_every_function() {
        let mut f = crate::build_json(JSON).unwrap();
        agree(&f);
        // Decoding turned off and on again through the config space: the lists follow.
        let g = (0..f.funcs.len() as FuncId).find(|g| !f.funcs[*g as usize].bars.is_empty()).unwrap();
        let host = f.func_host(g);
        let at = f.funcs[g as usize].bars[0].addr;
        assert!(f.decoding_bar(host, at).is_some(), "the first BAR of {} decodes", f.funcs[g as usize].name);
        f.config_write(g, COMMAND, 2, CMD_BUS_MASTER as u32).unwrap();
        assert_eq!(f.decoding_bar(host, at), None, "no longer decoding");
        agree(&f);
        f.config_write(g, COMMAND, 2, (CMD_MEMORY | CMD_BUS_MASTER) as u32).unwrap();
        assert!(f.decoding_bar(host, at).is_some(), "decoding again");
        agree(&f);
    }

    /// BARs made to overlap behind the config space's back (only this crate can): the lowest
    /// function id still answers, as the scan did.
    #[test]
    fn overlapping_bars_answer_with_the_lowest_function() {
        let mut f = crate::build_json(JSON).unwrap();
        let host = f.host_id("l").unwrap();
        let with_bars: Vec<FuncId> = f.host_funcs[host as usize].iter().copied().filter(|g| !f.funcs[*g as usize].bars.is_empty()).collect();
        assert!(with_bars.len() >= 2, "two functions with BARs in host l");
        let (a, b) = (with_bars[0], with_bars[1]);
        // b's first BAR made to start below a's last one and to run past its start.
        let target = *f.funcs[a as usize].bars.last().unwrap();
        let wide = 4 * target.size.max(4096);
        f.funcs[b as usize].bars[0].addr = target.addr.saturating_sub(wide / 2);
        f.funcs[b as usize].bars[0].size = wide;
        f.invalidate_routes();
        agree(&f);
        assert_eq!(f.decoding_bar(host, target.addr).map(|c| c.0), Some(a));
    }
}
