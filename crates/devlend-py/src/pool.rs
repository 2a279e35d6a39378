//! `devlend._core.Pool`: the device pool over one booted cluster (devlend-host's `Pool`), kept
//! between calls. Errors become `PoolError(kind, message)`.

use crate::SpecError;
use devlend_host::pool::{Pool as Core, PoolEntry, PoolError as CoreError};
use devlend_host::{Cluster, Hygiene, ScrubHow};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

/// Per host: its IOMMU context entries and the bytes mapped per domain name.
type HostMapped = (usize, Vec<(String, u64)>);

create_exception!(_core, PoolError, PyException, "A pool verb that cannot be carried out: args (kind, message).");

fn perr(e: CoreError) -> PyErr {
    PoolError::new_err((e.kind(), e.to_string()))
}

/// (fdid, device, lender, bdf, profile, state, borrower, visible_to).
type Entry = (u32, String, String, String, Option<String>, String, Option<String>, Vec<String>);
/// (lender NTB, borrower NTB, window lender address, window size, window IOVA, [(bar, size, borrower CPU address)], DMA maps, IRQ vectors).
type Lend = (String, String, u64, u64, u64, Vec<(u8, u64, u64)>, usize, usize);

fn entry(e: PoolEntry) -> Entry {
    (e.fdid, e.device, e.lender, e.bdf, e.profile, e.state.name().to_string(), e.borrower, e.visible_to)
}

#[pyclass(module = "devlend._core", unsendable)]
struct Pool {
    inner: Core,
}

