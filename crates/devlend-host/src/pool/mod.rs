//! The device pool, as Dolphin's `smartio_tool` presents Device Lending: a lender `connect`s to
//! the hosts that may borrow from it, `add`s a device to the pool (it stays unavailable) and makes
//! it `available`; a borrower `borrow`s it by its fabric device ID (optionally with the size of the
//! DMA window) and `return`s it. `list` and `show` inspect the pool. Borrowing is `Cluster::borrow_with`
//! (000 §4: hot-add, BARs through the borrower's NTB, the DMA window through the lender's, the
//! borrower's IOMMU, MSI-X through the NTB); returning is `Cluster::return_device`, so a failed
//! borrow and a return leave no window, LUT entry or IOMMU mapping behind.
//!
//! *Fabric device IDs.* SmartIO lists a device as e.g. `ID 80002` (its documentation's example on
//! node 8). Here the fdid is `NODE << 16 | k`: NODE = 4 x (host index + 1), Dolphin's node IDs
//! being multiples of 4 (assumed for the numbering: a real cluster's node IDs are configured), and
//! k the device's place among its host's lendable functions in the topology (from 0; how SmartIO
//! numbers k is not documented: assumed). So IDs are stable whatever the order of `add`s.
//! NTB adapters carry the lending and get no fdid.

mod error;
mod fault;
#[cfg(test)]
mod tests;

pub use error::{PResult, PoolError};

use crate::cluster::{BorrowOptions, Cluster, LendInfo, Teardown};
use crate::kernel::DevId;
use devlend_fabric::model::{FuncId, HostId, NodeKind};
use std::collections::{BTreeMap, BTreeSet};

pub type Fdid = u32;

/// A device's state in the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Not added by its lender.
    NotAdded,
    /// Added, not available for borrowing.
    Unavailable,
    Available,
    /// Borrowed by a host (`PoolEntry::borrower`).
    Borrowed,
    /// Borrowed, but its lend's path is cut (an NTB link or a port on the way is down): nothing
    /// crosses until it comes back; a return completes locally.
    LinkDown,
    /// Surprise-removed: not borrowable until its slot comes back (`port-up`).
    Removed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::NotAdded => "not added",
            State::Unavailable => "unavailable",
            State::Available => "available",
            State::Borrowed => "borrowed",
            State::LinkDown => "link down",
            State::Removed => "removed",
        }
    }
}

/// One lendable device as `list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolEntry {
    pub fdid: Fdid,
    pub device: String,
    pub lender: String,
    /// Its requester ID in the lender.
    pub bdf: String,
    pub profile: Option<String>,
    pub state: State,
    pub borrower: Option<String>,
    /// Hosts the lender has connected to (they may see and borrow it).
    pub visible_to: Vec<String>,
}

pub struct Pool {
    cluster: Cluster,
    /// Every lendable function, in fdid order.
    ids: Vec<(Fdid, FuncId)>,
    /// Devices in the pool: whether available.
    added: BTreeMap<FuncId, bool>,
    /// (lender, borrower) pairs joined by `connect`.
    connected: BTreeSet<(HostId, HostId)>,
    /// Borrowed devices: (borrower, its handle of the device).
    borrowed: BTreeMap<FuncId, (HostId, DevId)>,
    /// Devices a fault touched: reset before their next borrow (`fault`).
    dirty: BTreeSet<FuncId>,
    /// Devices surprise-removed, until their slot comes back.
    removed: BTreeSet<FuncId>,
}

