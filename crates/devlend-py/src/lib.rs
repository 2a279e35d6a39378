//! Python bindings: `devlend._core`. Thin by design: every method converts names and numbers,
//! calls the Rust fabric, and returns plain values or JSON text. Loops over TLPs stay in Rust.

use devlend_fabric::error::FabricError as CoreFabricError;
use devlend_fabric::fabric::parse_num;
use devlend_fabric::spec::Addr;
use devlend_fabric::{Fabric as CoreFabric, Requester};
use devlend_wire::Access;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod fio;
mod hypertrio;
mod lending;
mod machine;
mod pool;
mod rdma;
mod uml;
mod vm;
mod workloads;
mod xenib;

create_exception!(_core, SpecError, PyException, "A topology description that cannot be built: args (json_pointer, message).");
create_exception!(_core, FabricError, PyException, "A request to the live fabric that cannot be carried out.");
create_exception!(_core, DeviceError, PyException, "A device model or its run on a machine failed: args (message, kind).");
create_exception!(_core, NvmeStatusError, PyException, "An NVMe command completed with an error status: args (message, opcode, lba, status).");

fn ferr(e: CoreFabricError) -> PyErr {
    FabricError::new_err(e.to_string())
}

/// An address from Python (int, number text or expression) on fabric `f`.
pub(crate) fn resolve(f: &CoreFabric, a: PyAddr) -> PyResult<u64> {
    match a {
        PyAddr::Int(n) => Ok(n),
        PyAddr::Str(s) => match parse_num(&s) {
            Some(n) => Ok(n),
            None => f.resolve_addr(&Addr::Expr(s)).map_err(ferr),
        },
    }
}

/// An address from Python as requester `r` names it: an expression must name something in the
/// requester's own host (`Fabric::resolve_for`).
pub(crate) fn resolve_for(f: &CoreFabric, r: Requester, a: PyAddr) -> PyResult<u64> {
    match a {
        PyAddr::Int(n) => Ok(n),
        PyAddr::Str(s) => match parse_num(&s) {
            Some(n) => Ok(n),
            None => f.resolve_for(r, &Addr::Expr(s)).map_err(ferr),
        },
    }
}

/// Largest functional read in one call (the bytes come back as one Python object).
const MAX_ACCESS: usize = 1 << 30;
/// Largest timed DMA stream in one call: 64 GiB simulates in about two minutes.
const MAX_DMA: u64 = 64 << 30;

/// An address from Python: an int, or a string (number or expression).
#[derive(FromPyObject)]
pub(crate) enum PyAddr {
    Int(u64),
    Str(String),
}

#[pyclass(module = "devlend._core")]
struct Fabric {
    inner: CoreFabric,
}

impl Fabric {
    fn req(&self, s: &str) -> PyResult<Requester> {
        self.inner.requester(s).map_err(ferr)
    }
    fn addr(&self, a: PyAddr) -> PyResult<u64> {
        resolve(&self.inner, a)
    }
    fn addr_for(&self, r: Requester, a: PyAddr) -> PyResult<u64> {
        resolve_for(&self.inner, r, a)
    }
    fn host(&self, name: &str) -> PyResult<u16> {
        self.inner.host_id(name).map_err(ferr)
    }
    fn func(&self, name: &str) -> PyResult<u32> {
        self.inner.func_id(name).map_err(ferr)
    }
    fn ntb(&self, name: &str) -> PyResult<u32> {
        self.inner.ntb_id(name).map_err(ferr)
    }
}

#[pymethods]
impl Fabric {
    #[staticmethod]
    fn from_json(json: &str) -> PyResult<Fabric> {
        devlend_fabric::build_json(json).map(|inner| Fabric { inner }).map_err(|e| SpecError::new_err((e.path, e.fault.to_string())))
    }

    fn inventory(&self) -> String {
        self.inner.inventory().to_string()
    }

    fn resolve(&self, addr: PyAddr) -> PyResult<u64> {
        self.addr(addr)
    }

