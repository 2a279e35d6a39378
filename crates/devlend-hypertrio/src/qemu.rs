//! Input from real QEMU logs (issue 5, workload (b); 002 §IV-A: HyperSIO's Log Collector records
//! every translation the emulated VT-d IOMMU performs for the tenants' NICs).
//!
//! Parses QEMU's intel-iommu trace events as QEMU prints them (hw/i386/trace-events), with the
//! `log` trace backend's optional `PID@SECONDS.MICROS:` prefix:
//! - `vtd_iotlb_page_hit IOTLB page hit sid 0x.. iova 0x.. slpte 0x.. domain 0x..`
//! - `vtd_iotlb_page_update IOTLB page update sid 0x.. iova 0x.. slpte 0x.. domain 0x..`
//! - `vtd_iotlb_cc_hit IOTLB context hit bus 0x.. devfn 0x.. high 0x.. low 0x.. gen N`
//! - `vtd_iotlb_cc_update IOTLB context update bus 0x.. devfn 0x.. high 0x.. low 0x.. gen N -> gen M`
//! - `vtd_slpte_fetch ... high 0x.. low 0x.. iova 0x.. level 0x.. addr 0x.. slpte 0x..` (the event
//!   HyperSIO's patched QEMU adds for every page-table read; its page events also carry
//!   `level` / `pmask`, accepted here).
//!
//! Fields are found by name, so the human-readable words between them do not matter. Other
//! QEMU trace events (a trace line whose event is not `vtd_*`) are skipped and counted; a
//! `vtd_*` event this parser does not know, a known event with a missing or malformed field, or a
//! line that is not a trace line at all is an error naming the file and line. Streaming: one line
//! at a time from any `BufRead`.
//!
//! Each page hit or update is one translation request (sid, iova), in log order, of a page whose
//! size comes from `pmask` or the PTE's page-size bit (`Event::page`). `trace` turns logs into
//! hyper-traces (`construct`) and `replay` runs the simulator on them.

use crate::error::{HtError, HtResult};
use std::io::BufRead;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    PageHit {
        sid: u16,
        iova: u64,
        slpte: u64,
        domain: u16,
        /// Page size (see `page_size`).
        size: u64,
    },
    PageUpdate {
        sid: u16,
        iova: u64,
        slpte: u64,
        domain: u16,
        size: u64,
    },
    ContextHit {
        bus: u8,
        devfn: u8,
        high: u64,
        low: u64,
    },
    ContextUpdate {
        bus: u8,
        devfn: u8,
        high: u64,
        low: u64,
    },
    SlpteFetch {
        iova: u64,
        level: u64,
        addr: u64,
        slpte: u64,
    },
}

impl Event {
    /// The translation request this event records, if it is one.
    pub fn request(&self) -> Option<(u16, u64)> {
        match *self {
            Event::PageHit { sid, iova, .. } | Event::PageUpdate { sid, iova, .. } => Some((sid, iova)),
            _ => None,
        }
    }

    /// The translation request with its page: (sid, page-aligned gIOVA, page size).
    pub fn page(&self) -> Option<(u16, u64, u64)> {
        match *self {
            Event::PageHit { sid, iova, size, .. } | Event::PageUpdate { sid, iova, size, .. } => Some((sid, iova & !(size - 1), size)),
            _ => None,
        }
    }
}

/// The size of the page a page event translates: from HyperSIO's `pmask` field when the line
/// has one (4 KiB, 2 MiB or 1 GiB), else from the second-level PTE's page-size bit (bit 7, VT-d
/// §9.8: set in a 2 MiB or 1 GiB leaf; QEMU's own events carry no level, so a set bit is read as
/// 2 MiB), else 4 KiB.
fn page_size(text: &str, slpte: u64, event: &str) -> HtResult<u64> {
    match field(text, "pmask") {
        Some(m) => {
            // the mask's lowest set bit is the page size (QEMU prints it 32 or 64 bits wide)
            let size = m & m.wrapping_neg();
            if [0x1000, 0x20_0000, 0x4000_0000].contains(&size) {
                Ok(size)
            } else {
                Err(line_err(event, Some("pmask"), format!("{m:#x} is not a 4 KiB, 2 MiB or 1 GiB page mask")))
            }
        }
        None if slpte & 0x80 != 0 => Ok(0x20_0000),
        None => Ok(0x1000),
    }
}