/// A device's last scrub: (how: "fill" or "reset", bytes filled, ps).
type Scrub = (&'static str, u64, u64);

#[pymethods]
impl Pool {
    /// An empty pool on the topology (JSON, without borrow/return operations), with hygiene
    /// policy `hygiene` ("scrub" or "none", devlend-host's `hygiene`).
    #[new]
    #[pyo3(signature = (topology_json, hygiene="scrub"))]
    fn new(topology_json: &str, hygiene: &str) -> PyResult<Pool> {
        let policy = Hygiene::parse(hygiene).map_err(|e| PoolError::new_err(("hygiene", e.to_string())))?;
        let f = devlend_fabric::build_json(topology_json).map_err(|e| SpecError::new_err((e.path, e.fault.to_string())))?;
        let mut c = Cluster::new(f).map_err(|e| PoolError::new_err(("boot", e.to_string())))?;
        c.set_hygiene(policy);
        Ok(Pool { inner: Core::new(c) })
    }

    /// The hygiene policy's name.
    fn hygiene(&self) -> &'static str {
        self.inner.cluster().hygiene().name()
    }

    /// `device`'s last scrub: (how: "fill" or "reset", bytes filled, ps), or None; and whether
    /// one is still pending (its lend ended where its lender could not scrub it).
    fn scrub(&self, device: &str) -> PyResult<(Option<Scrub>, bool)> {
        let func = self.inner.resolve(device).map_err(perr)?;
        let c = self.inner.cluster();
        let last = c.last_scrub(func).map(|s| match s.how {
            ScrubHow::Fill { bytes, .. } => ("fill", bytes, s.ps),
            ScrubHow::Reset => ("reset", 0, s.ps),
        });
        Ok((last, c.scrub_is_pending(func)))
    }

    fn connect(&mut self, lender: &str, borrower: &str) -> PyResult<()> {
        self.inner.connect(lender, borrower).map_err(perr)
    }
    fn add(&mut self, device: &str) -> PyResult<()> {
        self.inner.add(device).map_err(perr)
    }
    fn remove(&mut self, device: &str) -> PyResult<()> {
        self.inner.remove(device).map_err(perr)
    }
    fn available(&mut self, device: &str) -> PyResult<()> {
        self.inner.available(device).map_err(perr)
    }
    fn unavailable(&mut self, device: &str) -> PyResult<()> {
        self.inner.unavailable(device).map_err(perr)
    }

    #[pyo3(signature = (borrower, device, dma_window=None))]
    fn borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>) -> PyResult<()> {
        self.inner.borrow(borrower, device, dma_window).map(|_| ()).map_err(perr)
    }

    /// A topology's borrow operation: the lender's connect, add and available as needed, then borrow.
    #[pyo3(signature = (borrower, device, dma_window=None))]
    fn offer_and_borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>) -> PyResult<()> {
        self.inner.offer_and_borrow(borrower, device, dma_window).map(|_| ()).map_err(perr)
    }

    #[pyo3(signature = (device, borrower=None))]
    /// Returns the lends whose link was down when they ended, as (device, lender, borrower, lender's
    /// NTB): each side undid its own half; only the borrower's message to the lender did not arrive.
    fn return_device(&mut self, device: &str, borrower: Option<&str>) -> PyResult<Vec<(String, String, String, String)>> {
        let t = self.inner.return_device(device, borrower).map_err(perr)?;
        Ok(t.unreached.into_iter().map(|u| (u.device, u.lender, u.borrower, u.ntb)).collect())
    }

    fn entries(&self) -> Vec<Entry> {
        self.inner.entries().into_iter().map(entry).collect()
    }

    fn entry(&self, device: &str) -> PyResult<Entry> {
        self.inner.entry(device).map(entry).map_err(perr)
    }

    fn lend(&self, device: &str) -> PyResult<Option<Lend>> {
        let l = self.inner.lend(device).map_err(perr)?;
        Ok(l.map(|l| {
            (
                l.lender_ntb,
                l.borrower_ntb,
                l.window_addr,
                l.window_size,
                l.window_iova,
                l.bars.iter().map(|b| (b.index, b.size, b.cpu_addr)).collect(),
                l.live_dma_maps,
                l.irq_vectors,
            )
        }))
    }

    fn idle(&self) -> bool {
        self.inner.idle()
    }

    /// What is programmed that no live lend owns (devlend-host's leftover checker), as messages.
    fn leftovers(&self) -> Vec<String> {
        self.inner.cluster().leftovers().iter().map(|l| l.to_string()).collect()
    }

    fn anomalies(&self) -> Vec<String> {
        self.inner.cluster().anomalies().to_vec()
    }

    /// Inject a fault (devlend-host's kinds); returns the lends it ended as (device, lender, borrower, why).
    fn inject(&mut self, kind: &str, target: &str) -> PyResult<Vec<(String, String, String, String)>> {
        let r = self.inner.inject(kind, target).map_err(perr)?;
        Ok(r.ended.into_iter().map(|e| (e.device, e.lender, e.borrower, e.why.to_string())).collect())
    }

    /// Devices a fault touched that will be reset before their next borrower.
    fn needs_reset(&self) -> Vec<String> {
        self.inner.needs_reset()
    }

    /// Take the link of an NTB (and its peer) down, or bring it back up.
    fn link(&mut self, ntb: &str, up: bool) -> PyResult<()> {
        let f = &mut self.inner.cluster_mut().fabric;
        let n = f.ntb_id(ntb).map_err(|e| PoolError::new_err(("unknown", e.to_string())))?;
        let r = if up { f.ntb_link_enable(n) } else { f.ntb_link_disable(n) };
        r.map_err(|e| PoolError::new_err(("link", e.to_string())))
    }

    /// The borrower's driver maps `size` bytes of a new buffer for a borrowed device; returns the bus address.
    fn dma_map(&mut self, device: &str, size: u64) -> PyResult<u64> {
        let l = self.inner.lend(device).map_err(perr)?.ok_or_else(|| PoolError::new_err(("not-borrowed", format!("{device} is not borrowed"))))?;
        let le = |e: devlend_host::HostError| PoolError::new_err(("lending", e.to_string()));
        let mut os = self.inner.cluster_mut().os(l.borrower.as_str()).map_err(le)?;
        let buf = os.kmalloc(size).map_err(le)?;
        os.dma_map_single(l.dev, buf, size, devlend_host::DmaDir::Bidirectional).map_err(le)
    }

    fn dma_unmap(&mut self, device: &str, dma: u64, size: u64) -> PyResult<()> {
        let l = self.inner.lend(device).map_err(perr)?.ok_or_else(|| PoolError::new_err(("not-borrowed", format!("{device} is not borrowed"))))?;
        let le = |e: devlend_host::HostError| PoolError::new_err(("lending", e.to_string()));
        let mut os = self.inner.cluster_mut().os(l.borrower.as_str()).map_err(le)?;
        os.dma_unmap_single(l.dev, dma, size, devlend_host::DmaDir::Bidirectional).map_err(le)
    }

    /// What is programmed: per NTB (name, translations set, LUT entries), per host the IOMMU
    /// context entries and the bytes mapped per domain name.
    fn programmed(&self) -> (Vec<(String, usize, usize)>, Vec<HostMapped>) {
        let f = &self.inner.cluster().fabric;
        let p = f.programmed();
        let ntbs = f
            .ntbs()
            .iter()
            .zip(p.inbound.iter().zip(&p.rid_luts))
            .map(|(n, (i, l))| {
                (n.name.clone(), i.iter().filter(|x| **x != devlend_fabric::ntb::Inbound::Unset).count(), l.iter().filter(|x| x.is_some()).count())
            })
            .collect();
        (ntbs, p.contexts.iter().zip(p.mapped).map(|(c, m)| (c.len(), m)).collect())
    }

    fn inventory(&self) -> String {
        self.inner.cluster().fabric.inventory().to_string()
    }
}

/// The hygiene policies, with what each does: [(name, description)].
#[pyfunction]
fn hygiene_policies() -> Vec<(&'static str, &'static str)> {
    devlend_host::HYGIENE_POLICIES.iter().map(|(n, _, d)| (*n, *d)).collect()
}

/// The fault kinds, with what each names as target: [(kind, target)].
#[pyfunction]
fn fault_kinds() -> Vec<(&'static str, &'static str)> {
    devlend_host::fault::FAULT_KINDS.iter().map(|(n, _, t)| (*n, *t)).collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Pool>()?;
    m.add_function(wrap_pyfunction!(fault_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(hygiene_policies, m)?)?;
    m.add("PoolError", m.py().get_type::<PoolError>())
}