    #[pyo3(signature = (requester, addr, write=true))]
    fn route(&mut self, requester: &str, addr: PyAddr, write: bool) -> PyResult<String> {
        let r = self.req(requester)?;
        let a = self.addr_for(r, addr)?;
        let route = self.inner.route(r, a, if write { Access::Write } else { Access::Read });
        Ok(self.inner.route_json(&route).to_string())
    }

    /// Write bytes as the requester would; returns (bytes delivered, failure JSON or None).
    fn write(&mut self, requester: &str, addr: PyAddr, data: &[u8]) -> PyResult<(usize, Option<String>)> {
        let r = self.req(requester)?;
        let a = self.addr_for(r, addr)?;
        let (n, fail) = self.inner.write(r, a, data);
        Ok((n, fail.map(|f| self.inner.failure_json(&f).to_string())))
    }

    /// Read bytes as the requester would; returns (bytes, failure JSON or None).
    fn read<'py>(&mut self, py: Python<'py>, requester: &str, addr: PyAddr, len: usize) -> PyResult<(Bound<'py, PyBytes>, Option<String>)> {
        if len > MAX_ACCESS {
            return Err(FabricError::new_err(format!("read of {len} bytes: at most {MAX_ACCESS} bytes per call")));
        }
        let r = self.req(requester)?;
        let a = self.addr_for(r, addr)?;
        let (data, fail) = self.inner.read(r, a, len);
        Ok((PyBytes::new(py, &data), fail.map(|f| self.inner.failure_json(&f).to_string())))
    }

    /// Time a DMA stream of `bytes` by `requester` at `addr` on an idle fabric (devlend-engine);
    /// with `warm`, after one untimed run of the same stream (warm IOTLB).
    /// `transfer`: the size of each of the back-to-back transfers the stream is made of (0: one).
    /// Returns (picoseconds, TLP-hops simulated, events, IOTLB misses, reads re-split at a root).
    #[pyo3(signature = (requester, addr, bytes, write=true, warm=false, transfer=0))]
    #[allow(clippy::too_many_arguments)]
    fn dma(
        &mut self,
        py: Python<'_>,
        requester: &str,
        addr: PyAddr,
        bytes: u64,
        write: bool,
        warm: bool,
        transfer: u64,
    ) -> PyResult<(Option<DmaCounts>, Option<String>)> {
        if bytes == 0 || bytes > MAX_DMA {
            return Err(FabricError::new_err(format!("DMA of {bytes} bytes: expected 1 byte to {MAX_DMA} bytes")));
        }
        let r = self.req(requester)?;
        let a = self.addr_for(r, addr)?;
        let access = if write { Access::Write } else { Access::Read };
        let inner = &mut self.inner;
        let res = py.detach(|| devlend_engine::dma_transfers(inner, r, a, bytes, access, warm, transfer));
        match res {
            Ok(t) => Ok((Some((t.time_ps, t.stats.tlp_hops, t.stats.events, t.stats.iotlb_misses, t.stats.resplit_requests)), None)),
            Err(e) => Ok((None, Some(self.inner.dma_fault_json(&e).to_string()))),
        }
    }

    /// The DMA engine's own times of `requester`'s device, (issue, completion) in picoseconds, as
    /// its profile and the topology's `params` make them (devlend_fabric::tuning): what a device
    /// actor charges before a request and after a read's data, beside the path `dma` times; with
    /// `read_bytes`, the completion time of a read of that many bytes (its per-line intake).
    #[pyo3(signature = (requester, read_bytes=0))]
    fn engine_ps(&self, requester: &str, read_bytes: u64) -> PyResult<(u64, u64)> {
        match self.req(requester)? {
            Requester::Func(f) => {
                let t = devlend_fabric::tuning::of_func(&self.inner, f);
                Ok((t.dma_issue_ps, t.read_done_ps(read_bytes)))
            }
            Requester::Cpu(_) => Err(FabricError::new_err(format!("'{requester}' is a CPU, not a device with a DMA engine"))),
        }
    }

    fn events(&self) -> String {
        self.inner.events_json().to_string()
    }

    fn event_counts(&self) -> String {
        self.inner.event_counts_json().to_string()
    }

    fn memory_digest(&self) -> u64 {
        self.inner.memory_digest()
    }

    fn cache_stats(&self) -> (u64, u64, usize) {
        (self.inner.route_cache_stats().0, self.inner.route_cache_stats().1, self.inner.cached_routes())
    }

    /// Time `iterations` cached lookups over `pages` consecutive pages from `addr` (benchmarks).
    fn bench_lookups(&mut self, requester: &str, addr: PyAddr, pages: u64, iterations: u64) -> PyResult<f64> {
        let r = self.req(requester)?;
        let a = self.addr_for(r, addr)?;
        let start = std::time::Instant::now();
        let mut delivered = 0u64;
        for i in 0..iterations {
            let x = a + (i % pages.max(1)) * 4096 + (i & 0xff) * 8;
            if matches!(self.inner.lookup(r, x, Access::Write), devlend_fabric::Outcome::Delivered(_)) {
                delivered += 1;
            }
        }
        std::hint::black_box(delivered);
        Ok(start.elapsed().as_secs_f64())
    }

    // ----- NTB -----
    #[pyo3(signature = (ntb, pidx=0))]
    fn mw_count(&self, ntb: &str, pidx: usize) -> PyResult<usize> {
        self.inner.ntb_mw_count(self.ntb(ntb)?, pidx).map_err(ferr)
    }
    /// ntb_peer_port_number for every peer index: the adapters `ntb` reaches, by peer index.
    fn peers(&self, ntb: &str) -> PyResult<Vec<String>> {
        let n = self.ntb(ntb)?;
        Ok(self.inner.ntb(n).peers.iter().map(|p| self.inner.ntb(p.ntb).name.clone()).collect())
    }
    /// Links that trained down: (link end a, end b, asked (gen, width), trained (gen, width), message).
    fn trained_down(&self) -> Vec<TrainedDown> {
        self.inner.trained_down().iter().map(|t| (t.spec_path.clone(), t.asked, t.trained, t.message())).collect()
    }
    fn peer_mw_count(&self, ntb: &str) -> PyResult<usize> {
        Ok(self.inner.peer_mw_count(self.ntb(ntb)?))
    }
    #[pyo3(signature = (ntb, widx, pidx=0))]
    fn mw_get_align(&self, ntb: &str, widx: usize, pidx: usize) -> PyResult<(u64, u64, u64)> {
        self.inner.ntb_mw_get_align(self.ntb(ntb)?, pidx, widx).map_err(ferr)
    }
    #[pyo3(signature = (ntb, widx, addr, size, pidx=0))]
    fn mw_set_trans(&mut self, ntb: &str, widx: usize, addr: PyAddr, size: u64, pidx: usize) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        let a = self.addr_for(Requester::Cpu(self.inner.ntb(n).host), addr)?;
        self.inner.ntb_mw_set_trans(n, pidx, widx, a, size).map_err(ferr)
    }
    #[pyo3(signature = (ntb, widx, segment, addr, pidx=0))]
    fn lut_set_trans(&mut self, ntb: &str, widx: usize, segment: usize, addr: PyAddr, pidx: usize) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        let a = self.addr_for(Requester::Cpu(self.inner.ntb(n).host), addr)?;
        self.inner.ntb_lut_set_trans(n, pidx, widx, segment, a).map_err(ferr)
    }
    #[pyo3(signature = (ntb, widx, pidx=0))]
    fn mw_clear_trans(&mut self, ntb: &str, widx: usize, pidx: usize) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.ntb_mw_clear_trans(n, pidx, widx).map_err(ferr)
    }
    fn peer_mw_get_addr(&self, ntb: &str, widx: usize) -> PyResult<(u64, u64)> {
        self.inner.peer_mw_get_addr(self.ntb(ntb)?, widx).map_err(ferr)
    }
    fn rid_lut_add(&mut self, ntb: &str, requester: &str) -> PyResult<usize> {
        let n = self.ntb(ntb)?;
        let r = self.req(requester)?;
        if self.inner.requester_host(r) != self.inner.ntb(n).host {
            return Err(FabricError::new_err(format!("{requester} is not in the host of {ntb}")));
        }
        let rid = self.inner.requester_rid(r);
        self.inner.rid_lut_add(n, rid).map_err(ferr)
    }
    fn peer_db_set(&mut self, ntb: &str, bits: u64) -> PyResult<bool> {
        let n = self.ntb(ntb)?;
        self.inner.peer_db_set(n, bits).map_err(ferr)
    }
    fn db_read(&self, ntb: &str) -> PyResult<u64> {
        Ok(self.inner.db_read(self.ntb(ntb)?))
    }
    fn db_clear(&mut self, ntb: &str, bits: u64) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.db_clear(n, bits);
        Ok(())
    }
    fn db_set_mask(&mut self, ntb: &str, mask: u64) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.db_set_mask(n, mask);
        Ok(())
    }
    fn db_irqs(&self, ntb: &str) -> PyResult<u64> {
        Ok(self.inner.ntb(self.ntb(ntb)?).doorbell_irqs)
    }
    fn spad_read(&self, ntb: &str, idx: usize) -> PyResult<u32> {
        self.inner.spad_read(self.ntb(ntb)?, idx).map_err(ferr)
    }
    fn spad_write(&mut self, ntb: &str, idx: usize, val: u32) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.spad_write(n, idx, val).map_err(ferr)
    }
    fn peer_spad_read(&self, ntb: &str, idx: usize) -> PyResult<u32> {
        self.inner.peer_spad_read(self.ntb(ntb)?, idx).map_err(ferr)
    }
    fn peer_spad_write(&mut self, ntb: &str, idx: usize, val: u32) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.peer_spad_write(n, idx, val).map_err(ferr)
    }
    fn peer_msg_write(&mut self, ntb: &str, idx: usize, msg: u32) -> PyResult<()> {
        let n = self.ntb(ntb)?;
        self.inner.peer_msg_write(n, idx, msg).map_err(ferr)
    }
    fn msg_read(&mut self, ntb: &str, idx: usize) -> PyResult<Option<u32>> {
        let n = self.ntb(ntb)?;
        self.inner.msg_read(n, idx).map_err(ferr)
    }

    // ----- IOMMU -----
    fn iommu_domain_alloc(&mut self, host: &str, name: &str) -> PyResult<u32> {
        let h = self.host(host)?;
        self.inner.iommu_domain_alloc(h, name).map_err(ferr)
    }
    fn iommu_attach(&mut self, host: &str, domain: &str, device: &str) -> PyResult<()> {
        let h = self.host(host)?;
        let d = self.inner.iommu_domain(h, domain).map_err(ferr)?;
        let f = self.func(device)?;
        self.inner.iommu_attach(h, d, f).map_err(ferr)
    }
    fn iommu_detach(&mut self, host: &str, device: &str) -> PyResult<()> {
        let h = self.host(host)?;
        let f = self.func(device)?;
        self.inner.iommu_detach(h, f).map_err(ferr)
    }
    #[pyo3(signature = (host, domain, iova, addr, size, write=true))]
    fn iommu_map(&mut self, host: &str, domain: &str, iova: PyAddr, addr: PyAddr, size: u64, write: bool) -> PyResult<()> {
        let h = self.host(host)?;
        let d = self.inner.iommu_domain(h, domain).map_err(ferr)?;
        let (i, a) = (self.addr_for(Requester::Cpu(h), iova)?, self.addr_for(Requester::Cpu(h), addr)?);
        self.inner.iommu_map(h, d, i, a, size, write).map_err(ferr)
    }
    fn iommu_unmap(&mut self, host: &str, domain: &str, iova: PyAddr, size: u64) -> PyResult<u64> {
        let h = self.host(host)?;
        let d = self.inner.iommu_domain(h, domain).map_err(ferr)?;
        let i = self.addr_for(Requester::Cpu(h), iova)?;
        self.inner.iommu_unmap(h, d, i, size).map_err(ferr)
    }
    fn iommu_faults(&self, host: &str) -> PyResult<String> {
        Ok(self.inner.iommu_faults_json(self.host(host)?).to_string())
    }
    /// Whether interrupt remapping is on in `host` (`intremap`).
    fn interrupt_remapping(&self, host: &str) -> PyResult<bool> {
        Ok(self.inner.intr_remap_on(self.host(host)?))
    }
    /// Turn interrupt remapping on in `host` (needs its IOMMU).
    fn interrupt_remapping_enable(&mut self, host: &str) -> PyResult<()> {
        let h = self.host(host)?;
        self.inner.intr_remap_enable(h).map_err(ferr)
    }

    // ----- PCI -----
    fn bdf(&self, device: &str) -> PyResult<String> {
        Ok(self.inner.func(self.func(device)?).bdf.to_string())
    }
    #[pyo3(signature = (device, offset, size=4))]
    fn config_read(&self, device: &str, offset: usize, size: usize) -> PyResult<u32> {
        self.inner.config_read(self.func(device)?, offset, size).map_err(ferr)
    }
    #[pyo3(signature = (device, offset, value, size=4))]
    fn config_write(&mut self, device: &str, offset: usize, value: u32, size: usize) -> PyResult<()> {
        let f = self.func(device)?;
        self.inner.config_write(f, offset, size, value).map_err(ferr)
    }
    fn set_bus_master(&mut self, device: &str, enable: bool) -> PyResult<()> {
        let f = self.func(device)?;
        self.inner.set_bus_master(f, enable);
        Ok(())
    }
}

