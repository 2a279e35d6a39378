//! The VM interrupt path on the one clock (000 §5, §8; `irq` for the routes): a chain of events
//! on the hypervisor's threads, so an interrupt can queue behind another, and the NTB
//! notification is a store that shares the links with the data around it.
//!
//! For a VM, on every host its devices' interrupts reach (the lender, the VM's own host):
//! - `apic/<host>` notices each MSI landing on a vector of one of the VM's routes (a device's
//!   message, or the lender's notification arriving at the borrower's relay vector), and each
//!   assertion of an INTx line with one of the VM's routes, and queues it for that host's
//!   handler, in arrival order. It takes no time. An INTx line is level-triggered and masked
//!   from its handler's run until the guest has taken the interrupt (Linux
//!   drivers/vfio/pci/vfio_pci_intrs.c: `vfio_intx_handler` masks the line, with
//!   `disable_irq_nosync` or the function's Interrupt Disable, before signalling the eventfd;
//!   the guest's EOI signals KVM's resample irqfd, `KVM_IRQFD_FLAG_RESAMPLE`, and vfio unmasks):
//!   an assertion while masked waits, and the unmask makes the still-high line interrupt the
//!   host again. The EOI's way back (the resample eventfd, vfio's unmask; for the mediated path,
//!   the borrower telling the lender, which 000 §5 does not describe) is taken to cost nothing.
//! - `irq/<host>` is the host CPU taking them one at a time: the interrupt entry (the host's
//!   `irq_entry_ps`, the same one a bare-metal driver's `ThreadOs::wait_irq` pays); then, for a route's first handler on the lender of a mediated device, the
//!   lender-side handler (`lender_forward_ps`) and the notification, a 4-byte posted store by the
//!   lender's CPU onto the borrower's MSI page through the NTB; for VFIO's handler or the
//!   borrower's relay handler, eventfd and KVM's irqfd (`eventfd_irqfd_ps`), which hand the
//!   interrupt to the VM.
//! - `vcpu/<vm>` injects them one at a time: VM entry with the interrupt and the guest handler's
//!   entry (`guest_irq_entry_ps`); then the guest vector's count goes up and a waiting driver
//!   wakes. The guest is taken to be idle, halt-polling in KVM (as in `irq`): no VM exit is on
//!   the path.
//!
//! Each thread runs on its host (`Thread::runs_on`): a host's crash stops its stages there.
//!
//! A stage busy with one interrupt makes the next wait; the wait is a step of its own ("waiting for
//! ..."), absent on an idle machine, where the steps are `irq`'s. Each route keeps the steps of
//! its last interrupt (from its landing at the first host to the guest's handler) and the guest
//! vector its latency.
//!
//! The device's message (the device model is `devlend-devices`' `raiser`; [`Raiser`] here is it
//! in this crate's routes): an MSI-X write is a DMA write on the links; an
//! Assert_INTx message (a 4-byte message TLP upstream to the device's root,
//! `Cx::message_to_root`) is a flow on the same links and asserts the line when it arrives: both
//! wait behind the data on the links, as every stage after them does.

use crate::irq::Src;
use crate::vm::VmId;
use crate::vmm::Vmm;
use devlend_devices::raiser::{Interrupts, IrqMessage};
use devlend_engine::machine::{Machine, Thread, ThreadError, Watch};
use devlend_engine::queue::Ps;
use devlend_fabric::model::{FuncId, HostId};
use devlend_host::{Cluster, DevId, HResult};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

type Key = (DevId, Src);

/// One interrupt on its way: where it came from, when it arrived first and at the current stage,
/// and the steps so far.
struct Chain {
    key: Key,
    t0: Ps,
    at: Ps,
    steps: Vec<(String, u64)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The device's own message, at the route's first host.
    First,
    /// The lender's notification, at the borrower's relay vector.
    Relay,
}

#[derive(Default)]
struct Queues {
    arrived: BTreeMap<HostId, VecDeque<(Chain, Stage)>>,
    /// Notifications issued through the NTB, per route, not yet landed: (issued at, chain).
    sent: BTreeMap<Key, VecDeque<(Ps, Chain)>>,
    inject: VecDeque<Chain>,
}

struct Shared {
    vmm: Rc<RefCell<Vmm>>,
    vm: VmId,
    q: RefCell<Queues>,
}

