//! Address expressions are evaluated in the requester's host (issue 15 audit: `lender:cpu`
//! writing `borrower.ram+0x1000` silently wrote the lender's own RAM at 0x1000).

use devlend_fabric::route::Requester;
use devlend_fabric::spec::{Addr, SetupOp};
use devlend_fabric::Fabric;

fn two_hosts() -> Fabric {
    devlend_fabric::build_json(&two_hosts_json()).unwrap()
}

fn two_hosts_json() -> String {
    devlend_fabric::fixtures::two_hosts_pxh830("amd-epyc", 1 << 30, false, false)
}

fn expr(s: &str) -> Addr {
    Addr::Expr(s.into())
}

#[test]
fn another_hosts_ram_window_or_bar_is_an_error_naming_both_hosts() {
    let f = two_hosts();
    let (a, b) = (f.host_id("a").unwrap(), f.host_id("b").unwrap());
    assert_eq!(f.resolve_for(Requester::Cpu(a), &expr("a.ram+0x1000")).unwrap(), f.resolve_expr("a.ram+0x1000").unwrap());
    for e in ["b.ram+0x1000", "b.msi", "nb.mw1"] {
        let err = f.resolve_for(Requester::Cpu(a), &expr(e)).unwrap_err().to_string();
        assert!(err.contains("is in host b, but the requester is in host a") && err.contains("NTB window"), "{e}: {err}");
    }
    assert!(f.resolve_for(Requester::Cpu(b), &expr("nb.mw1+0x10")).is_ok());
    assert_eq!(f.resolve_for(Requester::Cpu(a), &Addr::Num(0x1000)).unwrap(), 0x1000, "numbers are the requester's own");
    let na = f.ntb_id("na").unwrap();
    let rid = f.requester("na").unwrap();
    assert!(f.resolve_for(rid, &expr("b.ram")).is_err(), "a function's host is its requester host");
    assert!(f.resolve_for(Requester::Cpu(f.ntb(na).host), &expr("na.mw0")).is_ok());
}

#[test]
fn setup_ops_resolve_in_the_host_of_their_ntb_or_iommu() {
    let mut f = two_hosts();
    let op = SetupOp::NtbMwSetTrans { ntb: "na".into(), window: 1, addr: expr("b.ram+0x100000"), size: 1 << 20 };
    assert!(f.apply_op(&op).unwrap_err().to_string().contains("is in host b, but the requester is in host a"));
    let ok = SetupOp::NtbMwSetTrans { ntb: "na".into(), window: 1, addr: expr("a.ram+0x100000"), size: 1 << 20 };
    f.apply_op(&ok).unwrap();
    let map = SetupOp::IommuMap { host: "a".into(), domain: "d".into(), iova: Addr::Num(1 << 32), addr: expr("b.ram"), size: 4096, write: true };
    let mut g = devlend_fabric::build_json(&devlend_fabric::fixtures::two_hosts_pxh830("amd-epyc", 1 << 30, true, false)).unwrap();
    g.apply_op(&SetupOp::IommuDomain { host: "a".into(), domain: "d".into() }).unwrap();
    assert!(g.apply_op(&map).unwrap_err().to_string().contains("is in host b"));
}
