//! Guest drivers that wait on a device that never answers time out as the native drivers do
//! (issue 17: a completion timeout, a device gone silent), never hang: the NVMe driver after
//! `nvme_io_timeout_ps` with the CSTS read, the GPU driver after its copy watchdog
//! (`gpu_watchdog_ps`), each on the machine, in a VM on either path.

use devlend_devices::nvme::{Controller, Media, BLOCK};
use devlend_drivers::gpu_run::shared;
use devlend_drivers::nvme_driver::{Driver, NvmeError};
use devlend_engine::machine::{Cx, Device, FlowDone};
use devlend_host::{Cluster, Os};
use devlend_vm::fixtures::{self, Scenario, Testbed, GUEST_RAM};
use devlend_vm::timed::on_machine;
use devlend_vm::Vmm;
use devlend_wire::Tlp;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

const JSON: &str = include_str!("../expansion-chassis-vm.json");

/// A device model that acts as `inner` until `dead` is set, then never answers again: no
/// register write is acted on, no DMA or timer of its own goes on (its BAR memory still reads).
struct Silent<D> {
    inner: Rc<RefCell<D>>,
    dead: Rc<Cell<bool>>,
}

impl<D: Device<Cluster>> Device<Cluster> for Silent<D> {
    fn mmio_write(&mut self, cx: &mut Cx<Cluster>, bar: u8, offset: u64, tlp: &Tlp) {
        if !self.dead.get() {
            self.inner.borrow_mut().mmio_write(cx, bar, offset, tlp);
        }
    }
    fn dma_done(&mut self, cx: &mut Cx<Cluster>, done: FlowDone) {
        if !self.dead.get() {
            self.inner.borrow_mut().dma_done(cx, done);
        }
    }
    fn dma_sent(&mut self, cx: &mut Cx<Cluster>, token: u64) {
        if !self.dead.get() {
            self.inner.borrow_mut().dma_sent(cx, token);
        }
    }
    fn timer(&mut self, cx: &mut Cx<Cluster>, token: u64) {
        if !self.dead.get() {
            self.inner.borrow_mut().timer(cx, token);
        }
    }
}

fn timing() -> &'static devlend_fabric::tuning::Timing {
    devlend_fabric::tuning::default_timing()
}

#[test]
fn the_guests_nvme_driver_times_out_on_a_drive_that_stops_answering() {
    for runner in ["lender", "remote"] {
        let mut c = Cluster::from_json(JSON).unwrap();
        let mut vmm = Vmm::default();
        let vm = vmm.create_vm(&mut c, runner, "guest", GUEST_RAM).unwrap();
        let func = c.fabric.func_id("nvme0").unwrap();
        let dev = if runner == "lender" {
            vmm.assign_vfio(&mut c, vm, "nvme0").unwrap()
        } else {
            vmm.register_mdev(&c, "nvme0").unwrap();
            vmm.assign_mdev(&mut c, vm, "nvme0").unwrap()
        };
        let media = Media::of_device(&c.fabric, "nvme0").unwrap();
        let ctrl = Rc::new(RefCell::new(Controller::new(&mut c.fabric, func, 1 << 24, media)));
        let dead = Rc::new(Cell::new(false));
        let silent = Rc::new(RefCell::new(Silent { inner: ctrl, dead: dead.clone() }));
        let got = Rc::new(RefCell::new(None));
        let out = got.clone();
        on_machine(c, vmm, vm, vec![(func, silent)], move |os| {
            let mut drv = Driver::probe(os, dev).map_err(|e| e.to_string())?;
            let buf = os.kmalloc(8 * BLOCK).map_err(|e| e.to_string())?;
            drv.read(os, 0, 8, buf).map_err(|e| e.to_string())?;
            dead.set(true);
            let start = os.now();
            let e = drv.read(os, 8, 8, buf).unwrap_err();
            *out.borrow_mut() = Some((e, os.now() - start));
            Ok::<(), String>(())
        })
        .unwrap();
        let (e, waited) = got.borrow_mut().take().unwrap();
        let timeout = timing().nvme_io_timeout_ps;
        assert!(matches!(e, NvmeError::Timeout { after_ps, .. } if after_ps == timeout), "{runner}: {e}");
        assert!(waited >= timeout && waited < timeout + timeout / 100, "{runner}: the driver gave up after {waited} ps");
    }
}

#[test]
fn the_guests_gpu_driver_gives_up_after_its_watchdog_on_a_gpu_that_stops_answering() {
    for sc in [Scenario::VmLoc, Scenario::VmRem] {
        let Testbed { mut c, mut vmm, vm, a, .. } = fixtures::testbed(JSON, sc).unwrap();
        let buf = vmm.guest(&mut c, vm).unwrap().kmalloc(4096).unwrap();
        let gpu = shared(a.gpu);
        let func = gpu.borrow().func;
        let dead = Rc::new(Cell::new(false));
        let silent = Rc::new(RefCell::new(Silent { inner: gpu, dead: dead.clone() }));
        let got = Rc::new(RefCell::new(None));
        let (out, mut drv) = (got.clone(), a.drv);
        on_machine(c, vmm, vm, vec![(func, silent)], move |os| {
            drv.memcpy_htod(os, 0, buf, 4096).map_err(|e| e.to_string())?;
            dead.set(true);
            let start = os.now();
            let e = drv.memcpy_htod(os, 0, buf, 4096).unwrap_err();
            *out.borrow_mut() = Some((e.to_string(), os.now() - start));
            Ok::<(), String>(())
        })
        .unwrap();
        let (e, waited) = got.borrow_mut().take().unwrap();
        let watchdog = timing().gpu_watchdog_ps;
        assert!(waited >= watchdog && waited < 2 * watchdog, "{sc:?}: the driver gave up after {waited} ps: {e}");
    }
}
