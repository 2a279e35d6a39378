//! A small random trace written with `trace::Writer` reads back equal through `trace::Reader`
//! (streamed 5 bytes per `read`), and a few of its strict prefixes fail as truncated or corrupt,
//! never read as a shorter trace.
//!
//! Input bytes: tenants (1..=300, so tenant varints take 1 or 2 bytes), pages (1..=200), meta
//! length, then 4 bytes per packet: the tenant (next, same or explicit, the writer's three
//! encodings) and, per translation, the page (high bit: repeat this tenant's last page).
#![no_main]

use devlend_hypertrio::trace::{Header, Reader, Writer};
use devlend_hypertrio::workload::{Packet, PageInfo};
use libfuzzer_sys::fuzz_target;
use std::io::Read;

struct Trickle<'a>(&'a [u8]);
impl Read for Trickle<'_> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = b.len().min(5).min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    let [t, p, m, rest @ ..] = data else { return };
    let tenants = 1 + u32::from_le_bytes([*t, *p, 0, 0]) % 300;
    let npages = 1 + *p as u64 % 200;
    let (meta, body) = rest.split_at((*m as usize % 16).min(rest.len()));
    let h = Header {
        tenants,
        pages: (0..npages)
            .map(|i| {
                let size = if (i ^ *m as u64) % 3 == 0 {
                    0x20_0000
                } else {
                    0x1000
                };
                PageInfo {
                    iova: 0x4000_0000 + i * 0x20_0000,
                    size,
                }
            })
            .collect(),
        meta: String::from_utf8_lossy(meta).into_owned(),
    };
    let mut last: Vec<Option<[u16; 3]>> = vec![None; tenants as usize];
    let mut prev = tenants - 1;
    let packets: Vec<Packet> = body
        .chunks_exact(4)
        .map(|b| {
            let sid = match b[0] >> 6 {
                0 | 1 => (prev + 1) % tenants,
                2 => prev,
                _ => u32::from(b[0] & 0x3f) * 7 % tenants,
            };
            let mut pages = [0u16; 3];
            for k in 0..3 {
                pages[k] = match last[sid as usize] {
                    Some(l) if b[k + 1] & 0x80 != 0 => l[k],
                    _ => (b[k + 1] as u64 % npages) as u16,
                };
            }
            last[sid as usize] = Some(pages);
            prev = sid;
            Packet { sid, pages }
        })
        .collect();
    let mut w = Writer::new(Vec::new(), &h).expect("a valid header");
    for p in &packets {
        w.push(p).expect("a valid packet");
    }
    let bytes = w.finish().unwrap();
    let r = Reader::new("rt.dlt", Trickle(&bytes)).unwrap();
    assert_eq!(r.header, h);
    let back: Result<Vec<Packet>, _> = r.collect();
    assert_eq!(back.as_ref(), Ok(&packets));
    for cut in [
        bytes.len() - 1,
        bytes.len() - 25,
        bytes.len() - 26,
        bytes.len() / 2,
        24,
    ] {
        let e = Reader::new("rt.dlt", &bytes[..cut]).and_then(|r| r.collect::<Result<Vec<_>, _>>());
        let e = e.expect_err("a strict prefix read as a whole trace").to_string();
        assert!(
            e.contains("truncated") || e.contains("corrupt"),
            "cut {cut}: {e}"
        );
    }
});
