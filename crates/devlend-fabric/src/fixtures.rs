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