/// A timed DMA stream: (ps, TLP-hops simulated, events, IOTLB misses, reads re-split at a root).
type DmaCounts = (u64, u64, u64, u64, u64);

/// A link that trained down: (link, asked (gen, width), trained (gen, width), message).
type TrainedDown = (String, (u8, u8), (u8, u8), String);

/// A run's steps for Python: (what, ps) each.
pub(crate) type Steps = Vec<(String, u64)>;

pub(crate) fn steps(v: Vec<(&'static str, u64)>) -> Steps {
    v.into_iter().map(|(w, p)| (w.to_string(), p)).collect()
}

/// The hardware parameter file (TOML text), compiled into the core.
#[pyfunction]
fn params_toml() -> &'static str {
    devlend_fabric::params::HARDWARE_TOML
}

/// Every constant `--set` may set: (key, unit, default), for `devlend params`.
#[pyfunction]
fn settable() -> Vec<(String, &'static str, String)> {
    devlend_fabric::tuning::settable()
}

/// Every kind a device may be (`devlend_drivers::registry`): the registered device types, then
/// the generic kind; the topology schema's `kind` is built from it.
#[pyfunction]
fn device_kinds() -> Vec<&'static str> {
    devlend_drivers::registry::kinds().collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Fabric>()?;
    m.add_function(wrap_pyfunction!(params_toml, m)?)?;
    m.add_function(wrap_pyfunction!(settable, m)?)?;
    m.add_function(wrap_pyfunction!(device_kinds, m)?)?;
    lending::register(m)?;
    fio::register(m)?;
    rdma::register(m)?;
    vm::register(m)?;
    xenib::register(m)?;
    hypertrio::register(m)?;
    machine::register(m)?;
    workloads::register(m)?;
    pool::register(m)?;
    uml::register(m)?;
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add("FabricError", m.py().get_type::<FabricError>())?;
    m.add("NvmeStatusError", m.py().get_type::<NvmeStatusError>())?;
    m.add("DeviceError", m.py().get_type::<DeviceError>())?;
    Ok(())
}
