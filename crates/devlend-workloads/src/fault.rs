//! Faults in a scenario: a fault (`devlend_host::fault`) injected at a simulated time on the
//! scenario's machine, what each fault did, the bytes a device had moved when each struck, and
//! after the run what Device Lending left programmed once every lend is ended.

use crate::error::{WResult, WorkloadError};
use crate::scenario::Scenario;
use devlend_engine::queue::Ps;
use devlend_fabric::ntb::Inbound;
use devlend_fabric::route::Requester;
use devlend_host::{Cluster, FaultKind, FaultReport};
use std::cell::RefCell;
use std::rc::Rc;

/// One injected fault and, once it has struck, its report.
pub struct FaultEntry {
    pub at: Ps,
    pub kind: FaultKind,
    pub target: String,
    pub report: Rc<RefCell<Option<Result<FaultReport, String>>>>,
}

impl Scenario {
    /// Inject fault `kind` (a `devlend_host::fault` name) at `target` at time `at`.
    pub fn add_fault(&mut self, at: Ps, kind: &str, target: &str) -> WResult<()> {
        let what = format!("fault {kind} at {target}");
        let k = FaultKind::parse(kind).map_err(|e| WorkloadError::Invalid { workload: what.clone(), why: e.to_string() })?;
        self.cluster().fault_target(k, target).map_err(|e| WorkloadError::NoSuch { workload: what.clone(), what: "fault target".into(), message: e.to_string() })?;
        if at < self.now() {
            return Err(WorkloadError::StartInPast { workload: what, at, now: self.now() });
        }
        let report = Rc::new(RefCell::new(None));
        let (r, t) = (report.clone(), target.to_string());
        self.m.inject(at, move |c: &mut Cluster| {
            let out = c.inject(k, &t).map_err(|e| e.to_string());
            let halted = out.as_ref().map(|rep| rep.halted.clone()).unwrap_or_default();
            *r.borrow_mut() = Some(out);
            halted
        });
        self.faults.push(FaultEntry { at, kind: k, target: target.into(), report });
        Ok(())
    }

    pub fn faults(&self) -> &[FaultEntry] {
        &self.faults
    }

    /// Bytes `device` has moved as a requester (landed writes, served reads): in all, and by
    /// the time each fault struck.
    pub fn moved(&self, device: &str) -> WResult<(u64, Vec<(Ps, u64)>)> {
        let func = self.cluster().fabric.func_id(device).map_err(|e| WorkloadError::NoSuch { workload: device.into(), what: "device".into(), message: e.to_string() })?;
        let who = Requester::Func(func);
        Ok((self.m.moved(who), self.m.struck(who)))
    }

    /// End every lend still held (a forced return: after a fault the driver may still hold the
    /// device), then count what Device Lending left programmed: NTB translations, LUT entries
    /// past the root complex's, IOMMU context entries and mapped domains of Device Lending
    /// (`dl` domains). Must be 0.
    pub fn end_lends_and_count_leftovers(&mut self) -> WResult<usize> {
        let mut c = self.cluster();
        for l in c.lends() {
            c.return_device_force(l.borrower.as_str(), l.dev).map_err(|e| WorkloadError::Machine { message: e.to_string() })?;
        }
        let f = &c.fabric;
        let ntb: usize = f.ntbs.iter().map(|n| n.inbound.iter().flatten().filter(|i| **i != Inbound::Unset).count() + n.rid_lut.iter().skip(1).filter(|e| e.is_some()).count()).sum();
        let dl = |name: &str| name.starts_with("dl");
        let iommu: usize = f.iommus.iter().map(|m| m.context.values().filter(|d| dl(&m.domains[**d as usize].name)).count() + m.domains.iter().filter(|d| dl(&d.name) && d.mapped_bytes > 0).count()).sum();
        Ok(ntb + iommu + usize::from(!c.lending_idle()))
    }
}
