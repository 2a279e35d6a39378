//! The NVMe driver's typed errors name the values they concern.

use devlend_devices::nvme::{MAX_QUEUES, MAX_QUEUE_ENTRIES};
use devlend_devices::nvme_driver::{Driver, NvmeError};
use devlend_host::Cluster;

const JSON: &str = include_str!("../../devlend-vm/tests/expansion-chassis-vm.json");

#[test]
fn a_queue_shape_the_controller_cannot_take_names_it_and_the_limits() {
    for (queues, depth) in [(0, 32), (MAX_QUEUES as u16, 32), (1, 1), (1, MAX_QUEUE_ENTRIES + 1)] {
        let mut c = Cluster::from_json(JSON).unwrap();
        let mut os = c.os("lender").unwrap();
        let dev = os.find("nvme0").unwrap();
        let e = Driver::probe_queues(&mut os, dev, queues, depth).err().unwrap();
        let shape = match e {
            NvmeError::QueueShape { queues, depth, max_queues, max_entries } => (queues, depth, max_queues, max_entries),
            e => panic!("{e}"),
        };
        assert_eq!(shape, (queues, depth, MAX_QUEUES - 1, MAX_QUEUE_ENTRIES));
    }
}
