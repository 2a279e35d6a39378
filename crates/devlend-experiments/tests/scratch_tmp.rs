use devlend_experiments::rdma as bench;
const J: &str = include_str!("../../devlend-rdma/tests/pex8749-rdma.json");
#[test]
fn show() {
    for (dma, th) in [(false, 1), (true, 1), (true, 4)] {
        let t = std::time::Instant::now();
        let r = bench::ntb_perf(J, 64 << 10, 16 << 20, dma, th, Some(4), None).unwrap();
        println!("dma {dma} th {th} MBps {:.1} wall {:?}", r.mbytes_per_s(), t.elapsed());
    }
}
