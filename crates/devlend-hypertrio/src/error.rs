//! Errors of the HyperTRIO model, its traces and its grids, as values with context (the models
//! are devlend-rdma's `RdmaError` and devlend-xenib's `XenIbError`): what was being read, built
//! or run, where (a log's file and line, a trace's byte and packet, a walk's tenant and gIOVA, a
//! configuration's field, a grid's point), and what refused it. Context is added from the inside
//! out: a log line's fault becomes [`HtError::InLog`] at its file and line, a grid point's fault
//! [`HtError::InPoint`] at its index and label.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HtError {
    /// A name that is not one of `expected` (a configuration, a workload profile, a replacement
    /// policy, an interleaving).
    UnknownName { kind: &'static str, name: String, expected: String },
    /// A value outside its range: the field, the value as given, what the field takes.
    OutOfRange { field: String, value: String, expected: String },
    /// A cache whose geometry does not build (`structure`: DevTLB, IOTLB, L2TLB, ...).
    Geometry { structure: String, problem: String },
    /// Configuration overrides (a JSON object of `Config` fields) that do not apply; `field` is
    /// the field at fault when there is one.
    Overrides { field: Option<String>, problem: String },
    /// A file that cannot be opened, read or written (the constructor's spool file included).
    Io { path: String, op: &'static str, message: String },
    /// A QEMU log line that does not parse (its event and field when known); [`HtError::InLog`]
    /// places it.
    Line { event: Option<String>, field: Option<String>, problem: String },
    /// A `vtd_*` event that QEMU's intel-iommu never prints.
    UnknownEvent { event: String },
    /// An error at a line of a QEMU log (1-based).
    InLog { file: String, line: u64, error: Box<HtError> },
    /// A `.dlt` trace that is corrupt, truncated or of another version: its file, the byte
    /// offset, and the packet when the fault is in the body.
    Trace { file: String, byte: u64, packet: Option<u64>, problem: String },
    /// A packet outside the header a trace writer was given.
    Packet { packet: u64, tenant: u32, pages: [u16; 3], tenants: u32, npages: u32 },
    /// An error writing or reading the trace file `path`.
    InFile { path: String, error: Box<HtError> },
    /// A gIOVA page the model cannot place (two sizes, a 1 GiB page, too many pages).
    Page { iova: u64, problem: String },
    /// Trace construction was given no inputs.
    NoInputs,
    /// The inputs hold no translation request.
    NoRequests { inputs: String },
    /// A source tenant with fewer requests than one packet (3): the trace would stop at once.
    ShortSource { input: String, sid: u32, requests: u64 },
    /// The page tables of a tenant refused a step (the fabric's reason); `iova` when a walk.
    Tables { tenant: u32, iova: Option<u64>, reason: String },
    /// A grid (a JSON list of points) that does not parse.
    Grid { problem: String },
    /// A grid point that cannot run: its index and label.
    InPoint { index: usize, label: String, error: Box<HtError> },
}

impl fmt::Display for HtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HtError::UnknownName { kind, name, expected } => write!(f, "no {kind} '{name}': expected {expected}"),
            HtError::OutOfRange { field, value, expected } => write!(f, "{field}: {value} (expected {expected})"),
            HtError::Geometry { structure, problem } => write!(f, "{structure}: {problem}"),
            HtError::Overrides { field: Some(k), problem } => write!(f, "configuration overrides: field '{k}': {problem}"),
            HtError::Overrides { field: None, problem } => write!(f, "configuration overrides: {problem}"),
            HtError::Io { path, op, message } => write!(f, "{path}: {op}: {message}"),
            HtError::Line { event, field, problem } => {
                if let Some(e) = event {
                    write!(f, "{e}: ")?;
                }
                if let Some(k) = field {
                    write!(f, "field '{k}' ")?;
                }
                write!(f, "{problem}")
            }
            HtError::UnknownEvent { event } => write!(f, "'{event}' is not an intel-iommu trace event QEMU prints"),
            HtError::InLog { file, line, error } => write!(f, "{file}:{line}: {error}"),
            HtError::Trace { file, byte, packet: Some(p), problem } => write!(f, "{file}: byte {byte}: packet {p}: {problem}"),
            HtError::Trace { file, byte, packet: None, problem } => write!(f, "{file}: byte {byte}: {problem}"),
            HtError::Packet { packet, tenant, pages, tenants, npages } => {
                write!(f, "packet {packet}: tenant {tenant} / pages {pages:?} outside the header's {tenants} tenants and {npages} pages")
            }
            HtError::InFile { path, error } => write!(f, "{path}: {error}"),
            HtError::Page { iova, problem } => write!(f, "gIOVA page {iova:#x} {problem}"),
            HtError::NoInputs => write!(f, "inputs: no logs or traces given"),
            HtError::NoRequests { inputs } => {
                write!(f, "{inputs}: no translation requests (vtd_iotlb_page_hit / vtd_iotlb_page_update lines or trace packets)")
            }
            HtError::ShortSource { input, sid, requests } => {
                write!(f, "{input}: SID {sid:#x} has {requests} translation request(s), less than one packet (3): the trace would stop at once")
            }
            HtError::Tables { tenant, iova: Some(a), reason } => write!(f, "tenant {tenant}: gIOVA {a:#x}: {reason}"),
            HtError::Tables { tenant, iova: None, reason } => write!(f, "tenant {tenant}: {reason}"),
            HtError::Grid { problem } => write!(f, "grid: {problem}"),
            HtError::InPoint { index, label, error } => write!(f, "grid point {index} ({label}): {error}"),
        }
    }
}

