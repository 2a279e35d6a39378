//! An NVMe controller (NVM Express 1.3) as a device on the one clock (`devlend_engine::machine`).
//!
//! Registers in BAR 0 (§3.1): CAP, VS, CC (EN), CSTS (RDY), AQA, ASQ, ACQ, and the doorbells from
//! 0x1000 (stride 4: SQ y tail at 0x1000 + 8y, CQ y head at 0x1000 + 8y + 4). The controller acts
//! when a CPU store lands in BAR 0: CC.EN 0 -> 1 takes the admin queue from AQA/ASQ/ACQ and sets
//! CSTS.RDY, 1 -> 0 resets (§7.6.2); a submission queue tail doorbell starts one DMA read per new
//! submission queue entry. Each command then goes its own way, concurrently with the others:
//! Identify and Create I/O CQ/SQ execute at once; Read and Write fetch their PRP list if they
//! have one (§4.3), pass through the media ([`Media`]), and move their data as DMA flows (writes
//! for a read, reads for a write) that contend on the real links. The completion queue entry
//! (phase tag, §4.6) and then the MSI-X message (table in BAR 0 at `config::MSIX_TABLE_OFFSET`)
//! are DMA writes, posted in that order; a read posts them once its data writes have left the
//! controller, not once they have landed (a posted write's landing is not seen by its sender,
//! and PCIe ordering keeps the completion behind the data). A DMA fault completes the command with Data Transfer
//! Error. The CQ head doorbells tell the controller which entries the host has consumed: it never
//! posts into a full completion queue, and refuses doorbell writes it cannot take (`queues.rs`). Every DMA is this function's own requester, so IOMMU, NTB and requester-ID rules apply.
//!
//! The controller's DMA engine takes `dma_issue_ps` to put each request on the link and
//! `dma_completion_ps` to act on read data once it has all arrived (a fetched command, a PRP
//! list, a write's data): the device's effective parameters (`devlend_fabric::tuning`).
//!
//! The media model: up to `media_parallelism` commands are in the media at once, each for the
//! read (or write) latency; data then streams through one shared pipe at `media_bandwidth`, a
//! 4 KiB page at a time, and a read's page is DMA'd to the host as soon as it has streamed, so the
//! media and the link overlap and the slower of the two bounds a large transfer.

use crate::error::{MResult, ModelError, ParamsProblem};
use devlend_engine::machine::{Cx, Device, FlowDone, World};
use devlend_engine::queue::Ps;
use devlend_fabric::config::MSIX_TABLE_OFFSET;
use devlend_fabric::memory::SparseMem;
use devlend_fabric::model::FuncId;
use devlend_fabric::Fabric;
use devlend_wire::Tlp;
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};

pub const CAP: u64 = 0x00;
pub const CC: u64 = 0x14;
pub const CSTS: u64 = 0x1c;
pub const AQA: u64 = 0x24;
pub const ASQ: u64 = 0x28;
pub const ACQ: u64 = 0x30;
pub const DOORBELL: u64 = 0x1000;
pub const BLOCK: u64 = 512;
pub const MAX_QUEUE_ENTRIES: u32 = 1024;
/// Queues the controller has (admin queue 0 and I/O queues 1..=16).
pub const MAX_QUEUES: usize = 17;

/// Status codes (§4.6.1.2.1): success, invalid opcode, invalid field, LBA out of range, data transfer error.
pub const SC_SUCCESS: u16 = 0x0;
pub const SC_INVALID_OPCODE: u16 = 0x1;
pub const SC_INVALID_FIELD: u16 = 0x2;
pub const SC_DATA_TRANSFER_ERROR: u16 = 0x4;
pub const SC_LBA_OUT_OF_RANGE: u16 = 0x80;

/// NVM command set opcodes (§6): Write, Read.
pub const OP_WRITE: u8 = 0x01;
pub const OP_READ: u8 = 0x02;

