//! The bytes a TLP carries, stored or loaded where its route delivers them (`crate::memory`'s
//! sparse memory of a host's RAM or a BAR), page by page, along the route its flow carries
//! while that stands (`cache`); a failed page recorded (an IOMMU fault in that IOMMU's log too).

use super::cache::{CarriedRoute, PAGE};
use super::{Arrival, Failure, Requester, Target};
use crate::events::Event;
use crate::fabric::Fabric;
use devlend_wire::TlpHeader;

impl Fabric {
    /// Write bytes as `req` would, one TLP per 4 KiB-bounded chunk (TLPs never cross 4 KiB).
    /// Chunks that fail are recorded as events and change nothing; returns the bytes delivered
    /// and the first failure.
    pub fn write(&mut self, req: Requester, addr: u64, data: &[u8]) -> (usize, Option<Failure>) {
        let header = TlpHeader::write(self.requester_rid(req), addr, data.len() as u32);
        let (delivered, first, _) = self.write_pages(req, &header, data, &mut None);
        (delivered, first)
    }

    /// A write TLP from `origin` lands now: its bytes are stored where its route delivers them
    /// (one route per 4 KiB page it spans, as [`Fabric::write`]), along the route its flow
    /// carries while that stands ([`Fabric::arrival_along`]; `carried` is left with the route of
    /// the TLP's last page). The first failure (recorded), or where the TLP's first byte arrived
    /// with its header as the path rewrote it.
    pub fn write_tlp(&mut self, origin: Requester, header: &TlpHeader, data: &[u8], carried: &mut Option<CarriedRoute>) -> Result<Arrival, Failure> {
        match self.write_pages(origin, header, data, carried) {
            (_, Some(f), _) => Err(f),
            (_, None, Some(a)) => Ok(a),
            // Nothing to write: where its first byte would have gone.
            (_, None, None) => self.arrival_along(carried, origin, header),
        }
    }

    /// Store `data` page by page; bytes delivered, the first failure, the first page's arrival.
    fn write_pages(
        &mut self,
        req: Requester,
        header: &TlpHeader,
        data: &[u8],
        carried: &mut Option<CarriedRoute>,
    ) -> (usize, Option<Failure>, Option<Arrival>) {
        let mut done = 0usize;
        let mut first = None;
        let mut delivered = 0usize;
        let mut head = None;
        while done < data.len() {
            let a = header.addr.wrapping_add(done as u64);
            let n = ((PAGE - a % PAGE) as usize).min(data.len() - done);
            match self.arrival_along(carried, req, &TlpHeader { addr: a, len: n as u32, ..*header }) {
                Ok(arrival) => {
                    self.store(arrival.target, &data[done..done + n]);
                    delivered += n;
                    if done == 0 {
                        head = Some(arrival);
                    }
                }
                Err(f) => {
                    self.record(f);
                    first.get_or_insert(f);
                }
            }
            done += n;
        }
        (delivered, first, head)
    }

    /// Read bytes as `req` would. Failed chunks read as all ones (a master abort) and are recorded.
    pub fn read(&mut self, req: Requester, addr: u64, len: usize) -> (Vec<u8>, Option<Failure>) {
        let header = TlpHeader::read(self.requester_rid(req), addr, len as u32, 0);
        self.read_pages(req, &header, len, &mut None)
    }

    /// A read request TLP from `origin` reaches its completer now: its `header.len` bytes as
    /// [`Fabric::read`] reads them, along the route its flow carries while that stands
    /// ([`Fabric::arrival_along`]).
    pub fn read_tlp(&mut self, origin: Requester, header: &TlpHeader, carried: &mut Option<CarriedRoute>) -> (Vec<u8>, Option<Failure>) {
        self.read_pages(origin, header, header.len as usize, carried)
    }

    /// Read `len` bytes at `header.addr` page by page (failed pages all ones, recorded).
    fn read_pages(&mut self, origin: Requester, header: &TlpHeader, len: usize, carried: &mut Option<CarriedRoute>) -> (Vec<u8>, Option<Failure>) {
        let mut out = vec![0u8; len];
        let mut done = 0usize;
        let mut first = None;
        while done < len {
            let a = header.addr.wrapping_add(done as u64);
            let n = ((PAGE - a % PAGE) as usize).min(len - done);
            match self.arrival_along(carried, origin, &TlpHeader { addr: a, len: n as u32, ..*header }) {
                Ok(arrival) => self.load(arrival.target, &mut out[done..done + n]),
                Err(f) => {
                    self.record(f);
                    first.get_or_insert(f);
                    out[done..done + n].fill(0xff);
                }
            }
            done += n;
        }
        (out, first)
    }

    /// Record a failed access (an IOMMU fault goes to that IOMMU's fault log too).
    pub fn record(&mut self, f: Failure) {
        if let Failure::Iommu { host, fault } = f {
            self.iommus[host as usize].record(fault);
        }
        self.events.push(Event::Failed(f));
    }

    fn store(&mut self, t: Target, data: &[u8]) {
        match t {
            Target::Ram { host, addr } => self.ram[host as usize].write(addr, data),
            Target::Bar { func, bar, offset } => self.bar_mem.entry((func, bar)).or_default().write(offset, data),
            Target::Msi { host, addr } => {
                let mut d = [0u8; 4];
                let n = data.len().min(4);
                d[..n].copy_from_slice(&data[..n]);
                // With remapping the route checked the entry; the vector raised is the entry's.
                let irte = self.iommus[host as usize].irt.as_ref().and_then(|t| t.entry_at(addr));
                let data = irte.map_or(u32::from_le_bytes(d), |e| e.vector as u32);
                self.events.push(Event::Msi { host, addr, data });
            }
            Target::Cpu { .. } | Target::Func { .. } => {}
        }
    }

    fn load(&self, t: Target, out: &mut [u8]) {
        match t {
            Target::Ram { host, addr } => self.ram[host as usize].read(addr, out),
            Target::Bar { func, bar, offset } => match self.bar_mem.get(&(func, bar)) {
                Some(m) => m.read(offset, out),
                None => out.fill(0),
            },
            _ => out.fill(0xff),
        }
    }
}
