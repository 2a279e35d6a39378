//! Workload (a): the synthetic tenant generator of 002 §IV-D and the hyper-trace interleaving of
//! §IV-B / §V-A, streamed packet by packet (nothing is materialised; memory is O(tenants)).
//!
//! One tenant, as 002 §IV-D characterises a NIC's gIOVA stream (Fig 8):
//! - one 4 KB ring page (gIOVA 0x34800000) read for every packet (the ring-buffer pointer);
//! - 32 data pages of 2 MB from 0xbbe00000, each used ~1500 times in a row, in ring order
//!   (Fig 8b); `data_streams` buffers of the ring are in use at once, spread evenly over it
//!   (iperf3: one; mediastream/websearch: many, picked at random per packet, "less regular", §V-C);
//! - the notification write of each packet goes to one of `notify_pages` 4 KB pages in the
//!   0xf0000000 region, in rotation. 002 names the three translations per packet (§IV-C) but not
//!   where the third lands; the page count is chosen so that ring + data streams + notification
//!   pages = the active translation set 002 §V-C measures (8 / 32 / 36); each notification page
//!   is placed in its own 2 MB region, i.e. its own DevTLB row, not the ring page's (assumed);
//! - a tenant stays on one data stream and one notification page for `run_packets` of its
//!   packets (a descriptor batch / interrupt-moderation interval, assumed), then moves to the
//!   next (iperf3: in order; the others: a random stream), so its short-term working set is
//!   three pages and its active set over a few hundred packets is the §V-C size;
//! - ~70 4 KB set-up pages from 0xf0000000 touched a few times right after NIC initialisation
//!   (the first packets of the log), as 002 §IV-D found them.
//!
//! All tenants use the same gIOVAs (same guest driver, §IV-D). Each tenant starts at its own
//! (seeded) point of its data ring, as logs recorded in separate runs do.
//!
//! Length: a constructed trace stops when any tenant runs out (§V-A), so each tenant contributes
//! Table III's minimum per-tenant count (x 1024 = Table III's total), or `packets_per_tenant`.
//! Interleaving (§IV-B): round robin or random, `burst` consecutive packets per tenant (RR1,
//! RR4, RAND1).

use crate::params::{params, Profile};

/// A page a tenant touches: index into `Layout::pages`.
pub type PageId = u16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageInfo {
    pub iova: u64,
    pub size: u64,
}

/// The gIOVA layout every tenant's guest driver uses (002 §IV-D).
#[derive(Clone, Debug)]
pub struct Layout {
    pub pages: Vec<PageInfo>,
    pub ring: PageId,
    pub data0: PageId,
    pub data_pages: u32,
    pub notify0: PageId,
    pub notify_pages: u32,
    pub setup0: PageId,
    pub setup_pages: u32,
}

impl Layout {
    pub fn new(notify_pages: u32) -> Layout {
        let p = params();
        let mut pages = vec![PageInfo {
            iova: p.ring_iova,
            size: 0x1000,
        }];
        let data0 = pages.len() as PageId;
        for k in 0..p.data_pages as u64 {
            pages.push(PageInfo {
                iova: p.data_iova + k * 0x20_0000,
                size: 0x20_0000,
            });
        }
        let notify0 = pages.len() as PageId;
        // Notification pages: one per 2 MB region above setup_iova, skipping the region whose
        // low 3 index bits equal the ring page's (so they share no DevTLB row with it).
        let ring_row = (p.ring_iova >> 21) & 7;
        let mut region = p.setup_iova >> 21;
        for _ in 0..notify_pages {
            while (region & 7) == ring_row {
                region += 1;
            }
            pages.push(PageInfo {
                iova: (region << 21) + 0x10_0000,
                size: 0x1000,
            });
            region += 1;
        }
        let setup0 = pages.len() as PageId;
        for k in 0..p.setup_pages as u64 {
            pages.push(PageInfo {
                iova: p.setup_iova + k * 0x1000,
                size: 0x1000,
            });
        }
        Layout {
            pages,
            ring: 0,
            data0,
            data_pages: p.data_pages,
            notify0,
            notify_pages,
            setup0,
            setup_pages: p.setup_pages,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    RoundRobin,
    Random,
}

/// One packet of the hyper-trace: the tenant (SID = VF index) and its three translations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub sid: u32,
    pub pages: [PageId; 3],
}

#[derive(Clone, Debug)]
pub struct WorkloadSpec {
    pub profile: String,
    pub tenants: u32,
    pub order: Order,
    pub burst: u32,
    /// None: Table III's per-tenant count (translations_min / 3 packets). Some(n): n packets per
    /// tenant taken from the steady state (the set-up packets skipped), for quick runs.
    pub packets_per_tenant: Option<u64>,
    pub seed: u64,
}

impl WorkloadSpec {
    /// "RR1", "RR4", "RAND1", ...
    pub fn parse_order(s: &str) -> Result<(Order, u32), String> {
        let u = s.to_ascii_uppercase();
        let (o, n) = if let Some(n) = u.strip_prefix("RAND") {
            (Order::Random, n)
        } else if let Some(n) = u.strip_prefix("RR") {
            (Order::RoundRobin, n)
        } else {
            return Err(format!(
                "interleaving '{s}': expected RR<n> or RAND<n>, e.g. RR1, RR4, RAND1"
            ));
        };
        let b: u32 = n
            .parse()
            .map_err(|_| format!("interleaving '{s}': burst size must be a positive integer"))?;
        if b == 0 {
            return Err(format!("interleaving '{s}': burst size must be at least 1"));
        }
        Ok((o, b))
    }

