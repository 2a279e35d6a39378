//! Poisoned completions reach the application at once (issue 30, item 4): an fio job whose write
//! data sits in a page of RAM with an uncorrectable error gets the drive's Data Transfer Error
//! as an I/O error when it happens, not after the 30 s I/O timeout.

use devlend_host::Cluster;
use devlend_workloads::*;

const B2B: &str = include_str!("../../../devlend-drivers/tests/b2b.json");

fn scenario() -> Scenario {
    let mut s = Scenario::new(Cluster::from_json(B2B).unwrap());
    let spec = FioSpec { rw: Rw::RandWrite, bs: 4096, iodepth: 1, numjobs: 1, ios: 200 };
    s.add_fio("fio", "borrower", "nvme0", spec, 0).unwrap();
    s
}

/// The job with page `page` of the borrower's RAM poisoned at `at`: how it ended.
fn with_poisoned(page: u64, at: u64) -> (WorkloadResult, u64) {
    let mut s = scenario();
    s.add_fault(at, "poisoned", &format!("borrower.ram+{page:#x}")).unwrap();
    s.keep_going(true);
    let r = s.run().unwrap();
    let timeout = s.cluster().fabric.tuning().timing.nvme_io_timeout_ps;
    (r.workloads[0].clone(), timeout)
}

#[test]
fn fio_writing_from_a_poisoned_page_fails_with_the_drives_data_transfer_error_at_once() {
    // The job's buffer is one of the pages the borrower's kernel hands out when the job starts
    // (after the driver's queues): each of the first 16 on a twin of the scenario (low RAM, where
    // an address is its offset into RAM) is poisoned in a run of its own; the buffer's is the run
    // that ends with the drive's status.
    let twin = scenario();
    let pages: Vec<u64> = (0..16).map(|_| twin.cluster().os("borrower").unwrap().kmalloc(4096).unwrap()).collect();
    let at = 20_000_000;
    let runs: Vec<(WorkloadResult, u64)> = pages.iter().map(|&p| with_poisoned(p, at)).collect();
    let (w, timeout) = runs
        .iter()
        .find(|(w, _)| w.outcome.error().is_some_and(|e| e.to_string().contains("failed with status 0x4")))
        .expect("a run whose write data came back poisoned ends with the drive's Data Transfer Error (SC 04h)");
    assert_eq!(w.outcome.name(), "failed", "{:?}", w.outcome);
    let noticed = w.outcome.noticed().unwrap();
    assert!(noticed > at && noticed - at < timeout / 1000, "fio had the error {} ps after the fault, not at its I/O timeout", noticed - at);
}