/// A drive's capacity where its profile gives none: 2^24 blocks of 512 B (8 GiB), assumed (the
/// size the fio model ran on before profiles gave capacities).
pub const DEFAULT_CAPACITY: u64 = 8 << 30;

fn default_capacity() -> u64 {
    DEFAULT_CAPACITY
}

/// The drive's media timing and capacity, params `device.<profile>`.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Media {
    pub media_read_latency_ps: u64,
    pub media_write_latency_ps: u64,
    pub media_bandwidth: u64,
    pub media_parallelism: u32,
    /// Bytes the drive holds (its namespace's size).
    #[serde(default = "default_capacity")]
    pub capacity: u64,
}

impl Media {
    /// The media timing of device profile `profile` (params/hardware.toml, or a profile registered
    /// while the program runs: `devlend_fabric::params::register_profiles`).
    pub fn of(profile: &str) -> MResult<Media> {
        let bad = |problem| ModelError::Params { field: format!("[device.{profile}]"), problem };
        let p = devlend_fabric::params::params().device.get(profile).ok_or_else(|| bad(ParamsProblem::NoProfile { profile: profile.into() }))?;
        let v = toml::Value::Table(p.constants.clone().into_iter().collect());
        v.try_into().map_err(|error| bad(ParamsProblem::NoMediaTiming { profile: profile.into(), error: Box::new(error) }))
    }

    /// The media of the drive named `device` in the fabric: its profile's, with what the
    /// topology's `params` sets for it (`devices.NAME.media_*`, `capacity`).
    /// A drive described by its functions (an import of a drive whose IDs devlend does not know)
    /// has the media of its kind's `default_profile` (`[device_kind.nvme]` of
    /// params/hardware.toml, which the lspci import's warning names too).
    pub fn of_device(f: &Fabric, device: &str) -> MResult<Media> {
        let d = f.devices().iter().position(|d| d.name == device);
        let profile = match d.map(|d| &f.devices()[d]) {
            Some(info) if info.profile.is_none() => {
                devlend_fabric::params::params().device_kind.get(info.kind.as_str()).and_then(|k| k.default_profile.clone())
            }
            other => other.and_then(|i| i.profile.clone()),
        }
        .unwrap_or_default();
        let mut m = Media::of(&profile)?;
        if let Some(d) = d {
            for (key, &n) in f.tuning().own_settings(d as u32) {
                m.set(&profile, key, n)?;
            }
        }
        Ok(m)
    }

    /// One of the kind's own settings (`[device_kind.nvme]` of params/hardware.toml) as a
    /// topology's `params` gives it; the fabric has checked its value in the table's unit.
    fn set(&mut self, profile: &str, key: &str, n: u64) -> MResult<()> {
        match key {
            "media_read_latency_ps" => self.media_read_latency_ps = n,
            "media_write_latency_ps" => self.media_write_latency_ps = n,
            "media_bandwidth" => self.media_bandwidth = n,
            "media_parallelism" => self.media_parallelism = n as u32,
            "capacity" => self.capacity = n,
            _ => return Err(ModelError::Params { field: format!("[device.{profile}]"), problem: ParamsProblem::NoSuchSetting { key: key.into() } }),
        }
        Ok(())
    }

    /// The drive's size in 512-byte blocks.
    pub fn blocks(&self) -> u64 {
        self.capacity / BLOCK
    }