    pub fn new(profile: &str, tenants: u32, order: &str) -> Result<WorkloadSpec, String> {
        let (order, burst) = Self::parse_order(order)?;
        Ok(WorkloadSpec {
            profile: profile.to_string(),
            tenants,
            order,
            burst,
            packets_per_tenant: None,
            seed: 1,
        })
    }
}

/// SplitMix64: the seeded generator behind every random choice in traces (deterministic).
#[inline]
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct Tenant {
    left: u64,
    pkt: u64,
    setup_left: u32,
    phase: u32,
    rng: u64,
    stream_ctr: Vec<u32>,
    stream: u32,
}

/// The streamed hyper-trace.
pub struct Trace {
    pub layout: Layout,
    prof: Profile,
    reuse: u32,
    run: u32,
    setup_touches: u32,
    tenants: Vec<Tenant>,
    turns: Interleave,
    done: bool,
    pub packets_emitted: u64,
}

/// Whose packet comes next in a hyper-trace (002 §IV-B, §V-A): `burst` packets of one tenant, then
/// the next in round-robin order or a random one (seeded), over `n` tenants.
pub(crate) struct Interleave {
    order: Order,
    burst: u32,
    n: u32,
    cur: u32,
    in_burst: u32,
    rng: u64,
}

impl Interleave {
    pub(crate) fn new(order: Order, burst: u32, n: u32, seed: u64) -> Interleave {
        let mut rng = seed ^ 0x5DEE_CE66_D1CE_4E5B;
        let cur = match order {
            Order::RoundRobin => 0,
            Order::Random => (splitmix(&mut rng) % n as u64) as u32,
        };
        Interleave {
            order,
            burst,
            n,
            cur,
            in_burst: 0,
            rng,
        }
    }

    /// The tenant of the next packet.
    #[inline]
    pub(crate) fn next_tenant(&mut self) -> u32 {
        if self.in_burst == self.burst {
            self.in_burst = 0;
            self.cur = match self.order {
                Order::RoundRobin => (self.cur + 1) % self.n,
                Order::Random => (splitmix(&mut self.rng) % self.n as u64) as u32,
            };
        }
        self.in_burst += 1;
        self.cur
    }
}

impl Trace {
    pub fn new(spec: &WorkloadSpec) -> Result<Trace, String> {
        let p = params();
        let prof = p.profile(&spec.profile)?;
        if spec.tenants == 0 {
            return Err("tenants: 0 tenants: need at least one".into());
        }
        if spec.tenants > 65_536 {
            return Err(format!(
                "tenants: {} tenants: at most 65536 source IDs",
                spec.tenants
            ));
        }
        if spec.burst == 0 {
            return Err("burst: must be at least 1".into());
        }
        if prof.data_streams == 0 || prof.notify_pages == 0 {
            return Err(format!(
                "workload '{}': data_streams and notify_pages must be positive",
                spec.profile
            ));
        }
        let tpp = p.translations_per_packet as u64;
        let (packets, setup) = match spec.packets_per_tenant {
            Some(0) => return Err("packets_per_tenant: must be at least 1".into()),
            Some(n) => (n, 0),
            None => (
                prof.translations_min / tpp,
                (p.setup_pages * p.setup_touches).div_ceil(tpp as u32),
            ),
        };
        let layout = Layout::new(prof.notify_pages);
        let tenants = (0..spec.tenants)
            .map(|t| {
                let mut r = spec.seed.wrapping_mul(0x1000_0000_01B3)
                    ^ (t as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F);
                let phase = (splitmix(&mut r) % layout.data_pages as u64) as u32;
                // steady-state quick runs start at a random point of the page's 1500-access run too
                let off = if spec.packets_per_tenant.is_some() {
                    (splitmix(&mut r) % p.data_page_reuse as u64) as u32
                } else {
                    0
                };
                Tenant {
                    left: packets,
                    pkt: 0,
                    setup_left: setup,
                    phase,
                    rng: r,
                    stream_ctr: vec![off; prof.data_streams as usize],
                    stream: 0,
                }
            })
            .collect();
        Ok(Trace {
            layout,
            reuse: p.data_page_reuse,
            run: p.run_packets.max(1),
            setup_touches: p.setup_touches,
            prof,
            tenants,
            turns: Interleave::new(spec.order, spec.burst, spec.tenants, spec.seed),
            done: false,
            packets_emitted: 0,
        })
    }

