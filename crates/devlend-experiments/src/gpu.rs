//! 000 §7.1-7.2's GPU figures as their procedures, natively: each function builds a [`Cluster`]
//! from topology JSON (without a `setup` section), binds the GPUs for the runner (its own, or
//! borrowed) and runs the workload on one machine (`devlend_drivers::gpu_run`), checks the bytes
//! arrived and reports the time the runner's thread spent.
//!
//! - D1 ([`memcpy`]): bandwidthTest, one cudaMemcpy host<->device (000 §7.1, Fig 10). CUDA's
//!   pipelining of bandwidthTest's 10 back-to-back copies (000 footnote 3) is not modelled: one
//!   copy, driver handshake included, as the GPU-to-GPU program of §7.2 measures.
//! - D2 ([`gpu_to_gpu`]): one GPU-to-GPU transfer, peer-to-peer (the source's copy engine writes
//!   the target's BAR 1) or bounced through a buffer in the runner's RAM (000 §7.2, Fig 12). The
//!   bounce is staged in chunks of `gpu_staging.chunk_bytes` through two buffers: the source's
//!   copy engine writes chunk k+1 while the target's reads chunk k (two streams, two engines).
//! - D3 ([`pingpong`]): the ping-pong kernel (`gpu_kernel`) on both GPUs, counters in each
//!   other's memory or in one buffer in the runner's RAM; the round trip is ping's mean over
//!   `PING_ROUNDS` rounds after `WARMUP_ROUNDS`, from the store that starts them to its last
//!   answer. 000 reports the mean of 100,000 ping-pongs, in which the first stores' cold
//!   IOTLB walks (one per direction where an IOMMU translates) weigh nothing; timed from the
//!   first store, 8 rounds would carry them (+80 ns a round for 1L-P2P-IOMMU).

use devlend_drivers::error::{DResult, DeviceError};
use devlend_drivers::gpu_run::{bind, fits, kernel_round_trip, launch, on_machine, pattern, shared, staged, staging_chunk, timing, CopyTiming, Dir, Via};
use devlend_host::Cluster;

/// D1: one cudaMemcpy of `len` bytes between `device`'s memory and a buffer in `runner`'s RAM.
pub fn memcpy(json: &str, runner: &str, device: &str, dir: Dir, len: u64) -> DResult<CopyTiming> {
    let mut c = Cluster::from_json(json).map_err(DeviceError::host("topology", device))?;
    let g = bind(&mut c, runner, device)?;
    fits(len, &g)?;
    let want = pattern(7, len);
    let host = c.fabric.host_id(runner).map_err(DeviceError::fabric(runner))?;
    let buf = c.os(runner).map_err(DeviceError::host("host", device))?.kmalloc(len).map_err(DeviceError::host("kmalloc", device))?;
    let gpu = shared(g.gpu);
    match dir {
        Dir::DtoH => gpu.borrow().mem_write(&mut c.fabric, 0, &want)?,
        Dir::HtoD => c.os(runner).map_err(DeviceError::host("host", device))?.write(buf, &want).map_err(DeviceError::host("write buffer", device))?,
    }
    let mut drv = g.drv;
    let (m, ps) = on_machine(c, std::slice::from_ref(&gpu), host, move |os| match dir {
        Dir::DtoH => drv.memcpy_dtoh(os, 0, buf, len),
        Dir::HtoD => drv.memcpy_htod(os, 0, buf, len),
    })?;
    let got = match dir {
        Dir::DtoH => {
            m.world().os(runner).map_err(DeviceError::host("host", device))?.read(buf, len as usize).map_err(DeviceError::host("read buffer", device))?
        }
        Dir::HtoD => gpu.borrow().mem_read(&m.world().fabric, 0, len as usize)?,
    };
    if got != want {
        return Err(DeviceError::Mismatch { what: format!("{dir:?} copy of {len} bytes") });
    }
    Ok(timing(len, ps))
}

