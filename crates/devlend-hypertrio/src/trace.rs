//! The binary hyper-trace format (`.dlt`, version 1): the translation requests of a hyper-tenant
//! trace (002 §IV-B, the Trace Constructor's output that the performance model of §IV-C reads),
//! streamed in both directions in bounded memory, so that a 1024-tenant, 70-million-translation
//! trace (002 Table III, iperf3) never has to be in memory.
//!
//! Logically a trace is a sequence of translation records (tenant, gIOVA page, kind), where kind
//! is the translation's place in its packet: 0 ring-buffer pointer, 1 data buffer, 2 notification
//! (002 §IV-C: every packet needs three). The three records of a packet share their tenant and
//! are stored together, as one packet record. All integers are little-endian.
//!
//! Header:
//! ```text
//! offset size
//!  0      8   magic 89 44 4C 54 0D 0A 1A 0A ("\x89DLT\r\n\x1a\n": catches text-mode mangling)
//!  8      2   version = 1
//! 10      2   translations per packet = 3
//! 12      4   tenants T (tenant IDs 0..T; 1..=65280)
//! 16      4   pages P (1..=65535): the page dictionary below
//! 20      4   meta length M (at most 65536)
//! 24   16*P   pages: gIOVA (u64, aligned to its size) and size (u64: 4096 or 2097152)
//!  ..     M   meta: UTF-8 JSON describing how the trace was made (inputs, order, seed)
//! ```
//! Body: packet records until the end mark. A packet record is a control byte `c` and varints
//! (unsigned LEB128):
//! - `c & 3`, the tenant: 0 the previous packet's tenant + 1 (mod T; the first packet's
//!   "previous" is T - 1), 1 the previous packet's tenant, 2 a varint tenant follows; 3 invalid;
//! - bit 2 + k (k = 0, 1, 2): translation k's page is the page of translation k of this tenant's
//!   previous packet; clear: a varint page index (into the dictionary) follows, in k order;
//! - bits 5-7 zero. Round robin with pages reused 1500 times in a row (002 §IV-D) makes most
//!   packets one byte.
//!
//! End record: the byte 0xFF, packets (u64), FNV-1a 64-bit hash of the body bytes (u64), and
//! `DLTEND\0\0`; nothing may follow. A file that stops before it is truncated; a wrong hash or
//! count is corruption. Readers report the file, the byte offset and the packet number.
//!
//! Reading cost: the replay decodes nearly every packet from the one byte 0x1C (next tenant, all
//! three pages repeated), so `Reader::quick` takes that record alone, without the general path's
//! division, per-page branches, slice hash and `HtResult<Option<Packet>>`, and leaves any other
//! byte (and every error) to it; the replay's `Source::quick` calls it out of the general path's
//! register saves (BENCHMARKS.md, issue 33, s27-replay: 142 -> ~45 instructions per packet).

use crate::error::{HtError, HtResult};
use crate::workload::{Packet, PageId, PageInfo};
use std::io::{Read, Seek, SeekFrom, Write};

pub const MAGIC: [u8; 8] = *b"\x89DLT\r\n\x1a\n";
pub const VERSION: u16 = 1;
const END_MAGIC: [u8; 8] = *b"DLTEND\0\0";
const END_MARK: u8 = 0xFF;
const FOOTER_LEN: u64 = 25;
pub const MAX_PAGES: usize = 65535;
pub const MAX_TENANTS: u32 = 255 * 256;
const MAX_META: usize = 1 << 16;
const NONE: PageId = PageId::MAX;
const BUF: usize = 1 << 16;
/// The general path refills the buffer when fewer bytes than this are left (more than a packet
/// record's longest, 1 + 4 x 5); `Reader::quick` leaves those last bytes to it, so reads (and a
/// read's error) happen where they always did.
const REFILL: usize = 24;
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x100_0000_01b3;
/// The control byte of a packet of the next tenant (`c & 3 == 0`) whose three pages are all its
/// previous packet's (bits 2-4): the whole record, and nearly every packet of a round-robin trace.
const NEXT_ALL_REPEATED: u8 = 0x1C;

#[inline]
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = fnv_byte(h, b);
    }
    h
}