/// A page-table level: 1 (the leaf of a 4 KiB page) to 4. VT-d numbers second-level paging
/// structures from the leaf up (VT-d §3.7, §9.8), and QEMU's intel-iommu walks 3 or 4 levels
/// (address widths of 39 or 48 bits: its `aw-bits` property), so 0 and 5 cannot appear in its log.
fn walk_level(text: &str, event: &str) -> HtResult<u64> {
    let level = need(text, "level", event)?;
    if (1..=4).contains(&level) {
        Ok(level)
    } else {
        Err(line_err(event, Some("level"), format!("= {level}: expected a page-table level from 1 to 4 (QEMU's VT-d walks at most 4 levels)")))
    }
}

/// The number after the first word `name` that is followed by one (descriptions may use the same
/// words, e.g. "slpte fetch ... slpte 0x..").
fn field(text: &str, name: &str) -> Option<u64> {
    let mut words = text.split_whitespace().peekable();
    while let Some(w) = words.next() {
        if w != name {
            continue;
        }
        let v = words.peek()?.trim_end_matches(',');
        // digits only: `from_str_radix` and `parse` also take a leading '+', which QEMU never prints
        let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(h) if h.bytes().all(|b| b.is_ascii_hexdigit()) => u64::from_str_radix(h, 16).ok(),
            None if v.bytes().all(|b| b.is_ascii_digit()) => v.parse().ok(),
            _ => None,
        };
        if n.is_some() {
            return n;
        }
    }
    None
}

fn need<T: TryFrom<u64>>(text: &str, name: &str, event: &str) -> HtResult<T> {
    let v = field(text, name).ok_or_else(|| line_err(event, Some(name), "missing or not a number".into()))?;
    T::try_from(v).map_err(|_| line_err(event, Some(name), format!("= {v:#x} out of range")))
}

fn line_err(event: &str, field: Option<&str>, problem: String) -> HtError {
    HtError::Line { event: Some(event.into()), field: field.map(Into::into), problem }
}

/// One line: Ok(Some(event)), Ok(None) for a blank line or another QEMU trace event, Err otherwise.
pub fn parse_line(line: &str) -> HtResult<Option<Event>> {
    let l = line.trim();
    if l.is_empty() {
        return Ok(None);
    }
    // optional `PID@SEC.USEC:` prefix of the log backend
    let l = match l.split_once(':') {
        Some((p, rest))
            if p.split_once('@')
                .is_some_and(|(pid, ts)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && ts.bytes().all(|b| b.is_ascii_digit() || b == b'.')) =>
        {
            rest.trim_start()
        }
        _ => l,
    };
    let (name, text) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') || !name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic()) {
        return Err(HtError::Line {
            event: None,
            field: None,
            problem: format!("not a QEMU trace line (expected '[PID@TIME:]event_name ...'): {:?}", truncate(line)),
        });
    }
    let ev = match name {
        "vtd_iotlb_page_hit" | "vtd_iotlb_page_update" => {
            let (sid, iova, slpte, domain) = (need(text, "sid", name)?, need(text, "iova", name)?, need(text, "slpte", name)?, need(text, "domain", name)?);
            let size = page_size(text, slpte, name)?;
            if field(text, "level").is_some() {
                walk_level(text, name)?;
            }
            if name.ends_with("hit") {
                Event::PageHit { sid, iova, slpte, domain, size }
            } else {
                Event::PageUpdate { sid, iova, slpte, domain, size }
            }
        }
        "vtd_iotlb_cc_hit" | "vtd_iotlb_cc_update" => {
            let (bus, devfn, high, low) = (need(text, "bus", name)?, need(text, "devfn", name)?, need(text, "high", name)?, need(text, "low", name)?);
            let _: u64 = need(text, "gen", name)?;
            if name.ends_with("hit") {
                Event::ContextHit { bus, devfn, high, low }
            } else {
                Event::ContextUpdate { bus, devfn, high, low }
            }
        }
        "vtd_slpte_fetch" => Event::SlpteFetch {
            iova: need(text, "iova", name)?,
            level: walk_level(text, name)?,
            addr: need(text, "addr", name)?,
            slpte: need(text, "slpte", name)?,
        },
        n if n.starts_with("vtd_") => return KNOWN_OTHER.contains(&n).then_some(None).ok_or_else(|| HtError::UnknownEvent { event: n.into() }),
        _ => return Ok(None),
    };
    Ok(Some(ev))
}