/// Put VM `vm`'s interrupt path on machine `m`: the threads above, as services, the only ones
/// that deliver the VM's interrupts.
pub fn spawn(m: &mut Machine<Cluster>, vmm: &Rc<RefCell<Vmm>>, vm: VmId) -> HResult<()> {
    let mut hosts = BTreeSet::new();
    {
        let v = vmm.borrow();
        let w = m.world();
        let guest = v.vm(vm)?;
        hosts.insert(guest.host);
        hosts.extend(guest.devices.values().map(|d| w.fabric.func_host(d.func)));
    }
    let sh = Rc::new(Shared { vmm: vmm.clone(), vm, q: RefCell::default() });
    for h in hosts {
        let name = m.world().fabric.host(h).name.clone();
        let s = sh.clone();
        m.spawn_service(&format!("apic/{name}"), 0, move |t| apic(t, &s, h));
        let s = sh.clone();
        m.spawn_service(&format!("irq/{name}"), 0, move |t| handler(t, &s, h));
    }
    let s = sh.clone();
    m.spawn_service(&format!("vcpu/{}", vm.0), 0, move |t| vcpu(t, &s));
    Ok(())
}

/// New MSIs at `host` on the VM's routes: (route, stage, how many).
fn arrivals(sh: &Shared, c: &mut Cluster, host: HostId) -> Vec<(usize, Stage, u64)> {
    let vmm = sh.vmm.borrow();
    let mut out = Vec::new();
    for (i, r) in vmm.routes.iter().enumerate().filter(|(_, r)| r.vm == sh.vm) {
        let count = |c: &mut Cluster, v: u8| c.os(host).map_or(0, |mut os| os.irq_count(v));
        match r.first {
            (h, Some(v)) if h == host => out.push((i, Stage::First, count(c, v).saturating_sub(r.seen))),
            (h, None) if h == host => {
                let asserted = c.kernel(host).ok().and_then(|k| k.irqs().intx(r.func).map(|l| l.count)).unwrap_or(0);
                out.push((i, Stage::First, asserted.saturating_sub(r.seen)));
            }
            _ => {}
        }
        if let Some((vh, rv, _)) = r.relay {
            if vh == host {
                out.push((i, Stage::Relay, count(c, rv).saturating_sub(r.relay_seen)));
            }
        }
    }
    out.retain(|a| a.2 > 0);
    out
}

fn apic(t: &mut Thread<'_, Cluster>, sh: &Rc<Shared>, host: HostId) -> Result<(), ThreadError> {
    t.runs_on(host);
    loop {
        let s = sh.clone();
        t.wait_for("an interrupt", Watch::Msi { host }, move |c: &mut Cluster| !arrivals(&s, c, host).is_empty());
        let new = arrivals(sh, &mut t.world(), host);
        let now = t.now();
        let mut vmm = sh.vmm.borrow_mut();
        let mut q = sh.q.borrow_mut();
        for (i, stage, n) in new {
            let r = &mut vmm.routes[i];
            let key = (r.dev, r.src);
            let intx = r.src == Src::Intx && stage == Stage::First;
            for _ in 0..n {
                if intx && r.intx_masked {
                    r.intx_pending = true;
                    continue;
                }
                r.intx_masked |= intx;
                let chain = match stage {
                    Stage::First => Some(Chain { key, t0: now, at: now, steps: Vec::new() }),
                    Stage::Relay => q.sent.get_mut(&key).and_then(|s| s.pop_front()).map(|(issued, mut ch)| {
                        ch.steps.push(("notification through the NTB".into(), now - issued));
                        ch.at = now;
                        ch
                    }),
                };
                if let Some(ch) = chain {
                    q.arrived.entry(host).or_default().push_back((ch, stage));
                }
            }
            match stage {
                Stage::First => r.seen += n,
                Stage::Relay => r.relay_seen += n,
            }
        }
    }
}

/// The time a chain waited for a stage that was busy, as a step.
fn queued(ch: &mut Chain, now: Ps, what: &str) {
    if now > ch.at {
        ch.steps.push((format!("waiting for {what}"), now - ch.at));
    }
}

fn step(t: &Thread<'_, Cluster>, ch: &mut Chain, what: &str, ps: u64) {
    t.sleep(ps);
    ch.steps.push((what.into(), ps));
}