#[inline(always)]
fn fnv_byte(h: u64, b: u8) -> u64 {
    (h ^ b as u64).wrapping_mul(FNV_PRIME)
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// What a trace holds, from its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub tenants: u32,
    pub pages: Vec<PageInfo>,
    pub meta: String,
}

/// The page-table depth the logs a trace was built from recorded (`walk_levels` in its meta).
pub fn walk_levels(h: &Header) -> Option<u32> {
    let meta: serde_json::Value = serde_json::from_str(&h.meta).ok()?;
    meta.get("walk_levels")?.as_u64().map(|l| l as u32)
}

impl Header {
    pub fn check(&self) -> HtResult<()> {
        if self.tenants == 0 || self.tenants > MAX_TENANTS {
            return Err(HtError::range("tenants", self.tenants, format!("1..={MAX_TENANTS}")));
        }
        if self.pages.is_empty() || self.pages.len() > MAX_PAGES {
            return Err(HtError::range("pages", self.pages.len(), format!("1..={MAX_PAGES}")));
        }
        if let Some((i, p)) =
            self.pages.iter().enumerate().find(|(_, p)| !(p.size == 0x1000 || p.size == 0x20_0000) || !p.iova.is_multiple_of(p.size) || p.iova >> 48 != 0)
        {
            return Err(HtError::range(
                format!("page {i}"),
                format_args!("gIOVA {:#x} size {:#x}", p.iova, p.size),
                "a 4 KiB or 2 MiB page, aligned, below 2^48",
            ));
        }
        if self.meta.len() > MAX_META {
            return Err(HtError::range("meta", format_args!("{} bytes", self.meta.len()), format!("at most {MAX_META}")));
        }
        Ok(())
    }
}