    fn stream_ps(&self, len: u64) -> Ps {
        (len as u128 * 1_000_000_000_000 / self.media_bandwidth.max(1) as u128) as Ps
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Queue {
    base: u64,
    entries: u32,
    head: u32,
    tail: u32,
    cq: u16,
    phase: bool,
    vector: Option<u16>,
}

/// One command between its fetch and its completion.
struct Cmd {
    sqid: u16,
    cid: u16,
    sqe: [u8; 64],
    /// Data pages (bus address, length) and where the transfer starts on the media.
    pages: Vec<(u64, u64)>,
    pos: u64,
    /// Data flows (or media pages) still to end.
    pending: usize,
    /// A read's data pages not yet sent out of the controller (see [`Controller::page_sent`]).
    unsent: Vec<bool>,
    /// The completion entry and interrupt are posted; the slot lives on until its data flows end.
    posted: bool,
    status: u16,
    /// Dword 0 of the completion entry (command specific: Set Features' Number of Queues).
    result: u32,
}

/// What a DMA or timer of a command was for (the low byte of its token).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    Fetch = 1,
    PrpList,
    Identify,
    Data,
    MediaDone,
    PageStreamed,
    WriteStreamed,
    Cqe,
    Msi,
}

const STAGES: [Stage; 9] =
    [Stage::Fetch, Stage::PrpList, Stage::Identify, Stage::Data, Stage::MediaDone, Stage::PageStreamed, Stage::WriteStreamed, Stage::Cqe, Stage::Msi];

/// A token: the controller's generation (a reset forgets everything older), the command's slot,
/// a page index, the stage.
fn token(generation: u32, slot: usize, page: usize, stage: Stage) -> u64 {
    (generation as u64) << 48 | (slot as u64 & 0xff_ffff) << 24 | (page as u64 & 0xffff) << 8 | stage as u64
}

/// A token's flag for read data the controller is taking in (`dma_completion_ps`).
const TAKING_IN: u64 = 0x80;

fn untoken(t: u64) -> (u32, usize, usize, Option<Stage>) {
    let stage = STAGES.iter().copied().find(|s| *s as u64 == t & 0x7f);
    ((t >> 48) as u32, (t >> 24 & 0xff_ffff) as usize, (t >> 8 & 0xffff) as usize, stage)
}

/// One timed step of a traced command: what, when it started, when it ended.
#[derive(Clone, Debug)]
pub struct Step {
    pub what: &'static str,
    pub start: Ps,
    pub end: Option<Ps>,
}

pub struct Controller {
    pub func: FuncId,
    pub blocks: u64,
    timing: Media,
    media: SparseMem,
    sqs: Vec<Option<Queue>>,
    cqs: Vec<Option<Queue>>,
    ready: bool,
    generation: u32,
    cmds: Vec<Option<Cmd>>,
    free: Vec<usize>,
    in_media: u32,
    media_wait: VecDeque<usize>,
    /// When the shared media pipe is next free.
    pipe_free: Ps,
    pub commands: u64,
    /// Steps of the commands while tracing (`Some`): for breakdowns of a single command.
    pub trace: Option<Vec<Step>>,
    /// Read data arrived and being taken in, by its DMA's token.
    taking_in: HashMap<u64, FlowDone>,
    /// Added to every address the host programmed (queues, PRPs) before the controller DMAs
    /// to it: 0 for devlend's own driver, which programs bus addresses; for a real guest kernel
    /// (devlend-uml), whose unmodified driver programs its physical addresses, the offset of the
    /// one DMA mapping of the guest's RAM (the borrower's IOMMU/NTB window). MSI-X addresses come
    /// from the table and are not offset.
    pub dma_offset: u64,
    /// Completion entries waiting for room in their (full) completion queue, by queue id.
    cq_waiting: Vec<VecDeque<queues::Entry>>,
    /// Outstanding Asynchronous Event Request commands (their slots).
    aers: VecDeque<usize>,
    /// An event of type Error not yet reported (dword 0), and whether that type is masked.
    error_event: Option<u32>,
    error_event_masked: bool,
    /// Doorbell writes the controller ignored.
    pub doorbell_errors: Vec<InvalidDoorbell>,
}

pub(crate) fn le(b: &[u8], off: usize, n: usize) -> u64 {
    b[off..off + n].iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

mod exec;
mod identify;
mod queues;
pub use queues::{DoorbellProblem, InvalidDoorbell, SC_AER_LIMIT_EXCEEDED};

impl Controller {
    /// A controller for function `func` with `blocks` blocks of media timed by `timing`; sets CAP and VS.
    pub fn new(f: &mut Fabric, func: FuncId, blocks: u64, timing: Media) -> Controller {
        let c = Controller {
            func,
            blocks,
            timing,
            media: SparseMem::default(),
            sqs: vec![None; MAX_QUEUES],
            cqs: vec![None; MAX_QUEUES],
            ready: false,
            generation: 0,
            cmds: Vec::new(),
            free: Vec::new(),
            in_media: 0,
            media_wait: VecDeque::new(),
            pipe_free: 0,
            commands: 0,
            trace: None,
            taking_in: HashMap::new(),
            dma_offset: 0,
            cq_waiting: vec![VecDeque::new(); MAX_QUEUES],
            aers: VecDeque::new(),
            error_event: None,
            error_event_masked: false,
            doorbell_errors: Vec::new(),
        };
        // CAP: MQES = entries - 1, CQR = 1, DSTRD = 0, TO = 10 x 500 ms, CSS = NVM.
        let cap: u64 = (MAX_QUEUE_ENTRIES as u64 - 1) | 1 << 16 | 10 << 24 | 1 << 37;
        f.set_power_on_value(func, 0, CAP, &cap.to_le_bytes());
        f.set_power_on_value(func, 0, 0x08, &0x0001_0300u32.to_le_bytes());
        c
    }

    /// Store blocks directly in the media (test set-up, like a pre-written disk).
    pub fn preload(&mut self, lba: u64, data: &[u8]) {
        self.media.write(lba * BLOCK, data);
    }

    /// Read blocks directly from the media (test check).
    pub fn media_read(&self, lba: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0; len];
        self.media.read(lba * BLOCK, &mut b);
        b
    }

    /// Commands fetched and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.cmds.iter().filter(|c| c.is_some()).count()
    }
}