impl std::error::Error for HtError {}

impl HtError {
    /// A short name of the variant, the innermost one for a placed error (Python's
    /// `HyperTrioError.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            HtError::UnknownName { .. } => "unknown_name",
            HtError::OutOfRange { .. } => "out_of_range",
            HtError::Geometry { .. } => "geometry",
            HtError::Overrides { .. } => "overrides",
            HtError::Io { .. } => "io",
            HtError::Line { .. } => "log_line",
            HtError::UnknownEvent { .. } => "unknown_event",
            HtError::Trace { .. } => "trace",
            HtError::Packet { .. } => "packet",
            HtError::Page { .. } => "page",
            HtError::NoInputs => "no_inputs",
            HtError::NoRequests { .. } => "no_requests",
            HtError::ShortSource { .. } => "short_source",
            HtError::Tables { .. } => "tables",
            HtError::Grid { .. } => "grid",
            HtError::InLog { error, .. } | HtError::InFile { error, .. } | HtError::InPoint { error, .. } => error.kind(),
        }
    }

    /// `kind 'name'`: expected one of the names given.
    pub fn unknown<S: AsRef<str>>(kind: &'static str, name: &str, expected: impl IntoIterator<Item = S>) -> HtError {
        let names: Vec<String> = expected.into_iter().map(|s| s.as_ref().to_string()).collect();
        HtError::UnknownName { kind, name: name.into(), expected: format!("one of {}", names.join(", ")) }
    }

    pub fn range(field: impl Into<String>, value: impl fmt::Display, expected: impl Into<String>) -> HtError {
        HtError::OutOfRange { field: field.into(), value: value.to_string(), expected: expected.into() }
    }

    /// A map from an I/O error on `path` during `op` to this error, for `map_err`.
    pub fn io<'a>(path: &'a str, op: &'static str) -> impl Fn(std::io::Error) -> HtError + 'a {
        move |e| HtError::Io { path: path.into(), op, message: e.to_string() }
    }

    /// Open `path` for reading if it is a regular file; a FIFO, a device, a socket or a directory
    /// is refused before it is opened (opening a FIFO to read waits for a writer).
    pub fn open_regular(path: &str) -> HtResult<std::fs::File> {
        let kind = std::fs::metadata(path).map_err(HtError::io(path, "open"))?.file_type();
        if !kind.is_file() {
            use std::os::unix::fs::FileTypeExt;
            let what = if kind.is_dir() {
                "a directory"
            } else if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_char_device() || kind.is_block_device() {
                "a device"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            return Err(HtError::Io { path: path.into(), op: "open", message: format!("{what}: expected a regular file") });
        }
        std::fs::File::open(path).map_err(HtError::io(path, "open"))
    }

    /// This error placed in the trace file `path`.
    pub fn in_file(self, path: &str) -> HtError {
        HtError::InFile { path: path.into(), error: Box::new(self) }
    }
}

pub type HtResult<T> = Result<T, HtError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_errors_name_their_place_and_keep_the_inner_kind() {
        let line = HtError::Line { event: Some("vtd_slpte_fetch".into()), field: Some("iova".into()), problem: "missing or not a number".into() };
        let e = HtError::InLog { file: "a.log".into(), line: 7, error: Box::new(line) };
        assert_eq!(e.to_string(), "a.log:7: vtd_slpte_fetch: field 'iova' missing or not a number");
        assert_eq!(e.kind(), "log_line");
        let p = HtError::InPoint { index: 2, label: "x".into(), error: Box::new(HtError::range("tenants", 0, "1..=65536")) };
        assert_eq!(p.to_string(), "grid point 2 (x): tenants: 0 (expected 1..=65536)");
        assert_eq!(p.kind(), "out_of_range");
    }
}