/// Streams packets into a `.dlt` trace; `finish` writes the end record.
pub struct Writer<W: Write> {
    w: W,
    buf: Vec<u8>,
    tenants: u32,
    npages: u32,
    prev: u32,
    last: Vec<[PageId; 3]>,
    packets: u64,
    hash: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(mut w: W, h: &Header) -> HtResult<Writer<W>> {
        h.check()?;
        let mut b = Vec::with_capacity(24 + 16 * h.pages.len() + h.meta.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(&h.tenants.to_le_bytes());
        b.extend_from_slice(&(h.pages.len() as u32).to_le_bytes());
        b.extend_from_slice(&(h.meta.len() as u32).to_le_bytes());
        for p in &h.pages {
            b.extend_from_slice(&p.iova.to_le_bytes());
            b.extend_from_slice(&p.size.to_le_bytes());
        }
        b.extend_from_slice(h.meta.as_bytes());
        w.write_all(&b).map_err(HtError::io("trace", "write"))?;
        Ok(Writer {
            w,
            buf: Vec::with_capacity(BUF + 32),
            tenants: h.tenants,
            npages: h.pages.len() as u32,
            prev: h.tenants - 1,
            last: vec![[NONE; 3]; h.tenants as usize],
            packets: 0,
            hash: FNV0,
        })
    }

    pub fn push(&mut self, p: &Packet) -> HtResult<()> {
        if p.sid >= self.tenants || p.pages.iter().any(|&g| g as u32 >= self.npages) {
            return Err(HtError::Packet { packet: self.packets, tenant: p.sid, pages: p.pages, tenants: self.tenants, npages: self.npages });
        }
        let start = self.buf.len();
        self.buf.push(0);
        let mut c = if p.sid == (self.prev + 1) % self.tenants {
            0
        } else if p.sid == self.prev {
            1
        } else {
            put_varint(&mut self.buf, p.sid);
            2
        };
        let last = &mut self.last[p.sid as usize];
        for (k, (l, &pg)) in last.iter().zip(&p.pages).enumerate() {
            if *l == pg {
                c |= 4 << k;
            } else {
                put_varint(&mut self.buf, pg as u32);
            }
        }
        *last = p.pages;
        self.buf[start] = c;
        self.prev = p.sid;
        self.packets += 1;
        if self.buf.len() >= BUF {
            self.flush_body()?;
        }
        Ok(())
    }

    fn flush_body(&mut self) -> HtResult<()> {
        self.hash = fnv(self.hash, &self.buf);
        self.w.write_all(&self.buf).map_err(HtError::io("trace", "write"))?;
        self.buf.clear();
        Ok(())
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Write the end record; returns the inner writer.
    pub fn finish(mut self) -> HtResult<W> {
        self.flush_body()?;
        let mut b = vec![END_MARK];
        b.extend_from_slice(&self.packets.to_le_bytes());
        b.extend_from_slice(&self.hash.to_le_bytes());
        b.extend_from_slice(&END_MAGIC);
        self.w.write_all(&b).map_err(HtError::io("trace", "write"))?;
        self.w.flush().map_err(HtError::io("trace", "write"))?;
        Ok(self.w)
    }
}

/// Write a whole packet stream to `path` (through `path.part`, renamed at the end, so a failed
/// write leaves no trace file behind). `progress(packets)` is called every 2^20 packets.
pub fn write_file(path: &str, h: &Header, packets: impl Iterator<Item = HtResult<Packet>>, progress: &mut dyn FnMut(u64)) -> HtResult<u64> {
    let part = format!("{path}.part");
    let run = || -> HtResult<u64> {
        let f = std::fs::File::create(&part).map_err(HtError::io(&part, "create"))?;
        let placed = |e: HtError| match e {
            HtError::Io { op, message, .. } => HtError::Io { path: path.into(), op, message },
            e => e.in_file(path),
        };
        let mut w = Writer::new(std::io::BufWriter::with_capacity(BUF, f), h).map_err(placed)?;
        for p in packets {
            w.push(&p?).map_err(placed)?;
            if w.packets() & 0xF_FFFF == 0 {
                progress(w.packets());
            }
        }
        let n = w.packets();
        w.finish().map_err(placed)?;
        std::fs::rename(&part, path).map_err(HtError::io(path, "rename"))?;
        Ok(n)
    };
    let r = run();
    if r.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    r
}

/// Streams the packets of a `.dlt` trace from any reader, 64 KiB at a time.
pub struct Reader<R: Read> {
    name: String,
    r: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    eof: bool,
    /// File offset of `buf[0]`.
    base: u64,
    pub header: Header,
    /// Packets the end record announces, when the reader could look (`open`).
    pub expected_packets: Option<u64>,
    prev: u32,
    last: Vec<[PageId; 3]>,
    packets: u64,
    hash: u64,
    done: bool,
}

impl Reader<std::fs::File> {
    /// Open a trace file: header read and checked, end record checked first (a truncated file
    /// fails here, not after a long replay).
    pub fn open(path: &str) -> HtResult<Reader<std::fs::File>> {
        let mut f = HtError::open_regular(path)?;
        let io = HtError::io(path, "read");
        let size = f.seek(SeekFrom::End(0)).map_err(&io)?;
        let mut tail = [0u8; FOOTER_LEN as usize];
        let expected = if size >= 24 + FOOTER_LEN {
            f.seek(SeekFrom::Start(size - FOOTER_LEN)).map_err(&io)?;
            f.read_exact(&mut tail).map_err(&io)?;
            (tail[0] == END_MARK && tail[17..] == END_MAGIC).then(|| u64::from_le_bytes(tail[1..9].try_into().unwrap()))
        } else {
            None
        };
        f.seek(SeekFrom::Start(0)).map_err(&io)?;
        let mut r = Reader::new(path, f)?;
        match expected {
            Some(n) => r.expected_packets = Some(n),
            None => {
                return Err(
                    r.err_at(size, format!("truncated or not finished: the file ({size} bytes) does not end with the end record (0xFF, counts, \"DLTEND\")"))
                )
            }
        }
        Ok(r)
    }
}

impl<R: Read> Reader<R> {
    /// Read and check the header; `name` is used in errors.
    pub fn new(name: &str, r: R) -> HtResult<Reader<R>> {
        let mut rd = Reader {
            name: name.to_string(),
            r,
            buf: vec![0; BUF].into_boxed_slice(),
            pos: 0,
            len: 0,
            eof: false,
            base: 0,
            header: Header { tenants: 1, pages: Vec::new(), meta: String::new() },
            expected_packets: None,
            prev: 0,
            last: Vec::new(),
            packets: 0,
            hash: FNV0,
            done: false,
        };
        let fixed = rd.read_bytes(24, "header")?.to_vec();
        if fixed[..8] != MAGIC {
            return Err(rd.err_at(0, "not a devlend trace: bad magic (expected \\x89DLT\\r\\n\\x1a\\n; a QEMU log is text)".into()));
        }
        let u16_at = |o: usize| u16::from_le_bytes([fixed[o], fixed[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(fixed[o..o + 4].try_into().unwrap());
        let version = u16_at(8);
        if version != VERSION {
            return Err(rd.err_at(8, format!("trace format version {version}; this devlend reads version {VERSION}")));
        }
        if u16_at(10) != 3 {
            return Err(rd.err_at(10, format!("{} translations per packet (expected 3, 002 §IV-C)", u16_at(10))));
        }
        let (tenants, npages, meta_len) = (u32_at(12), u32_at(16) as usize, u32_at(20) as usize);
        if npages == 0 || npages > MAX_PAGES || meta_len > MAX_META {
            return Err(rd.err_at(16, format!("corrupt header: {npages} pages (1..={MAX_PAGES}), meta {meta_len} bytes (at most {MAX_META})")));
        }
        let mut pages = Vec::with_capacity(npages);
        for _ in 0..npages {
            let b = rd.read_bytes(16, "page dictionary")?;
            pages.push(PageInfo { iova: u64::from_le_bytes(b[..8].try_into().unwrap()), size: u64::from_le_bytes(b[8..].try_into().unwrap()) });
        }
        let mstart = rd.offset();
        let meta = String::from_utf8(rd.read_bytes(meta_len, "meta")?.to_vec()).map_err(|_| rd.err_at(mstart, "corrupt header: meta is not UTF-8".into()))?;
        rd.header = Header { tenants, pages, meta };
        rd.header.check().map_err(|e| rd.err_at(12, format!("corrupt header: {e}")))?;
        rd.prev = tenants - 1;
        rd.last = vec![[NONE; 3]; tenants as usize];
        Ok(rd)
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn err_at(&self, off: u64, problem: String) -> HtError {
        HtError::Trace { file: self.name.clone(), byte: off, packet: None, problem }
    }

    /// Make at least `n` bytes available unless the input ends first.
    #[inline(never)]
    fn fill(&mut self, n: usize) -> HtResult<()> {
        if self.len - self.pos >= n || self.eof {
            return Ok(());
        }
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        while self.len < self.buf.len() {
            match self.r.read(&mut self.buf[self.len..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => self.len += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err_at(self.offset(), e.to_string())),
            }
        }
        Ok(())
    }

    fn read_bytes(&mut self, n: usize, what: &str) -> HtResult<&[u8]> {
        if n > self.buf.len() {
            // only the meta can be this long: grow the buffer once
            let mut b = std::mem::take(&mut self.buf).into_vec();
            b.resize(n, 0);
            self.buf = b.into_boxed_slice();
        }
        self.fill(n)?;
        if self.len - self.pos < n {
            return Err(self.err_at(self.offset(), format!("truncated: the file ends inside the {what}")));
        }
        self.pos += n;
        Ok(&self.buf[self.pos - n..self.pos])
    }

    #[inline]
    fn varint(&mut self, what: &str, limit: u32) -> HtResult<u32> {
        // 5 x 7 bits: accumulated in 64 bits, so a value above 2^32 is out of range, not wrapped
        let mut v = 0u64;
        for i in 0..5 {
            let b = *self.buf[..self.len].get(self.pos).ok_or_else(|| self.corrupt(format!("truncated inside the {what}")))?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return if v < limit as u64 { Ok(v as u32) } else { Err(self.corrupt(format!("{what} {v} out of range (below {limit})"))) };
            }
        }
        Err(self.corrupt(format!("{what}: varint longer than 5 bytes")))
    }

    fn corrupt(&self, msg: String) -> HtError {
        HtError::Trace { file: self.name.clone(), byte: self.offset(), packet: Some(self.packets), problem: format!("corrupt trace: {msg}") }
    }

    fn end_record(&mut self) -> HtResult<()> {
        self.fill(FOOTER_LEN as usize)?;
        if self.len - self.pos < FOOTER_LEN as usize {
            return Err(self.err_at(self.offset(), "truncated: the file ends inside the end record".into()));
        }
        let b = &self.buf[self.pos..self.pos + FOOTER_LEN as usize];
        let packets = u64::from_le_bytes(b[1..9].try_into().unwrap());
        let hash = u64::from_le_bytes(b[9..17].try_into().unwrap());
        let magic_ok = b[17..] == END_MAGIC;
        let at = self.offset();
        self.pos += FOOTER_LEN as usize;
        if !magic_ok {
            return Err(self.err_at(at, "corrupt end record (no DLTEND)".into()));
        }
        if packets != self.packets || hash != self.hash {
            return Err(self.err_at(
                at,
                format!("corrupt trace: the end record says {packets} packets (hash {hash:#x}), the body holds {} (hash {:#x})", self.packets, self.hash),
            ));
        }
        self.fill(1)?;
        if self.len > self.pos {
            return Err(self.err_at(self.offset(), "corrupt trace: bytes after the end record".into()));
        }
        Ok(())
    }

    /// The end of the stream (the end record read, or an error): no packet after it, from
    /// `next` or `quick` (the bytes still buffered are dropped).
    fn finish(&mut self) {
        self.done = true;
        self.len = self.pos;
    }

    /// The common record, one byte `NEXT_ALL_REPEATED`, decoded without the general path's
    /// branches: the next tenant by a compare-and-wrap (the previous tenant is below T), its
    /// pages as they were, the byte folded into the hash. Returns (SID, the three pages packed 16
    /// bits each, translation 0 lowest). Anything else (another record, a tenant with a page
    /// still unknown, the buffer's last `REFILL` bytes, a finished reader) is left untouched for
    /// `next`'s general path, which reads and reports it as before.
    #[inline(always)]
    pub(crate) fn quick(&mut self) -> Option<(u32, u64)> {
        // a finished reader has no bytes left (`finish`)
        if self.len - self.pos < REFILL || self.buf[self.pos] != NEXT_ALL_REPEATED {
            return None;
        }
        let next = self.prev + 1;
        let sid = if next == self.header.tenants { 0 } else { next };
        let [a, b, c] = self.last[sid as usize];
        // A tenant's pages are all NONE until its first packet, then none is (`packet` stores
        // them only when each is a page index, below 65535, or repeated and not NONE): the first
        // is NONE exactly when one is, the general path's error.
        if a == NONE {
            return None;
        }
        self.pos += 1;
        self.prev = sid;
        self.hash = fnv_byte(self.hash, NEXT_ALL_REPEATED);
        self.packets += 1;
        Some((sid, a as u64 | (b as u64) << 16 | (c as u64) << 32))
    }

    #[inline(always)]
    fn packet(&mut self) -> HtResult<Option<Packet>> {
        // the buffer's refill, out of line: taken once per buffer, not per packet
        if self.len - self.pos < REFILL && !self.eof {
            self.fill(REFILL)?;
        }
        let start = self.pos;
        let Some(&c) = self.buf[..self.len].get(self.pos) else {
            return Err(self.err_at(self.offset(), format!("truncated: the file ends after packet {} without its end record", self.packets)));
        };
        if c == END_MARK {
            self.end_record()?;
            return Ok(None);
        }
        if c & 0xE0 != 0 || c & 3 == 3 {
            return Err(self.corrupt(format!("control byte {c:#04x} is not a packet record")));
        }
        self.pos += 1;
        let t = self.header.tenants;
        let sid = match c & 3 {
            0 => (self.prev + 1) % t,
            1 => self.prev,
            _ => self.varint("tenant", t)?,
        };
        let mut pages = self.last[sid as usize];
        for (k, pg) in pages.iter_mut().enumerate() {
            if c & (4 << k) == 0 {
                *pg = self.varint("page index", self.header.pages.len() as u32)? as PageId;
            } else if *pg == NONE {
                return Err(self.corrupt(format!("tenant {sid} repeats translation {k}'s page before it has one")));
            }
        }
        self.last[sid as usize] = pages;
        self.prev = sid;
        self.hash = fnv(self.hash, &self.buf[start..self.pos]);
        self.packets += 1;
        Ok(Some(Packet { sid, pages }))
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = HtResult<Packet>;
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if let Some((sid, p)) = self.quick() {
            return Some(Ok(Packet { sid, pages: [p as PageId, (p >> 16) as PageId, (p >> 32) as PageId] }));
        }
        if self.done {
            return None;
        }
        match self.packet() {
            Ok(Some(p)) => Some(Ok(p)),
            Ok(None) => {
                self.finish();
                None
            }
            Err(e) => {
                self.finish();
                Some(Err(e))
            }
        }
    }
}

/// What `devlend trace info` prints: the header and a full verifying pass over the body.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Info {
    pub path: String,
    pub version: u16,
    pub bytes: u64,
    pub tenants: u32,
    pub pages: usize,
    pub pages_4k: usize,
    pub pages_2m: usize,
    pub packets: u64,
    pub translations: u64,
    pub packets_per_tenant_min: u64,
    pub packets_per_tenant_max: u64,
    pub bytes_per_translation: f64,
    pub meta: serde_json::Value,
}

pub fn info(path: &str) -> HtResult<Info> {
    let bytes = std::fs::metadata(path).map_err(HtError::io(path, "stat"))?.len();
    let mut r = Reader::open(path)?;
    let mut per = vec![0u64; r.header.tenants as usize];
    for p in r.by_ref() {
        per[p?.sid as usize] += 1;
    }
    let h = &r.header;
    let packets: u64 = per.iter().sum();
    Ok(Info {
        path: path.to_string(),
        version: VERSION,
        bytes,
        tenants: h.tenants,
        pages: h.pages.len(),
        pages_4k: h.pages.iter().filter(|p| p.size == 0x1000).count(),
        pages_2m: h.pages.iter().filter(|p| p.size == 0x20_0000).count(),
        packets,
        translations: packets * 3,
        packets_per_tenant_min: per.iter().copied().min().unwrap_or(0),
        packets_per_tenant_max: per.iter().copied().max().unwrap_or(0),
        bytes_per_translation: if packets > 0 { bytes as f64 / (3 * packets) as f64 } else { 0.0 },
        meta: serde_json::from_str(&h.meta).unwrap_or(serde_json::Value::String(h.meta.clone())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tenants: u32) -> Header {
        Header {
            tenants,
            pages: (0..300).map(|i| PageInfo { iova: 0x1000_0000 + i * 0x20_0000, size: if i % 2 == 0 { 0x1000 } else { 0x20_0000 } }).collect(),
            meta: r#"{"made_by":"test"}"#.into(),
        }
    }

    fn packets(n: u64, tenants: u32) -> Vec<Packet> {
        let mut x = 7u64;
        (0..n)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let sid = if i % 5 == 4 { (x >> 40) as u32 % tenants } else { i as u32 % tenants };
                let pg = |k: u64| ((x >> (8 * k)) % 300) as PageId;
                Packet { sid, pages: [0, if i % 3 == 0 { pg(1) } else { 7 }, pg(2)] }
            })
            .collect()
    }

    fn write(h: &Header, ps: &[Packet]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), h).unwrap();
        for p in ps {
            w.push(p).unwrap();
        }
        w.finish().unwrap()
    }

    /// A reader that hands out at most 7 bytes per call.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = b.len().min(7).min(self.0.len() - self.1);
            b[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn round_trip_streams_in_small_chunks() {
        let h = header(1000);
        let ps = packets(200_000, 1000);
        let bytes = write(&h, &ps);
        let r = Reader::new("t.dlt", Trickle(&bytes, 0)).unwrap();
        assert_eq!(r.header, h);
        let back: Vec<Packet> = r.map(Result::unwrap).collect();
        assert_eq!(back, ps);
    }

    #[test]
    fn corrupt_inputs_are_clear_errors() {
        let h = header(3);
        let ps = packets(50, 3);
        let good = write(&h, &ps);
        let read_all = |b: &[u8]| -> Result<usize, String> {
            let r = Reader::new("x.dlt", b).map_err(|e| e.to_string())?;
            r.collect::<Result<Vec<_>, _>>().map(|v| v.len()).map_err(|e| e.to_string())
        };
        assert_eq!(read_all(&good), Ok(50));
        let e = read_all(b"vtd_iotlb_page_hit sid 0x1 iova 0x2").unwrap_err();
        assert!(e.starts_with("x.dlt: byte 0:") && e.contains("magic"), "{e}");
        let mut v2 = good.clone();
        v2[8] = 2;
        let e = read_all(&v2).unwrap_err();
        assert!(e.contains("version 2") && e.contains("byte 8"), "{e}");
        for cut in [10, 30, good.len() - 30, good.len() - 3] {
            let e = read_all(&good[..cut]).unwrap_err();
            assert!(e.contains("truncated"), "cut {cut}: {e}");
        }
        let body = 24 + 16 * 300 + h.meta.len();
        let mut bad = good.clone();
        bad[body] = 0x40;
        let e = read_all(&bad).unwrap_err();
        assert!(e.contains("packet 0") && e.contains("control byte"), "{e}");
        let mut flip = good.clone();
        flip[body + 5] ^= 0x04;
        assert!(read_all(&flip).is_err(), "a flipped bit is caught");
        let mut extra = good.clone();
        extra.push(0);
        assert!(read_all(&extra).unwrap_err().contains("after the end record"));
        let mut w = Writer::new(Vec::new(), &h).unwrap();
        assert!(w.push(&Packet { sid: 3, pages: [0; 3] }).unwrap_err().to_string().contains("tenant 3"));
        assert!(Writer::new(Vec::new(), &Header { tenants: 0, ..h.clone() }).is_err());
    }

    #[test]
    fn open_checks_the_end_record_first_and_write_file_leaves_nothing_on_error() {
        let dir = std::env::temp_dir().join(format!("dlt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.dlt").to_string_lossy().to_string();
        let h = header(4);
        let ps = packets(1000, 4);
        let n = write_file(&p, &h, ps.iter().map(|&x| Ok(x)), &mut |_| {}).unwrap();
        assert_eq!(n, 1000);
        let i = info(&p).unwrap();
        assert_eq!((i.packets, i.tenants, i.pages), (1000, 4, 300));
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() - 1]).unwrap();
        let e = Reader::open(&p).err().unwrap().to_string();
        assert!(e.contains("truncated") && e.contains("a.dlt"), "{e}");
        let q = dir.join("b.dlt").to_string_lossy().to_string();
        let bad = [Ok(ps[0]), Err(HtError::NoInputs)];
        assert!(write_file(&q, &h, bad.into_iter(), &mut |_| {}).is_err());
        assert!(!std::path::Path::new(&q).exists() && !std::path::Path::new(&format!("{q}.part")).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Round robin with pages held for rounds at a time: nearly every record is the one byte
    /// `NEXT_ALL_REPEATED` that `Reader::quick` decodes; read in 7-byte chunks (the one-byte
    /// path meets the buffer's end), the packets and the end record's hash agree with the writer.
    #[test]
    fn one_byte_records_decode_as_written() {
        let h = header(5);
        let ps: Vec<Packet> = (0..2000u32)
            .map(|i| {
                let (sid, round) = (i % 5, i / 5);
                let pg = |k: u32| ((round / (7 + k + sid) * 11 + k + sid) % 300) as PageId;
                Packet { sid, pages: [pg(0), pg(1), pg(2)] }
            })
            .collect();
        let bytes = write(&h, &ps);
        let body = &bytes[24 + 16 * 300 + h.meta.len()..bytes.len() - FOOTER_LEN as usize];
        let one = body.iter().filter(|&&c| c == NEXT_ALL_REPEATED).count();
        assert!(one > ps.len() * 2 / 3, "{one} one-byte records");
        let back: Vec<Packet> = Reader::new("r.dlt", Trickle(&bytes, 0)).unwrap().map(Result::unwrap).collect();
        assert_eq!(back, ps);
        // after each tenant's first packet, quick's packing of the pages: translation 0 lowest
        let mut r = Reader::new("r.dlt", &bytes[..]).unwrap();
        assert_eq!(r.by_ref().take(5).count(), 5);
        let (sid, q) = r.quick().expect("the sixth record is one byte");
        assert_eq!((sid, [q as PageId, (q >> 16) as PageId, (q >> 32) as PageId]), (0, ps[5].pages));
    }

    /// The one-byte record where it is an error (the tenant has no pages yet) or where nothing
    /// may be read any more (after the end record, after an error) is left to the general path:
    /// the same errors, with file, byte offset and packet, and nothing after them.
    #[test]
    fn one_byte_records_keep_the_general_paths_errors() {
        let h = header(3);
        let good = write(&h, &packets(20, 3));
        let body = 24 + 16 * 300 + h.meta.len();
        let mut bad = good.clone();
        bad[body..body + 2].fill(NEXT_ALL_REPEATED);
        let mut r = Reader::new("n.dlt", &bad[..]).unwrap();
        assert!(r.quick().is_none());
        let e = r.next().unwrap().unwrap_err().to_string();
        let want = format!("byte {}", body + 1);
        assert!(e.starts_with("n.dlt: ") && e.contains(&want) && e.contains("packet 0"), "{e}");
        assert!(e.contains("tenant 0 repeats translation 0's page before it has one"), "{e}");
        assert!(r.quick().is_none() && r.next().is_none(), "nothing after an error");
        let mut extra = good.clone();
        extra.extend_from_slice(&[NEXT_ALL_REPEATED; 3]);
        let mut r = Reader::new("e.dlt", &extra[..]).unwrap();
        let n = r.by_ref().take_while(Result::is_ok).count();
        assert_eq!(n, 20);
        assert!(r.quick().is_none() && r.next().is_none(), "nothing after the end record's error");
    }

    /// The one-byte path leaves the buffer's last `REFILL` bytes to the general path, so a read
    /// that fails fails where it did before: at the first record with fewer than `REFILL`
    /// bytes left of the first 64 KiB, not after the buffer has been used up.
    #[test]
    fn a_failing_read_is_met_where_the_general_path_refills() {
        struct FailsAfter<'a>(&'a [u8], usize);
        impl Read for FailsAfter<'_> {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                if self.1 >= BUF {
                    return Err(std::io::Error::other("the disk went away"));
                }
                let n = b.len().min(BUF - self.1);
                b[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
                self.1 += n;
                Ok(n)
            }
        }
        let h = header(5);
        let ps: Vec<Packet> = (0..100_000u32).map(|i| Packet { sid: i % 5, pages: [1, 2, 3] }).collect();
        let bytes = write(&h, &ps);
        let e = Reader::new("f.dlt", FailsAfter(&bytes, 0)).unwrap().find_map(Result::err).expect("the read fails");
        let HtError::Trace { byte, ref problem, .. } = e else { panic!("{e:?}") };
        assert!(problem.contains("the disk went away"), "{e}");
        assert!(((BUF - REFILL) as u64..BUF as u64).contains(&byte), "{e}");
    }

    /// A 5-byte varint's value above 32 bits is out of range, not wrapped into range: tenant
    /// 2^32 (80 80 80 80 10) read as tenant 0 before, in a trace whose hash and count agree.
    #[test]
    fn a_varint_above_32_bits_is_out_of_range() {
        let h = header(3);
        let mut b = write(&h, &[]);
        b.truncate(b.len() - FOOTER_LEN as usize);
        let body = [0x02, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0];
        b.extend_from_slice(&body);
        b.push(END_MARK);
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&fnv(FNV0, &body).to_le_bytes());
        b.extend_from_slice(&END_MAGIC);
        let e = Reader::new("v.dlt", &b[..]).unwrap().collect::<Result<Vec<_>, _>>().unwrap_err();
        assert!(matches!(e, HtError::Trace { packet: Some(0), .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("packet 0") && e.contains("tenant 4294967296 out of range"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn reader_never_panics_on_mangled_traces(pos in 0usize..2000, byte in 0u8..=255, cut in 0usize..2000) {
            let h = header(5);
            let mut b = write(&h, &packets(300, 5));
            let i = pos % b.len();
            b[i] = byte;
            b.truncate(cut.max(1) * b.len() / 2000 + 1);
            if let Ok(r) = Reader::new("f.dlt", &b[..]) {
                for _ in r {}
            }
        }
    }
}
