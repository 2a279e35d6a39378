//! The hyper-tenant NIC (seed 002) as a workload on the shared machine: a NIC of kind `nic` on
//! any topology serves N tenants of one host (the runner: its root complex holds the tenants'
//! IOMMU), borrowed through Device Lending when it sits in another host.
//!
//! The NIC model itself (the HyperTRIO pipeline coupled to the engine through its round trip,
//! its epochs and drops) is `devlend_devices::nic`; here the workload attaches it, maps its
//! packet buffer and rings its doorbell.

use crate::attach::{attach, with_os, Guests, Runner};
use crate::error::{BadSpec, FailCause, WResult, WorkloadError};
pub(crate) use devlend_devices::nic::Nic;
use devlend_devices::nic::{NicOutcome, BUFFER_BYTES};
use devlend_drivers::registry::Serves;
use devlend_engine::machine::{Machine, ThreadError};
use devlend_engine::queue::Ps;
use devlend_host::{Cluster, DmaDir, Os, ThreadKernel};
use devlend_hypertrio::{params as ht_params, Config, WorkloadSpec};
use std::cell::RefCell;
use std::rc::Rc;

pub use devlend_devices::nic::{NicEpoch, NicFault, NicResult, NicSpec};

/// The NIC's outcome for workload `w`: its fault or a NIC that never started as the workload's error.
pub(crate) fn result(nic: &Nic, w: &str) -> WResult<NicOutcome> {
    match nic.outcome() {
        Ok(Some(o)) => Ok(o),
        Ok(None) => Err(WorkloadError::Failed { workload: w.into(), cause: FailCause::NicNotStarted }),
        Err(fault) => Err(WorkloadError::failed(w)(fault)),
    }
}

/// The pipeline's configuration and workload for `spec`, checked before anything runs.
fn model(w: &str, spec: &NicSpec) -> WResult<(Config, WorkloadSpec, u64)> {
    let invalid = |why| WorkloadError::invalid(w, why);
    if spec.duration == 0 || spec.epoch == 0 {
        return Err(invalid(BadSpec::NicTimes));
    }
    let p = ht_params();
    let cfg = p.config_with(&spec.config, None).map_err(|e| invalid(BadSpec::Nic(e)))?;
    let mut wl = WorkloadSpec::new(&spec.profile, spec.tenants, &spec.order).map_err(|e| invalid(BadSpec::Nic(e)))?;
    wl.packets_per_tenant = spec.packets_per_tenant;
    wl.seed = 1;
    Ok((cfg, wl, p.packet_bytes))
}

/// Attach `device` (a NIC) for `runner`, map its packet buffer, put the NIC on the machine and
/// start the runner's driver thread at `at`: it rings the NIC's doorbell (BAR 0).
pub(crate) fn start(m: &mut Machine<Cluster>, guests: &Guests, w: &str, (runner, device): (&str, &str), spec: &NicSpec, at: Ps) -> WResult<Rc<RefCell<Nic>>> {
    let (cfg, wl, packet_bytes) = model(w, spec)?;
    let setup = WorkloadError::host_setup(w, "mapping the NIC's packet buffer");
    let mut c = m.world();
    let a = attach(&mut c, guests, w, runner, device, Serves::TenantPackets)?;
    let (buf, bar) = with_os!(&a.runner, c, |os| {
        os.pci_set_master(a.dev)?;
        let phys = os.kmalloc(BUFFER_BYTES)?;
        Ok((os.dma_map_single(a.dev, phys, BUFFER_BYTES, DmaDir::Bidirectional)?, os.pci_iomap(a.dev, 0)?))
    })
    .map_err(setup)?;
    let host = match &a.runner {
        Runner::Host(h) => *h,
        Runner::Vm(g) => g.vmm.borrow().vm(g.vm).map_err(WorkloadError::host_setup(w, "the runner's VM"))?.host,
    };
    let t = &c.fabric.tuning().timing;
    let completer = t.dram_latency_ps + if c.fabric.host(host).iommu { t.iotlb_hit_ps } else { 0 };
    drop(c);
    let nic = Rc::new(RefCell::new(Nic::new(spec.clone(), (cfg, wl), packet_bytes, buf, completer)));
    m.add_device(a.func, nic.clone());
    match &a.runner {
        Runner::Host(h) => doorbell(m, w, at, *h, bar),
        Runner::Vm(g) => doorbell(m, w, at, g.clone(), bar),
    };
    Ok(nic)
}

fn doorbell<K: ThreadKernel>(m: &mut Machine<Cluster>, w: &str, at: Ps, k: K, bar: u64) -> usize {
    m.spawn(w, at, move |t| {
        let mut os = k.on(t).map_err(ThreadError::other)?;
        os.write(bar, &1u32.to_le_bytes()).map_err(ThreadError::other)
    })
}