fn reg_read(f: &Fabric, func: FuncId, off: u64, n: usize) -> u64 {
    let mut b = vec![0u8; n];
    if let Some(m) = f.bar_mem(func, 0) {
        m.read(off, &mut b);
    }
    le(&b, 0, n)
}

fn reg_write(f: &mut Fabric, func: FuncId, off: u64, data: &[u8]) {
    f.bar_store(func, 0, off, data);
}

impl<W: World> Device<W> for Controller {
    fn mmio_write(&mut self, cx: &mut Cx<W>, bar: u8, offset: u64, _tlp: &Tlp) {
        if bar != 0 {
            return;
        }
        if offset == CC {
            self.enable_or_reset(cx);
        } else if offset >= DOORBELL && offset < DOORBELL + 8 * MAX_QUEUES as u64 && offset.is_multiple_of(4) {
            let qid = ((offset - DOORBELL) / 8) as usize;
            if (offset - DOORBELL).is_multiple_of(8) {
                self.sq_doorbell(cx, qid);
            } else {
                self.cq_doorbell(cx, qid);
            }
        }
    }

    fn dma_done(&mut self, cx: &mut Cx<W>, done: FlowDone) {
        let (generation, slot, _, stage) = untoken(done.token);
        let Some(stage) = stage else { return };
        self.trace_end(stage, done.end);
        if generation != self.generation || matches!(stage, Stage::Cqe | Stage::Msi) {
            return;
        }
        if self.cmds.get(slot).is_none_or(|c| c.is_none()) {
            return;
        }
        let read = matches!(stage, Stage::Fetch | Stage::PrpList) || (stage == Stage::Data && self.cmd(slot).sqe[0] == OP_WRITE);
        let taking = devlend_fabric::tuning::of_func(cx.fabric(), self.func).dma_completion_ps;
        if read && done.fault.is_none() && taking > 0 {
            cx.set_timer(taking, done.token | TAKING_IN);
            self.taking_in.insert(done.token, done);
            return;
        }
        self.took_in(cx, slot, stage, done);
    }

