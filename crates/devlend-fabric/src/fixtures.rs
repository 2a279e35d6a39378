//! Small fabrics that tests across the workspace build from (one description, not a copy per test).

/// Two hosts `a` and `b`, each with one root port and a PXH830 NTB adapter (`na`, `nb`) cabled to
/// the other's (Gen3 x8); `iommu_a`/`iommu_b` turn each host's IOMMU on.
pub fn two_hosts_pxh830(cpu: &str, ram: u64, iommu_a: bool, iommu_b: bool) -> String {
    format!(
        r#"{{"name":"t","hosts":[
        {{"name":"a","cpu":"{cpu}","ram":{ram},"iommu":{iommu_a},"root_ports":1}},
        {{"name":"b","cpu":"{cpu}","ram":{ram},"iommu":{iommu_b},"root_ports":1}}],
      "ntbs":[{{"name":"na","profile":"pxh830"}},{{"name":"nb","profile":"pxh830"}}],
      "links":[{{"a":"a.rp0","b":"na","gen":3,"width":8}},{{"a":"b.rp0","b":"nb","gen":3,"width":8}},
               {{"a":"na.cable","b":"nb.cable","gen":3,"width":8,"kind":"cable"}}]}}"#
    )
}

/// Hosts `h0`..`h{n-1}` (Intel Xeon E5, 4 GiB, IOMMU off), each with one root port and a PXH830
/// adapter `n0`..`n{n-1}` whose cable goes to port `pI` of one MXS824 cluster switch `sw`
/// (Gen3 x8 everywhere).
pub fn hosts_on_mxs824(n: usize) -> String {
    let hosts: Vec<String> = (0..n).map(|i| format!(r#"{{"name":"h{i}","cpu":"intel-xeon-e5","ram":4294967296,"root_ports":1}}"#)).collect();
    let ntbs: Vec<String> = (0..n).map(|i| format!(r#"{{"name":"n{i}","profile":"pxh830"}}"#)).collect();
    let links: Vec<String> = (0..n)
        .flat_map(|i| {
            [format!(r#"{{"a":"h{i}.rp0","b":"n{i}","gen":3,"width":8}}"#), format!(r#"{{"a":"sw.p{i}","b":"n{i}.cable","gen":3,"width":8,"kind":"cable"}}"#)]
        })
        .collect();
    format!(
        r#"{{"name":"cluster","hosts":[{}],"ntbs":[{}],"cluster_switches":[{{"name":"sw","profile":"mxs824"}}],"links":[{}]}}"#,
        hosts.join(","),
        ntbs.join(","),
        links.join(",")
    )
}

/// On the PXH830 two-host testbed (crates/devlend-engine/tests/pxh830.json: `borrower`, `lender`,
/// `gpu0` in the lender, adapters `ntb-b`/`ntb-l`): gpu0's DMA reaches the borrower's RAM as Device
/// Lending sets it up. The borrower's window 1 is translated onto its RAM at 1 GiB (256 MiB), its
/// IOMMU maps that identity in a `dl` domain attached to its adapter, and gpu0's requester ID is in
/// the lender adapter's LUT. gpu0 is made a bus master.
pub fn lend_gpu0_dma(f: &mut crate::Fabric) {
    const MIB: u64 = 1 << 20;
    let gpu = f.func_id("gpu0").unwrap();
    f.set_bus_master(gpu, true);
    let (nb, nl) = (f.ntb_id("ntb-b").unwrap(), f.ntb_id("ntb-l").unwrap());
    f.mw_set_trans(nb, 1, 0x4000_0000, 256 * MIB).unwrap();
    let b = f.host_id("borrower").unwrap();
    let d = f.iommu_domain_alloc(b, "dl").unwrap();
    let nbf = f.ntbs[nb as usize].func;
    f.iommu_attach(b, d, nbf).unwrap();
    f.iommu_map(b, d, 0x4000_0000, 0x4000_0000, 256 * MIB, true).unwrap();
    let rid = f.funcs[gpu as usize].bdf;
    f.rid_lut_add(nl, rid).unwrap();
}