fn handler(t: &mut Thread<'_, Cluster>, sh: &Rc<Shared>, host: HostId) -> Result<(), ThreadError> {
    let p = crate::params::params();
    let name = t.world().fabric.host(host).name.clone();
    let entry = t.world().fabric.tuning().host(host).irq_entry_ps;
    t.runs_on(host);
    loop {
        let s = sh.clone();
        t.wait_for("an interrupt to handle", Watch::Msi { host }, move |_: &mut Cluster| s.q.borrow().arrived.get(&host).is_some_and(|a| !a.is_empty()));
        let (mut ch, stage) = sh.q.borrow_mut().arrived.get_mut(&host).and_then(|a| a.pop_front()).expect("an arrival is queued");
        queued(&mut ch, t.now(), &format!("{name}'s CPU"));
        let relay = sh.vmm.borrow().irq_route(sh.vm, ch.key.0, ch.key.1).map(|r| r.relay);
        let Some(relay) = relay else { continue };
        match (stage, relay) {
            (Stage::First, Some((_, rv, addr))) => {
                step(t, &mut ch, "lender interrupt entry", entry);
                step(t, &mut ch, "lender-side handler", p.lender_forward_ps);
                let issued = t.now();
                t.cpu_write(host, addr, &(rv as u32).to_le_bytes())?;
                sh.q.borrow_mut().sent.entry(ch.key).or_default().push_back((issued, ch));
                continue;
            }
            (Stage::First, None) => step(t, &mut ch, "host interrupt entry", entry),
            (Stage::Relay, _) => step(t, &mut ch, "borrower interrupt entry", entry),
        }
        step(t, &mut ch, "eventfd and KVM irqfd", p.eventfd_irqfd_ps);
        ch.at = t.now();
        sh.q.borrow_mut().inject.push_back(ch);
    }
}

fn vcpu(t: &mut Thread<'_, Cluster>, sh: &Rc<Shared>) -> Result<(), ThreadError> {
    let p = crate::params::params();
    let host = sh.vmm.borrow().vm(sh.vm).map(|v| v.host).map_err(ThreadError::other)?;
    t.runs_on(host);
    loop {
        let s = sh.clone();
        t.wait_for("an interrupt to inject", Watch::Msi { host }, move |_: &mut Cluster| !s.q.borrow().inject.is_empty());
        let mut ch = sh.q.borrow_mut().inject.pop_front().expect("an interrupt is signalled");
        queued(&mut ch, t.now(), "the vCPU");
        step(t, &mut ch, "VM entry with the interrupt, guest handler entry", p.guest_irq_entry_ps);
        let key = ch.key;
        sh.vmm.borrow_mut().inject(sh.vm, key, (ch.t0, t.now()), ch.steps);
        if key.1 == Src::Intx {
            unmask(sh, key, t.now());
        }
    }
}

/// The guest took an INTx (its EOI): the line is unmasked; if the device kept it asserted, the
/// first host takes it again at once.
fn unmask(sh: &Shared, key: Key, now: Ps) {
    let mut vmm = sh.vmm.borrow_mut();
    let Some(r) = vmm.routes.iter_mut().find(|r| r.vm == sh.vm && (r.dev, r.src) == key) else { return };
    r.intx_masked = std::mem::take(&mut r.intx_pending);
    if r.intx_masked {
        sh.q.borrow_mut().arrived.entry(r.first.0).or_default().push_back((Chain { key, t0: now, at: now, steps: Vec::new() }, Stage::First));
    }
}

pub use devlend_devices::raiser::RAISE;

/// The VM crate's interrupt routes, as the device model [`devlend_devices::raiser::Raiser`] asks
/// for them (`irq::message`, the host's `Cluster::assert_intx`).
pub struct VmIrq;

impl Interrupts<Cluster> for VmIrq {
    fn message(c: &mut Cluster, func: FuncId, entry: u16) -> Option<IrqMessage> {
        match crate::irq::message(c, func, entry) {
            Ok(crate::irq::Message::Msi { addr, data }) => Some(IrqMessage::Msi { addr, data }),
            Ok(crate::irq::Message::Intx) => Some(IrqMessage::Intx),
            _ => None,
        }
    }

    fn assert_intx(c: &mut Cluster, func: FuncId) {
        c.assert_intx(func);
    }
}

/// The interrupt-only device on a VM's machine: [`devlend_devices::raiser::Raiser`] in the VM
/// crate's interrupt routes.
pub type Raiser = devlend_devices::raiser::Raiser<VmIrq>;