/// Other vtd_* events of QEMU's hw/i386/trace-events that carry no translation: skipped.
const KNOWN_OTHER: &[&str] = &[
    "vtd_inv_desc",
    "vtd_inv_desc_invalid",
    "vtd_inv_desc_cc_domain",
    "vtd_inv_desc_cc_global",
    "vtd_inv_desc_cc_device",
    "vtd_inv_desc_cc_devices",
    "vtd_inv_desc_iotlb_global",
    "vtd_inv_desc_iotlb_domain",
    "vtd_inv_desc_iotlb_pages",
    "vtd_inv_desc_wait_sw",
    "vtd_inv_desc_wait_irq",
    "vtd_inv_desc_wait_write_fail",
    "vtd_inv_desc_iec",
    "vtd_inv_qi_enable",
    "vtd_inv_qi_setup",
    "vtd_inv_qi_head",
    "vtd_inv_qi_tail",
    "vtd_inv_qi_fetch",
    "vtd_context_cache_reset",
    "vtd_re_not_present",
    "vtd_ce_not_present",
    "vtd_iotlb_reset",
    "vtd_fault_disabled",
    "vtd_replay_ce_valid",
    "vtd_replay_ce_invalid",
    "vtd_page_walk_level",
    "vtd_page_walk_one",
    "vtd_page_walk_one_skip_map",
    "vtd_page_walk_one_skip_unmap",
    "vtd_page_walk_skip_read",
    "vtd_page_walk_skip_reserve",
    "vtd_switch_address_space",
    "vtd_as_unmap_whole",
    "vtd_translate_pt",
    "vtd_pt_enable_fast_path",
    "vtd_irq_generate",
    "vtd_reg_read",
    "vtd_reg_write",
    "vtd_reg_dmar_root",
    "vtd_reg_ir_root",
    "vtd_reg_write_gcmd",
    "vtd_reg_write_fectl",
    "vtd_reg_write_iectl",
    "vtd_reg_ics_clear_ip",
    "vtd_dmar_translate",
    "vtd_dmar_enable",
    "vtd_dmar_fault",
    "vtd_ir_enable",
    "vtd_ir_irte_get",
    "vtd_ir_remap",
    "vtd_ir_remap_type",
    "vtd_ir_remap_msi",
    "vtd_ir_remap_msi_req",
    "vtd_fsts_ppf",
    "vtd_fsts_clear_ip",
    "vtd_frr_new",
    "vtd_warn_invalid_qi_tail",
    "vtd_warn_ir_vector",
    "vtd_warn_ir_trigger",
    "vtd_err",
    "vtd_err_dmar_iova_overflow",
    "vtd_err_dmar_slpte_read_error",
    "vtd_err_dmar_slpte_perm_error",
    "vtd_err_dmar_slpte_resv_error",
    "vtd_err_dmar_translate",
    "vtd_err_qi_enable",
    "vtd_err_qi_disable",
    "vtd_err_irte",
    "vtd_err_irte_sid",
    "vtd_err_irte_sid_bus",
    "vtd_err_irte_svt",
    "vtd_err_irte_dst",
    "vtd_err_irte_pending",
    "vtd_err_irte_vec",
];

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogSummary {
    pub lines: u64,
    pub events: u64,
    pub requests: u64,
    pub page_hits: u64,
    pub page_updates: u64,
    pub context_updates: u64,
    pub slpte_fetches: u64,
    pub skipped: u64,
    pub sids: Vec<u16>,
    pub distinct_pages: u64,
}

