//! The same NVMe driver on a local drive and on a borrowed one (000 §7.4): data is right both
//! ways, the borrower pays for the NTB crossings, bad commands get NVMe status codes.

use devlend_devices::bench::read_blocks;
use devlend_devices::nvme::Controller;
use devlend_devices::nvme_driver::Driver;
use devlend_host::Cluster;

const B2B: &str = include_str!("b2b.json");

#[test]
fn local_and_borrowed_reads_return_the_drives_data() {
    for runner in ["lender", "borrower"] {
        let t = read_blocks(B2B, runner, "nvme0", &[7, 4096, 123_457], 8).unwrap();
        assert!(t.total_ps > 10_000_000, "media latency is included");
        assert!(t.steps.iter().any(|s| s.0 == "fetch submission queue entry"));
        assert!(t.steps.iter().any(|s| s.0 == "post completion queue entry"));
    }
}

#[test]
fn borrowing_adds_the_ntb_crossings_of_doorbell_fetch_and_completion() {
    let local = read_blocks(B2B, "lender", "nvme0", &[100], 8).unwrap();
    let remote = read_blocks(B2B, "borrower", "nvme0", &[100], 8).unwrap();
    let extra = remote.total_ps as i64 - local.total_ps as i64;
    // Doorbell (one way), command fetch (there and back) and data plus completion (one way) cross
    // the NTB: four crossings of about 360 ns, less what the local root complex path costs.
    assert!((700_000..2_000_000).contains(&extra), "borrower adds {extra} ps");
}

#[test]
fn large_reads_use_a_prp_list_and_sequential_bandwidth_is_alike() {
    let local = read_blocks(B2B, "lender", "nvme0", &[0], 1024).unwrap();
    let remote = read_blocks(B2B, "borrower", "nvme0", &[0], 1024).unwrap();
    assert!(local.steps.iter().any(|s| s.0 == "fetch PRP list"));
    let bw = |t: u64| 1024.0 * 512.0 / (t as f64 * 1e-12);
    let (l, r) = (bw(local.total_ps), bw(remote.total_ps));
    assert!((r - l).abs() / l < 0.02, "local {l:.3e} B/s, borrower {r:.3e} B/s");
}

#[test]
fn commands_out_of_range_fail_with_an_nvme_status() {
    let mut c = Cluster::from_json(B2B).unwrap();
    let func = c.fabric.func_id("nvme0").unwrap();
    let mut ctrl = Controller::new(&mut c.fabric, func, 1000);
    let mut os = c.os("lender").unwrap();
    let dev = os.find("nvme0").unwrap();
    let mut drv = Driver::probe(&mut os, dev, &mut ctrl).unwrap();
    assert_eq!(drv.blocks, 1000);
    let buf = os.kmalloc(8 * 512).unwrap();
    let e = drv.read(&mut os, &mut ctrl, 999, 8, buf).unwrap_err();
    assert!(e.0.contains("status 0x80"), "{e}");
    assert!(drv.read(&mut os, &mut ctrl, 0, 0, buf).is_err());
    // Writes then reads round-trip through the media.
    os.write(buf, &[0xab; 4096]).unwrap();
    drv.write(&mut os, &mut ctrl, 10, 8, buf).unwrap();
    os.write(buf, &[0; 4096]).unwrap();
    drv.read(&mut os, &mut ctrl, 10, 8, buf).unwrap();
    assert_eq!(os.read(buf, 4096).unwrap(), vec![0xab; 4096]);
}

#[test]
#[ignore = "prints the timing breakdown; --ignored --nocapture"]
fn print_breakdown() {
    for runner in ["lender", "borrower"] {
        let t = read_blocks(B2B, runner, "nvme0", &[100], 8).unwrap();
        println!("{runner}: total {} ns, fabric {} ns", t.total_ps / 1000, t.fabric_ps / 1000);
        for s in &t.steps {
            println!("   {:<32} {:>8} ns", s.0, s.1 / 1000);
        }
    }
}
