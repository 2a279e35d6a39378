//! The device side without a guest: the NVMe model as UML's PCI sees it (config space, BAR
//! sizing, MMIO through the modelled NTB, MSI-X set-up) and a virtqueue in shared memory.

use devlend_uml::mem::GuestMem;
use devlend_uml::pcidev::Load;
use devlend_uml::vring::Vring;
use devlend_uml::{Engine, PciFunction};

const B2B: &str = include_str!("../../devlend-drivers/tests/b2b.json");

fn borrowed() -> (Engine, PciFunction) {
    let mut e = Engine::from_json(B2B).unwrap();
    let d = PciFunction::nvme(&mut e, "borrower", "nvme0", 1 << 20).unwrap();
    (e, d)
}

/// A memfd of `size` bytes shared as one region at guest-physical `base`, like UML's physmem.
fn guest_mem(base: u64, size: u64) -> GuestMem {
    let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), 0) };
    assert!(fd >= 0);
    assert_eq!(unsafe { libc::ftruncate(fd, size as libc::off_t) }, 0);
    let mut t = vec![0u8; 40];
    t[0..4].copy_from_slice(&1u32.to_le_bytes());
    t[8..16].copy_from_slice(&base.to_le_bytes());
    t[16..24].copy_from_slice(&size.to_le_bytes());
    t[24..32].copy_from_slice(&base.to_le_bytes());
    GuestMem::from_table(&t, &[fd]).unwrap()
}

#[test]
fn config_space_is_the_models_with_bars_sized_in_the_guests_view() {
    let (mut e, mut d) = borrowed();
    assert_eq!(d.cfg_read(&mut e, 0x0a, 2), 0x0108, "class: NVMe");
    assert_eq!(d.cfg_read(&mut e, 0x0b, 1), 0x01);
    let flags = d.cfg_read(&mut e, 0x10, 4) & 0xf;
    d.cfg_write(&mut e, 0x10, 4, 0xffff_ffff);
    let sized = d.cfg_read(&mut e, 0x10, 4) as u32;
    assert_eq!(sized & 0xf, flags as u32);
    assert!(sized & !0xf != 0 && (!(sized & !0xf)).wrapping_add(1).is_power_of_two(), "{sized:#x}");
    d.cfg_write(&mut e, 0x10, 4, 0x0100_0000);
    assert_eq!(d.cfg_read(&mut e, 0x10, 4) as u32 & !0xf, 0x0100_0000);
}

#[test]
fn an_mmio_read_crosses_the_fabric_and_takes_simulated_time() {
    let (mut e, mut d) = borrowed();
    let at = e.machine.now() + 1_000_000;
    let Load::Later(cell) = d.mmio_read(&mut e, 0, 0, 8, at).unwrap() else { panic!("a BAR load waits for the engine") };
    assert!(d.load_done(&cell).is_none(), "not before the engine has run");
    assert_eq!(e.next_event(), Some(at), "the load starts at the guest's time");
    assert!(!e.advance(at + 100_000_000).unwrap(), "nothing logged: no interrupt, no fault");
    let cap = u64::from_le_bytes(d.load_done(&cell).expect("done once the engine ran").try_into().unwrap());
    assert_eq!(cap & 0xffff, 1023, "CAP.MQES");
    assert!(e.machine.now() > at, "a load through the NTB takes time");
    assert!(d.mmio_read(&mut e, 0, 1 << 40, 4, at).is_err(), "outside the BAR");
}

#[test]
fn an_msix_entry_the_guest_programs_gets_a_vector_of_its_host() {
    let (mut e, mut d) = borrowed();
    let entry = 0x2000 + 16 * 3;
    d.mmio_write(&mut e, 0, entry, &0xa0000u32.to_le_bytes(), 0).unwrap();
    d.mmio_write(&mut e, 0, entry + 8, &77u32.to_le_bytes(), 0).unwrap();
    let Load::Now(back) = d.mmio_read(&mut e, 0, entry + 8, 4, 0).unwrap() else { panic!("the MSI-X table answers at once") };
    assert_eq!(back, 77u32.to_le_bytes(), "the guest reads back what it wrote");
    let mem = guest_mem(0x10_0000, 1 << 20);
    d.attach(&mut e, &mem).unwrap();
    let events = e.take_events();
    assert!(d.take_interrupts(&events).is_empty());
}

#[test]
fn the_guests_memory_is_its_hosts_ram() {
    let (mut e, mut d) = borrowed();
    let mem = guest_mem(0x10_0000, 1 << 20);
    d.attach(&mut e, &mem).unwrap();
    let h = e.machine.world().fabric.host_id("borrower").unwrap();
    e.machine.world().fabric.ram_store(h, 0x10_0040, b"dma");
    let mut b = [0u8; 3];
    mem.read(0x10_0040, &mut b, "test").unwrap();
    assert_eq!(&b, b"dma");
}