impl Pool {
    /// An empty pool over a cluster whose kernels have booted.
    pub fn new(cluster: Cluster) -> Pool {
        let f = &cluster.fabric;
        let mut per_host = vec![0u32; f.hosts().len()];
        let mut ids = Vec::new();
        for (i, func) in f.funcs().iter().enumerate() {
            if matches!(f.node(func.node).kind, NodeKind::Ntb { .. }) {
                continue;
            }
            let h = f.func_host(i as FuncId) as usize;
            ids.push(((4 * (h as u32 + 1)) << 16 | per_host[h], i as FuncId));
            per_host[h] += 1;
        }
        ids.sort();
        Pool { cluster, ids, added: BTreeMap::new(), connected: BTreeSet::new(), borrowed: BTreeMap::new(), dirty: BTreeSet::new(), removed: BTreeSet::new() }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The cluster, for drivers (a driver holding a borrowed device's mappings makes `return_device` refuse).
    pub fn cluster_mut(&mut self) -> &mut Cluster {
        &mut self.cluster
    }

    fn host(&self, name: &str) -> PResult<HostId> {
        self.cluster.host_id(name).map_err(|error| PoolError::NoSuchHost { host: name.into(), error })
    }

    fn name(&self, func: FuncId) -> String {
        self.cluster.fabric.func(func).name.clone()
    }

    fn host_name(&self, h: HostId) -> String {
        self.cluster.fabric.host(h).name.clone()
    }

    /// A device by function name or by fabric device ID (hex, as `list` prints it, `0x` optional).
    pub fn resolve(&self, device: &str) -> PResult<FuncId> {
        if let Ok(func) = self.cluster.fabric.func_id(device) {
            return match self.ids.iter().find(|(_, f)| *f == func) {
                Some(_) => Ok(func),
                None => Err(PoolError::NotLendable { device: device.into() }),
            };
        }
        let hex = device.strip_prefix("0x").unwrap_or(device);
        let fdid = u32::from_str_radix(hex, 16).ok();
        fdid.and_then(|id| self.ids.iter().find(|(i, _)| *i == id)).map(|(_, f)| *f).ok_or_else(|| PoolError::NoSuchDevice { device: device.into() })
    }

    pub fn fdid(&self, func: FuncId) -> Option<Fdid> {
        self.ids.iter().find(|(_, f)| *f == func).map(|(i, _)| *i)
    }

    /// Let `borrower` see and borrow `lender`'s devices. Refused when no NTB joins the two hosts.
    pub fn connect(&mut self, lender: &str, borrower: &str) -> PResult<()> {
        let (l, b) = (self.host(lender)?, self.host(borrower)?);
        if l != b && crate::lending::lender::link(&self.cluster.fabric, l, b).is_none() {
            return Err(PoolError::NoPath { lender: lender.into(), borrower: borrower.into() });
        }
        self.connected.insert((l, b));
        Ok(())
    }

    pub fn add(&mut self, device: &str) -> PResult<()> {
        let func = self.resolve(device)?;
        if self.added.insert(func, false).is_some() {
            return Err(PoolError::AlreadyInPool { device: self.name(func) });
        }
        Ok(())
    }

    fn in_pool(&self, device: &str) -> PResult<FuncId> {
        let func = self.resolve(device)?;
        if !self.added.contains_key(&func) {
            return Err(PoolError::NotInPool { device: self.name(func) });
        }
        if let Some(&(b, _)) = self.borrowed.get(&func) {
            return Err(PoolError::Borrowed { device: self.name(func), by: self.host_name(b) });
        }
        Ok(func)
    }

    pub fn remove(&mut self, device: &str) -> PResult<()> {
        let func = self.in_pool(device)?;
        self.added.remove(&func);
        Ok(())
    }

    pub fn available(&mut self, device: &str) -> PResult<()> {
        let func = self.in_pool(device)?;
        self.added.insert(func, true);
        Ok(())
    }

    pub fn unavailable(&mut self, device: &str) -> PResult<()> {
        let func = self.in_pool(device)?;
        self.added.insert(func, false);
        Ok(())
    }

    /// Borrow an available device onto `borrower`; `dma_window`: the size of the DMA window the
    /// lender opens (default: a whole NTB memory window). Returns the borrower's handle.
    pub fn borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>) -> PResult<DevId> {
        let b = self.host(borrower)?;
        let func = self.resolve(device)?;
        let name = self.name(func);
        if let Some(&(by, _)) = self.borrowed.get(&func) {
            return Err(PoolError::Borrowed { device: name, by: self.host_name(by) });
        }
        match self.added.get(&func) {
            None => return Err(PoolError::NotInPool { device: name }),
            Some(false) => return Err(PoolError::Unavailable { device: name }),
            Some(true) => {}
        }
        let lender = self.cluster.fabric.func_host(func);
        if !self.connected.contains(&(lender, b)) {
            return Err(PoolError::NotConnected { device: name, lender: self.host_name(lender), borrower: borrower.into() });
        }
        self.ready_for_borrow(func)?;
        let dev = self
            .cluster
            .borrow_with(b, &name, BorrowOptions { dma_window, ..Default::default() })
            .map_err(|error| PoolError::Lending { device: name, error })?;
        self.borrowed.insert(func, (b, dev));
        Ok(dev)
    }

    /// What a topology's `borrow` operation does: the lender's `connect`, `add` and `available`
    /// where not done yet, then `borrow`. If the borrow fails, those steps are undone too.
    pub fn offer_and_borrow(&mut self, borrower: &str, device: &str, dma_window: Option<u64>) -> PResult<DevId> {
        let (b, func) = (self.host(borrower)?, self.resolve(device)?);
        let key = (self.cluster.fabric.func_host(func), b);
        let (was_connected, was_added) = (self.connected.contains(&key), self.added.get(&func).copied());
        if !was_connected {
            let lender = self.host_name(key.0);
            self.connect(&lender, borrower)?;
        }
        if was_added != Some(true) && !self.borrowed.contains_key(&func) {
            self.added.insert(func, true);
        }
        self.borrow(borrower, device, dma_window).inspect_err(|_| {
            if !was_connected {
                self.connected.remove(&key);
            }
            match was_added {
                Some(a) => self.added.insert(func, a),
                None => self.added.remove(&func),
            };
        })
    }

    /// Return a borrowed device to its lender (it stays in the pool, available). Refused while the
    /// borrower's driver holds DMA mappings or interrupt vectors of it; `borrower`, when given, must
    /// be the host that borrowed it.
    pub fn return_device(&mut self, device: &str, borrower: Option<&str>) -> PResult<Teardown> {
        let func = self.resolve(device)?;
        let name = self.name(func);
        let Some(&(b, dev)) = self.borrowed.get(&func) else {
            return Err(PoolError::NotBorrowed { device: name, by: borrower.map(String::from) });
        };
        if let Some(asked) = borrower {
            if self.host(asked)? != b {
                return Err(PoolError::NotBorrowed { device: name, by: Some(asked.into()) });
            }
        }
        let report = self.cluster.return_device(b, dev).map_err(|error| PoolError::Lending { device: name, error })?;
        self.borrowed.remove(&func);
        Ok(report)
    }

    pub fn entry(&self, device: &str) -> PResult<PoolEntry> {
        let func = self.resolve(device)?;
        Ok(self.make_entry(self.fdid(func).unwrap_or_default(), func))
    }

    fn make_entry(&self, fdid: Fdid, func: FuncId) -> PoolEntry {
        let f = &self.cluster.fabric;
        let lender = f.func_host(func);
        let profile = f.devices().iter().find(|d| d.node == f.func(func).node).and_then(|d| d.profile.clone());
        let borrower = self.borrowed.get(&func).map(|&(b, _)| self.host_name(b));
        let state = match (self.added.get(&func), &borrower) {
            (_, Some(_)) if !self.lend_path_up(func) => State::LinkDown,
            (_, Some(_)) => State::Borrowed,
            _ if self.removed.contains(&func) => State::Removed,
            (None, None) => State::NotAdded,
            (Some(false), None) => State::Unavailable,
            (Some(true), None) => State::Available,
        };
        let visible_to = self.connected.iter().filter(|(l, _)| *l == lender).map(|&(_, b)| self.host_name(b)).collect();
        PoolEntry { fdid, device: self.name(func), lender: self.host_name(lender), bdf: f.func(func).bdf.to_string(), profile, state, borrower, visible_to }
    }

    /// Every lendable device, in fdid order.
    pub fn entries(&self) -> Vec<PoolEntry> {
        self.ids.iter().map(|&(id, func)| self.make_entry(id, func)).collect()
    }

    /// The lend of a borrowed device: windows, NTBs, BARs as the borrower sees them.
    pub fn lend(&self, device: &str) -> PResult<Option<LendInfo>> {
        let name = self.name(self.resolve(device)?);
        Ok(self.cluster.lends().into_iter().find(|l| l.device == name))
    }

    /// Whether Device Lending holds nothing: no lend, window, LUT entry or IOMMU mapping.
    pub fn idle(&self) -> bool {
        self.cluster.lending_idle()
    }
}
