//! The fio workload's errors: typed, with the job and the driver's error (an NVMe status) they concern.

use devlend_drivers::error::DeviceError;
use devlend_drivers::nvme_driver::NvmeError;
use devlend_engine::machine::MachineError;
use std::fmt;

#[derive(Debug)]
pub enum FioError {
    /// The job description cannot be run (zero depth, a size smaller than the jobs...).
    Invalid { reason: &'static str },
    /// Job thread `job`'s region (`offset` plus `size` bytes) runs past the drive's end: it holds `capacity` bytes.
    PastDrive { job: u16, offset: u64, size: u64, capacity: u64 },
    /// An `rw` fio does not have.
    UnknownRw { given: String },
    /// Job `job` found no I/O queue of its own: the driver made fewer queues than there are jobs.
    NoQueue { job: u16 },
    /// The testbed cannot be set up (topology, borrowing the drive, its media profile).
    Setup(DeviceError),
    /// More job threads than the drive's driver gives queues (`max`), or none.
    Jobs { max: u16 },
    /// A job's iodepth is more than one of the drive's queues holds in flight (`max`).
    Depth { max: u32 },
    /// The driver could not probe the drive.
    Probe(DeviceError),
    /// A job's command failed (an NVMe status such as 0x80 LBA Out of Range) or its kernel call did.
    Job { job: u16, error: DeviceError },
    /// The machine could not run the workload (a thread stuck or failed).
    Machine(MachineError),
}

impl FioError {
    /// The NVMe error underneath, if any.
    pub fn nvme(&self) -> Option<&NvmeError> {
        match self {
            FioError::Probe(DeviceError::Nvme(e)) | FioError::Job { error: DeviceError::Nvme(e), .. } => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for FioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FioError::Invalid { reason } => write!(f, "fio: {reason}"),
            FioError::PastDrive { job, offset, size, capacity } => write!(
                f,
                "fio: job {job}: offset {offset} plus size {size} bytes runs past the end of the drive, which holds {capacity} bytes \
                 (its capacity: the profile's, or devices.NAME.capacity)"
            ),
            FioError::UnknownRw { given } => write!(f, "fio: rw must be read, write, randread, randwrite, rw, readwrite or randrw, not {given}"),
            FioError::NoQueue { job } => write!(f, "fio: job {job}: the driver has too few I/O queues"),
            FioError::Jobs { max } => write!(f, "fio: the drive gives 1 to {max} jobs an I/O queue pair each"),
            FioError::Depth { max } => write!(f, "fio: iodepth must be below the drive's {} queue entries", *max as u64 + 1),
            FioError::Setup(m) => write!(f, "fio: cannot set up the testbed: {m}"),
            FioError::Probe(e) => write!(f, "fio: probe failed: {e}"),
            FioError::Job { job, error } => write!(f, "fio: job {job}: {error}"),
            FioError::Machine(m) => write!(f, "fio: {m}"),
        }
    }
}

impl std::error::Error for FioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FioError::Setup(e) => Some(e),
            FioError::Probe(e) | FioError::Job { error: e, .. } => Some(e),
            FioError::Machine(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FioError;
    use crate::fio_job::{check, Job, Rw};

    #[test]
    fn a_bad_job_description_is_named_by_its_field() {
        assert!(matches!(Rw::parse("seqread"), Err(FioError::UnknownRw { given }) if given == "seqread"));
        let job = Job { rw: Rw::RandRead, iodepth: 0, numjobs: 1, ios: 1, verify: false, size_blocks: None };
        assert!(matches!(check(&job), Err(FioError::Invalid { reason }) if reason.starts_with("iodepth")));
        let job = Job { iodepth: 1, numjobs: 4, size_blocks: Some(1), ..job };
        assert!(matches!(check(&job), Err(FioError::Invalid { reason }) if reason.starts_with("size")));
    }
}