/// Stream a log, calling `on_request(sid, iova)` per translation request; errors name `file:line`.
pub fn read_log<R: BufRead>(file: &str, r: R, mut on_request: impl FnMut(u16, u64)) -> HtResult<LogSummary> {
    read_log_events(file, r, |ev| {
        if let Some((sid, iova)) = ev.request() {
            on_request(sid, iova)
        }
        Ok(())
    })
}

/// Stream a log, calling `on_event` per parsed event (an error it returns stops the read and is
/// reported at that line); errors name `file:line`.
pub fn read_log_events<R: BufRead>(file: &str, mut r: R, mut on_event: impl FnMut(&Event) -> HtResult<()>) -> HtResult<LogSummary> {
    let mut s = LogSummary::default();
    let mut buf = Vec::new();
    let mut pages = rustc_hash::FxHashSet::default();
    let mut sids = std::collections::BTreeSet::new();
    loop {
        buf.clear();
        let at = |line: u64| move |e: HtError| HtError::InLog { file: file.into(), line, error: Box::new(e) };
        let n = r.read_until(b'\n', &mut buf).map_err(|e| at(s.lines + 1)(HtError::Line { event: None, field: None, problem: format!("read: {e}") }))?;
        if n == 0 {
            break;
        }
        s.lines += 1;
        let line = std::str::from_utf8(&buf)
            .map_err(|_| at(s.lines)(HtError::Line { event: None, field: None, problem: "not UTF-8 text (a binary or corrupt log?)".into() }))?;
        match parse_line(line).map_err(at(s.lines))? {
            None => {
                if !line.trim().is_empty() {
                    s.skipped += 1;
                }
            }
            Some(ev) => {
                s.events += 1;
                match ev {
                    Event::PageHit { .. } => s.page_hits += 1,
                    Event::PageUpdate { .. } => s.page_updates += 1,
                    Event::ContextUpdate { .. } => s.context_updates += 1,
                    Event::SlpteFetch { .. } => s.slpte_fetches += 1,
                    Event::ContextHit { .. } => {}
                }
                if let Some((sid, base, _)) = ev.page() {
                    s.requests += 1;
                    sids.insert(sid);
                    pages.insert(((sid as u64) << 48) | (base >> 12));
                }
                on_event(&ev).map_err(at(s.lines))?;
            }
        }
    }
    s.sids = sids.into_iter().collect();
    s.distinct_pages = pages.len() as u64;
    Ok(s)
}