    fn dma_sent(&mut self, cx: &mut Cx<W>, token: u64) {
        let (generation, slot, page, stage) = untoken(token);
        if generation == self.generation && stage == Some(Stage::Data) && self.cmds.get(slot).is_some_and(|c| c.is_some()) {
            self.page_sent(cx, slot, page);
        }
    }

    fn timer(&mut self, cx: &mut Cx<W>, token: u64) {
        let (generation, slot, page, stage) = untoken(token);
        let taken = if token & TAKING_IN != 0 { self.taking_in.remove(&(token & !TAKING_IN)) } else { None };
        if generation != self.generation || self.cmds.get(slot).is_none_or(|c| c.is_none()) {
            return;
        }
        match (stage, taken) {
            (Some(stage), Some(done)) => self.took_in(cx, slot, stage, done),
            (Some(Stage::MediaDone), None) => self.media_done(cx, slot),
            (Some(Stage::PageStreamed), None) => self.page_streamed(cx, slot, page),
            (Some(Stage::WriteStreamed), None) => self.complete(cx, slot),
            _ => {}
        }
    }
}

impl Controller {
    /// A DMA's end, once its read data (if any) has been taken in.
    fn took_in<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, stage: Stage, done: FlowDone) {
        match stage {
            Stage::Fetch => self.fetched(cx, slot, done),
            Stage::PrpList => self.prp_list(cx, slot, done),
            Stage::Identify => {
                let c = self.cmd(slot);
                if done.fault.is_some() {
                    c.status = SC_DATA_TRANSFER_ERROR;
                }
                c.pending -= 1;
                if c.pending == 0 {
                    self.complete(cx, slot);
                }
            }
            Stage::Data => self.data_done(cx, slot, done),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Media;

    /// Every setting of the kind's own (`[device_kind.nvme]`) reaches the drive's media, and a
    /// key the model does not read is a typed error.
    #[test]
    fn every_setting_of_the_kind_reaches_the_media() {
        let kind = &devlend_fabric::params::params().device_kind["nvme"];
        let default = kind.default_profile.as_deref().expect("a drive without a profile has the media of [device_kind.nvme] default_profile");
        for (i, s) in kind.settings.iter().enumerate() {
            let mut m = Media::of(default).unwrap();
            let before = format!("{m:?}");
            m.set(default, &s.key, 600 + i as u64).unwrap();
            assert_ne!(format!("{m:?}"), before, "{} is not read by the media", s.key);
            assert!(format!("{m:?}").contains(&format!("{}: {}", s.key, 600 + i)));
        }
        let e = Media::of(default).unwrap().set(default, "media_size", 1).unwrap_err();
        assert!(e.to_string().contains("media_size"), "{e}");
    }

    /// A drive profile registered while the program runs has its media read as a compiled-in
    /// one's: its own constants, its kind's default capacity where it gives none.
    #[test]
    fn a_registered_drive_profiles_media_is_read() {
        let text = r#"
[device.devices-test-drive]
kind = "nvme"
class_code = 0x010802
vendor = 0x144d
device = 0xa808
max_gen = 3
max_width = 4
bars = [ { index = 0, size = 0x4000, bits = 64, pref = false } ]
msix_vectors = 32
media_read_latency_ps = 80000000
media_write_latency_ps = 20000000
media_bandwidth = 3500000000
media_parallelism = 32
source = "devlend-devices nvme.rs tests"
"#;
        devlend_fabric::params::register_profiles(text).unwrap_or_else(|e| panic!("{e}"));
        let m = Media::of("devices-test-drive").unwrap();
        assert_eq!((m.media_read_latency_ps, m.media_parallelism, m.capacity), (80_000_000, 32, super::DEFAULT_CAPACITY));
        let e = devlend_fabric::params::register_profiles(&text.replace("devices-test-drive", "devices-test-drive2").replace("media_parallelism = 32\n", ""))
            .unwrap_err();
        assert_eq!((e.field.as_str(), e.line), ("device.devices-test-drive2", 2), "{e}");
    }
}