/// D2: one transfer of `len` bytes from `src`'s memory to `dst`'s, both driven by `runner`.
pub fn gpu_to_gpu(json: &str, runner: &str, src: &str, dst: &str, via: Via, len: u64) -> DResult<CopyTiming> {
    let mut c = Cluster::from_json(json).map_err(DeviceError::host("topology", src))?;
    let a = bind(&mut c, runner, src)?;
    let b = bind(&mut c, runner, dst)?;
    fits(len, &a)?;
    fits(len, &b)?;
    let chunk = staging_chunk()?.min(len);
    let host = c.fabric.host_id(runner).map_err(DeviceError::fabric(runner))?;
    let want = pattern(3, len);
    let (ga, gb) = (shared(a.gpu), shared(b.gpu));
    ga.borrow().mem_write(&mut c.fabric, 0, &want)?;
    let stage = match via {
        Via::Peer => 0,
        Via::Ram => c.os(runner).map_err(DeviceError::host("host", src))?.kmalloc(2 * chunk).map_err(DeviceError::host("kmalloc", src))?,
    };
    let (mut da, mut db, bdev) = (a.drv, b.drv, b.dev);
    let (m, ps) = on_machine(c, &[ga, gb.clone()], host, move |os| match via {
        Via::Peer => da.memcpy_peer(os, 0, bdev, 0, len),
        Via::Ram => staged(os, &mut da, &mut db, stage, chunk, len),
    })
    .map_err(|e| match e {
        DeviceError::Machine { error, .. } => DeviceError::Machine { what: format!("{src} to {dst} ({via:?})"), error },
        e => e,
    })?;
    if gb.borrow().mem_read(&m.world().fabric, 0, len as usize)? != want {
        return Err(DeviceError::Mismatch { what: format!("{src} to {dst} ({via:?})") });
    }
    Ok(timing(len, ps))
}

/// D3: one ping-pong round trip between `a` and `b` (counters in each other's memory, or in a
/// buffer in `runner`'s RAM), in ps: ping's mean over `PING_ROUNDS` rounds after
/// `WARMUP_ROUNDS`, every counter checked by the kernel that waits for it.
pub fn pingpong(json: &str, runner: &str, a: &str, b: &str, via: Via) -> DResult<u64> {
    let mut c = Cluster::from_json(json).map_err(DeviceError::host("topology", a))?;
    let mut ga = bind(&mut c, runner, a)?;
    let mut gb = bind(&mut c, runner, b)?;
    let host = c.fabric.host_id(runner).map_err(DeviceError::fabric(runner))?;
    let mut os = c.os(runner).map_err(DeviceError::host("host", a))?;
    let (at_a, at_b) = match via {
        Via::Peer => (ga.drv.map_peer(&mut os, gb.dev, 0, 4)?, gb.drv.map_peer(&mut os, ga.dev, 0, 4)?),
        Via::Ram => {
            let buf = os.kmalloc(4).map_err(DeviceError::host("kmalloc", a))?;
            (ga.drv.map_host(&mut os, buf, 4)?, gb.drv.map_host(&mut os, buf, 4)?)
        }
    };
    let (bar_a, bar_b) =
        (os.pci_iomap(ga.dev, 0).map_err(DeviceError::host("pci_iomap", a))?, os.pci_iomap(gb.dev, 0).map_err(DeviceError::host("pci_iomap", b))?);
    let ram = via == Via::Ram;
    let (pa, pb) = (shared(ga.gpu), shared(gb.gpu));
    let (poll_a, poll_b) = if ram { (at_a.dma, at_b.dma) } else { (0, 0) };
    let (_m, _) = on_machine(c, &[pa.clone(), pb.clone()], host, move |os| {
        launch(os, bar_b, at_b.dma, poll_b, false)?;
        launch(os, bar_a, at_a.dma, poll_a, true)
    })?;
    kernel_round_trip((a, &pa), (b, &pb))
}