#[test]
fn a_virtqueue_chain_is_popped_and_returned() {
    let mem = guest_mem(0, 1 << 16);
    let mut r = Vring { num: 4, desc: 0x1000, avail: 0x2000, used: 0x3000, ..Default::default() };
    // Descriptor 0: 16 bytes at 0x4000 read by the device, chained to 1: 8 bytes written by it.
    let mut d = [0u8; 32];
    d[0..8].copy_from_slice(&0x4000u64.to_le_bytes());
    d[8..12].copy_from_slice(&16u32.to_le_bytes());
    d[12..14].copy_from_slice(&1u16.to_le_bytes());
    d[14..16].copy_from_slice(&1u16.to_le_bytes());
    d[16..24].copy_from_slice(&0x5000u64.to_le_bytes());
    d[24..28].copy_from_slice(&8u32.to_le_bytes());
    d[28..30].copy_from_slice(&2u16.to_le_bytes());
    mem.write(0x1000, &d, "t").unwrap();
    mem.write(0x2004, &0u16.to_le_bytes(), "t").unwrap();
    assert!(r.pop(&mem).unwrap().is_none(), "nothing offered yet");
    mem.write(0x2002, &1u16.to_le_bytes(), "t").unwrap();
    let (head, bufs) = r.pop(&mem).unwrap().unwrap();
    assert_eq!((head, bufs.len(), bufs[0].device_writes, bufs[1].device_writes, bufs[1].addr), (0, 2, false, true, 0x5000));
    r.push(&mem, head, 8).unwrap();
    let mut used = [0u8; 12];
    mem.read(0x3000, &mut used, "t").unwrap();
    assert_eq!(u16::from_le_bytes([used[2], used[3]]), 1);
    assert_eq!(u32::from_le_bytes(used[8..12].try_into().unwrap()), 8);
}

/// Run the engine up to `until` ps; when the guest's host was told that the device is gone.
fn told_until(e: &mut Engine, d: &mut PciFunction, until: u64) -> Option<u64> {
    while e.advance(until).unwrap() {
        if d.take_unplug(e) {
            return d.unplugged_at(e);
        }
    }
    d.take_unplug(e).then(|| d.unplugged_at(e)).flatten()
}

#[test]
fn a_removed_device_reads_all_ones_and_its_borrower_is_told_at_device_lendings_notice() {
    // Surprise removal: the lend ends at once (config reads all ones, the MSI-X table too: PCIe
    // §7.5.1.1, no function there), and the borrower hears of it at the hot-plug steps' time:
    // the lender's port notices the link down (hotplug_detect), its pciehp removes the device
    // (hotplug_remove), Device Lending's notice crosses (dl_notice): 24 ms + 100 us + 20 us.
    // A pulled cable: the relay of configuration accesses cannot reach the lender either, but
    // the lend stays (devlend_host::fault), so no notice.
    for (kind, target, told) in [("surprise-removal", "nvme0", Some(24_120_000_000)), ("link-down", "ntb-b", None)] {
        let (mut e, mut d) = borrowed();
        let table = devlend_fabric::config::MSIX_TABLE_OFFSET;
        assert_eq!(d.cfg_read(&mut e, 0, 4), 0x2700_8086);
        let Load::Now(entry) = d.mmio_read(&mut e, 0, table + 12, 4, 0).unwrap() else { panic!("the table is the server's") };
        assert_eq!(entry, 1u32.to_le_bytes(), "masked until the guest programs it");
        let at = 1_000_000;
        e.fault_at(at, kind, target).unwrap();
        assert!(!d.take_unplug(&e));
        e.advance(at).unwrap();
        assert_eq!(d.cfg_read(&mut e, 0, 4), 0xffff_ffff, "{kind}: vendor and device ID");
        assert_eq!(d.cfg_read(&mut e, 0x0a, 2), 0xffff, "{kind}: class");
        assert_eq!(d.cfg_read(&mut e, 0x10, 4), 0xffff_ffff, "{kind}: BAR 0 as the guest sized it");
        let Load::Now(entry) = d.mmio_read(&mut e, 0, table + 12, 4, at).unwrap() else { panic!("the table is the server's") };
        assert_eq!(entry, vec![0xff; 4], "{kind}: MSI-X table");
        assert_eq!(told_until(&mut e, &mut d, at + 100_000_000_000), told.map(|t| at + t), "{kind}");
        assert!(!d.take_unplug(&e), "told once");
    }
}

#[test]
fn a_revoked_lend_is_gone_at_once_and_its_borrower_is_told_at_device_lendings_notice() {
    let (mut e, mut d) = borrowed();
    assert!(e.fault_at(5, "revoke", "ntb-b").is_err(), "not the borrowed drive");
    assert!(e.fault_at(5, "revoke", "nvme9").is_err(), "no such device");
    let at = 1_000_000;
    e.fault_at(at, "revoke", "nvme0").unwrap();
    e.advance(at).unwrap();
    assert_eq!(d.cfg_read(&mut e, 0, 4), 0xffff_ffff, "the borrower's handle is gone with the lend");
    // Device Lending's notice to the borrower: timing.dl_notice_ps, 20 us.
    assert_eq!(told_until(&mut e, &mut d, at + 1_000_000_000), Some(at + 20_000_000));
    assert_eq!(e.struck().iter().map(|s| (s.kind, s.target.as_str(), s.failed)).collect::<Vec<_>>(), vec![("revoke", "nvme0", false)]);
}