/// `read_log` on a file path.
pub fn read_log_file(path: &str, on_request: impl FnMut(u16, u64)) -> HtResult<LogSummary> {
    let f = HtError::open_regular(path)?;
    read_log(path, std::io::BufReader::new(f), on_request)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
12345@1600000000.000001:vtd_iotlb_cc_update IOTLB context update bus 0x1 devfn 0x0 high 0x102 low 0x7f0001 gen 0 -> gen 1
12345@1600000000.000002:vtd_iotlb_page_update IOTLB page update sid 0x100 iova 0x34800000 slpte 0x12345003 domain 0x1
vtd_slpte_fetch slpte fetch high 0x102 low 0x7f0001 iova 0x34800000 level 0x4 addr 0x7f0000 slpte 0x7f1003
vtd_iotlb_page_hit IOTLB page hit sid 0x100 iova 0xbbe00000 pmask 0xffe00000 slpte 0x40000083 domain 0x1
pci_cfg_read virtio-net-pci 00:03.0 @0x0 -> 0x1af4

vtd_inv_desc_iotlb_global iotlb invalidate global
";

    #[test]
    fn parses_qemu_and_hypersio_lines() {
        let mut reqs = Vec::new();
        let s = read_log("t.log", LOG.as_bytes(), |sid, iova| reqs.push((sid, iova))).unwrap();
        assert_eq!(reqs, [(0x100, 0x34800000), (0x100, 0xbbe00000)]);
        assert_eq!((s.lines, s.events, s.requests, s.context_updates, s.slpte_fetches, s.skipped), (7, 4, 2, 1, 1, 2));
        assert_eq!(s.sids, [0x100]);
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = read_log("a.log", "vtd_iotlb_page_hit IOTLB page hit sid 0x1 iova 0x1000\n".as_bytes(), |_, _| {}).unwrap_err().to_string();
        assert!(e.starts_with("a.log:1:") && e.contains("slpte"), "{e}");
        let e = read_log("a.log", "\nvtd_iotlb_page_flop x 1\n".as_bytes(), |_, _| {}).unwrap_err().to_string();
        assert!(e.starts_with("a.log:2:") && e.contains("never") || e.contains("not an intel-iommu"), "{e}");
        let e = read_log("b.log", "vtd_iotlb_cc_update bus 0x1ff devfn 0 high 0 low 0 gen 1\n".as_bytes(), |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("bus") && e.contains("out of range"), "{e}");
        // a '+' inside a number is corruption, not a sign (u64 parsing would take it)
        for bad in ["sid 0x+100", "sid +256"] {
            let line = format!("vtd_iotlb_page_hit {bad} iova 0x1000 slpte 0x3 domain 0x1\n");
            let e = read_log("e.log", line.as_bytes(), |_, _| {}).unwrap_err().to_string();
            assert!(e.starts_with("e.log:1:") && e.contains("'sid' missing or not a number"), "{e}");
        }
        // page-walk levels exist from 1 (leaf) to 4 (QEMU's VT-d walks at most 4 levels)
        for level in ["0x0", "0x5"] {
            for line in [
                format!("vtd_slpte_fetch high 0x1 low 0x2 iova 0x1000 level {level} addr 0x7f0000 slpte 0x3\n"),
                format!("vtd_iotlb_page_hit sid 0x1 iova 0x1000 slpte 0x3 domain 0x1 level {level}\n"),
            ] {
                let e = read_log("l.log", line.as_bytes(), |_, _| {}).unwrap_err().to_string();
                assert!(e.starts_with("l.log:1:") && e.contains("'level'") && e.contains("1 to 4"), "{e}");
            }
        }
        let line = "vtd_slpte_fetch high 0x1 low 0x2 iova 0x1000 level 0x1 addr 0x7f0000 slpte 0x3\n";
        assert!(read_log("l.log", line.as_bytes(), |_, _| {}).is_ok());
        let e = read_log("c.log", "%%% garbage\n".as_bytes(), |_, _| {}).unwrap_err().to_string();
        assert!(e.starts_with("c.log:1:") && e.contains("not a QEMU trace line"), "{e}");
        let e = read_log("d.log", &b"vtd_iotlb_page_hit sid 0x1 \xff\xfe\n"[..], |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("d.log:1") && e.contains("UTF-8"), "{e}");
        assert!(read_log_file("/nonexistent/x.log", |_, _| {}).unwrap_err().to_string().starts_with("/nonexistent/x.log"));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let _ = read_log("f.log", &data[..], |_, _| {});
        }

        #[test]
        fn never_panics_on_mangled_lines(cut in 0usize..200, junk in "[ -~]{0,20}") {
            for l in LOG.lines() {
                let c = cut.min(l.len());
                let s: String = l.chars().take(c).collect::<String>() + &junk;
                let _ = parse_line(&s);
            }
        }
    }
}