    pub fn tenants(&self) -> u32 {
        self.tenants.len() as u32
    }

    fn tenant_packet(&mut self, sid: u32) -> Packet {
        let l = &self.layout;
        let t = &mut self.tenants[sid as usize];
        t.left -= 1;
        if t.setup_left > 0 {
            // NIC initialisation: each set-up page `setup_touches` times, three per packet.
            let total = l.setup_pages * self.setup_touches;
            let done = (total.div_ceil(3) - t.setup_left) * 3;
            t.setup_left -= 1;
            let pg = |i: u32| l.setup0 + ((done + i).min(total - 1) % l.setup_pages) as PageId;
            return Packet {
                sid,
                pages: [pg(0), pg(1), pg(2)],
            };
        }
        let k = t.pkt;
        t.pkt += 1;
        let s = self.prof.data_streams;
        let run = k / self.run as u64;
        if k.is_multiple_of(self.run as u64) {
            t.stream = if self.prof.random_streams {
                (splitmix(&mut t.rng) % s as u64) as u32
            } else {
                (run % s as u64) as u32
            };
        }
        let stream = t.stream;
        let c = t.stream_ctr[stream as usize];
        t.stream_ctr[stream as usize] = c + 1;
        let data = (t.phase + stream * l.data_pages / s + c / self.reuse) % l.data_pages;
        let notify = (run % l.notify_pages as u64) as u32;
        Packet {
            sid,
            pages: [
                l.ring,
                l.data0 + data as PageId,
                l.notify0 + notify as PageId,
            ],
        }
    }
}

impl Iterator for Trace {
    type Item = Packet;
    #[inline]
    fn next(&mut self) -> Option<Packet> {
        if self.done {
            return None;
        }
        let cur = self.turns.next_tenant();
        if self.tenants[cur as usize].left == 0 {
            // 002 §V-A: the trace stops when any tenant runs out of requests.
            self.done = true;
            return None;
        }
        self.packets_emitted += 1;
        Some(self.tenant_packet(cur))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_single_tenant_pattern_matches_section_iv_d() {
        let spec = WorkloadSpec::new("iperf3", 1, "RR1").unwrap();
        let tr = Trace::new(&spec).unwrap();
        let l = tr.layout.clone();
        let mut counts = vec![0u64; l.pages.len()];
        let mut runs = Vec::new();
        let (mut last, mut run) = (u16::MAX, 0u64);
        let mut n = 0;
        for p in tr {
            n += 1;
            for &pg in &p.pages {
                counts[pg as usize] += 1;
            }
            let d = p.pages[1];
            if (l.data0..l.data0 + 32).contains(&d) {
                if d == last {
                    run += 1
                } else {
                    if run > 0 {
                        runs.push(run)
                    }
                    last = d;
                    run = 1
                }
            }
        }
        assert_eq!(
            n * 3,
            params().profile("iperf3").unwrap().translations_min / 3 * 3
        );
        assert!(
            counts[l.ring as usize] > 22_000,
            "ring page touched by every packet after set-up"
        );
        let mid: Vec<_> = runs[1..runs.len() - 1].to_vec();
        assert!(
            mid.iter().all(|&r| r == 1500),
            "data pages reused 1500 times in a row: {mid:?}"
        );
        assert!(
            (0..70).all(|i| (1..100).contains(&counts[(l.setup0 + i) as usize])),
            "set-up pages touched a few times"
        );
        assert_eq!(l.pages.len(), 1 + 32 + 6 + 70);
    }

    #[test]
    fn interleavings_and_stop_rule() {
        let mut s = WorkloadSpec::new("mediastream", 4, "RR4").unwrap();
        s.packets_per_tenant = Some(8);
        let sids: Vec<u32> = Trace::new(&s).unwrap().map(|p| p.sid).collect();
        assert_eq!(
            sids,
            [
                0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                3, 3, 3, 3
            ]
        );
        s.order = Order::Random;
        s.burst = 1;
        let n = Trace::new(&s).unwrap().count();
        assert!(n < 32, "RAND stops when the first tenant runs out");
        assert!(
            WorkloadSpec::parse_order("RR0").is_err() && WorkloadSpec::parse_order("XX1").is_err()
        );
        s.tenants = 0;
        assert!(Trace::new(&s).err().unwrap().contains("0 tenants"));
    }
}
