//! The packed TLP record (`InFlight`): its kind and flow-control class come back from its bits.

use super::InFlight;
use devlend_wire::TlpKind;

#[test]
fn an_in_flight_tlps_class_is_its_kinds_flow_control_type() {
    for kind in [TlpKind::MemWrite, TlpKind::MemRead, TlpKind::Completion, TlpKind::Message] {
        let t = InFlight::new(kind, 64, 0, 0, 0, 0, 0, false);
        assert_eq!((t.kind(), t.class(), t.len()), (kind, kind.fc_class(), 64));
    }
}
