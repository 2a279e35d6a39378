//! The controller's work between a doorbell and a completion: fetch, admin commands, PRPs, the
//! media, data DMA, completion entries and MSI-X messages.

use super::*;

impl Controller {
    pub(super) fn cmd(&mut self, slot: usize) -> &mut Cmd {
        self.cmds[slot].as_mut().expect("a live command")
    }

    fn tok(&self, slot: usize, page: usize, stage: Stage) -> u64 {
        token(self.generation, slot, page, stage)
    }

    fn trace_start(&mut self, what: &'static str, now: Ps) {
        if let Some(t) = self.trace.as_mut() {
            t.push(Step { what, start: now, end: None });
        }
    }

    pub(super) fn trace_end(&mut self, stage: Stage, end: Ps) {
        let what = stage_name(stage);
        if let Some(s) = self.trace.as_mut().and_then(|t| t.iter_mut().rev().find(|s| s.what == what && s.end.is_none())) {
            s.end = Some(end);
        }
    }

    /// Start a DMA for a command; one refused at once counts as a fault.
    pub(super) fn dma<W: World>(&mut self, cx: &mut Cx<W>, (slot, page): (usize, usize), stage: Stage, addr: u64, write: Option<Vec<u8>>, len: u64) -> bool {
        let t = self.tok(slot, page, stage);
        self.trace_start(stage_name(stage), cx.now());
        let issue = devlend_fabric::tuning::of_func(cx.fabric(), self.func).dma_issue_ps;
        let addr = if stage == Stage::Msi { addr } else { addr.wrapping_add(self.dma_offset) };
        let r = match write {
            Some(data) => cx.dma_write_after(issue, addr, data, t),
            None => cx.dma_read_after(issue, addr, len, t),
        };
        if r.is_err() {
            self.trace_end(stage, cx.now());
        }
        r.is_ok()
    }

    pub(super) fn enable_or_reset<W: World>(&mut self, cx: &mut Cx<W>) {
        let func = self.func;
        let f = cx.fabric();
        let cc = reg_read(f, func, CC, 4);
        if cc & 1 == 0 {
            if self.ready {
                self.reset(f);
            }
            return;
        }
        if !self.ready {
            let aqa = reg_read(f, func, AQA, 4);
            let (asq, acq) = (reg_read(f, func, ASQ, 8), reg_read(f, func, ACQ, 8));
            self.sqs[0] = Some(Queue { base: asq, entries: (aqa & 0xfff) as u32 + 1, cq: 0, ..Default::default() });
            self.cqs[0] = Some(Queue { base: acq, entries: ((aqa >> 16) & 0xfff) as u32 + 1, phase: true, vector: Some(0), ..Default::default() });
            self.ready = true;
            reg_write(f, func, CSTS, &1u32.to_le_bytes());
        }
        // CC.SHN (bits 15:14) asks for a shutdown (§7.6.2); nothing is cached, so CSTS.SHST
        // (bits 3:2) reads "shutdown processing complete" (10b) at once.
        if cc >> 14 & 3 != 0 {
            let csts = reg_read(f, func, CSTS, 4) as u32 & !0xc | 0x8;
            reg_write(f, func, CSTS, &csts.to_le_bytes());
        }
    }

    /// Controller reset on CC.EN 1 -> 0 (NVMe 1.3 §7.6.2): all queues and commands are dropped
    /// and the doorbells read as zero again, so a driver can enable the controller afresh.
    fn reset(&mut self, f: &mut Fabric) {
        self.ready = false;
        self.generation = self.generation.wrapping_add(1) & 0xffff;
        self.sqs.iter_mut().for_each(|q| *q = None);
        self.cqs.iter_mut().for_each(|q| *q = None);
        self.cmds.clear();
        self.free.clear();
        self.media_wait.clear();
        self.in_media = 0;
        self.cq_waiting.iter_mut().for_each(VecDeque::clear);
        self.aers.clear();
        (self.error_event, self.error_event_masked) = (None, false);
        reg_write(f, self.func, DOORBELL, &[0u8; 8 * MAX_QUEUES]);
        reg_write(f, self.func, CSTS, &0u32.to_le_bytes());
    }

    /// A submission queue tail doorbell: fetch every new entry, one DMA read each.
    pub(super) fn sq_doorbell<W: World>(&mut self, cx: &mut Cx<W>, qid: usize) {
        if !self.ready {
            return;
        }
        let Some(mut sq) = self.sq_tail(cx, qid) else { return };
        while sq.head != sq.tail {
            let addr = sq.base + sq.head as u64 * 64;
            sq.head = (sq.head + 1) % sq.entries;
            let slot = self.alloc(Cmd {
                sqid: qid as u16,
                cid: 0,
                sqe: [0; 64],
                pages: Vec::new(),
                pos: 0,
                pending: 0,
                unsent: Vec::new(),
                posted: false,
                status: SC_SUCCESS,
                result: 0,
            });
            self.sqs[qid] = Some(sq);
            if !self.dma(cx, (slot, 0), Stage::Fetch, addr, None, 64) {
                self.fetch_failed(cx, slot);
            }
        }
        self.sqs[qid] = Some(sq);
    }

    fn alloc(&mut self, c: Cmd) -> usize {
        match self.free.pop() {
            Some(s) => {
                self.cmds[s] = Some(c);
                s
            }
            None => {
                self.cmds.push(Some(c));
                self.cmds.len() - 1
            }
        }
    }

    pub(super) fn fetched<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, done: FlowDone) {
        if done.fault.is_some() {
            return self.fetch_failed(cx, slot);
        }
        self.commands += 1;
        let c = self.cmd(slot);
        c.sqe.copy_from_slice(&done.data[..64]);
        c.cid = le(&done.data, 2, 2) as u16;
        if c.sqid == 0 {
            self.admin(cx, slot)
        } else {
            self.io(cx, slot)
        }
    }

    /// A command that never arrived intact (its fetch refused, or its completion poisoned): its
    /// identifier is in the lost bytes, so no completion can name it. NVMe Base 1.4 §3.1.6
    /// (CSTS.CFS): "set to '1' when a fatal controller error occurred that could not be
    /// communicated in the appropriate Completion Queue". Nothing is executed; the host's
    /// timeout reads CSTS.
    fn fetch_failed<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        let csts = u32::from(self.ready) | 2;
        reg_write(cx.fabric(), self.func, CSTS, &csts.to_le_bytes());
        self.cmds[slot] = None;
        self.free.push(slot);
    }

    fn admin<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        let sqe = self.cmd(slot).sqe;
        let (opcode, prp1) = (sqe[0], le(&sqe, 24, 8));
        let (cdw10, cdw11) = (le(&sqe, 40, 4), le(&sqe, 44, 4));
        let qid = (cdw10 & 0xffff) as usize;
        let entries = (cdw10 >> 16) as u32 + 1;
        let status = match opcode {
            0x06 => {
                // The 4 KiB structure goes to PRP1 up to the end of its page, the rest to PRP2
                // (§4.3): a buffer that is not page-aligned spans two pages.
                let data = self.identify(cdw10 & 0xff, le(&sqe, 4, 4) as u32);
                let first = (4096 - prp1 % 4096) as usize;
                let mut parts = vec![(prp1, data)];
                if first < 4096 {
                    let rest = parts[0].1.split_off(first);
                    parts.push((le(&sqe, 32, 8), rest));
                }
                self.cmd(slot).pending = parts.len();
                self.cmd(slot).status = SC_SUCCESS;
                for (i, (addr, bytes)) in parts.into_iter().enumerate() {
                    let len = bytes.len() as u64;
                    if !self.dma(cx, (slot, i), Stage::Identify, addr, Some(bytes), len) {
                        self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
                        self.cmd(slot).pending -= 1;
                    }
                }
                if self.cmd(slot).pending > 0 {
                    return;
                }
                SC_DATA_TRANSFER_ERROR
            }
            // Set Features, Number of Queues (§5.21.1.7): the I/O queues allocated, 0's based.
            0x09 if cdw10 & 0xff == 0x07 => {
                let most = MAX_QUEUES as u64 - 2;
                let (sqs, cqs) = ((cdw11 & 0xffff).min(most), (cdw11 >> 16).min(most));
                self.cmd(slot).result = (sqs | cqs << 16) as u32;
                SC_SUCCESS
            }
            // Other features are accepted and read back as 0 (none is modelled).
            0x09 | 0x0a => SC_SUCCESS,
            // Asynchronous Event Request (§5.2): completes only when an event occurs (queues.rs).
            0x0c => return self.async_event_request(cx, slot),
            // Delete I/O Submission / Completion Queue (§5.6, §5.5).
            0x00 | 0x04 if (1..MAX_QUEUES).contains(&qid) => {
                if opcode == 0x00 {
                    self.sqs[qid] = None
                } else {
                    self.cqs[qid] = None;
                    self.cq_waiting[qid].clear();
                }
                SC_SUCCESS
            }
            0x05 if (1..MAX_QUEUES).contains(&qid) && entries <= MAX_QUEUE_ENTRIES => {
                let vector = (cdw11 & 2 != 0).then_some((cdw11 >> 16) as u16);
                self.cqs[qid] = Some(Queue { base: prp1, entries, phase: true, vector, ..Default::default() });
                SC_SUCCESS
            }
            0x01 if (1..MAX_QUEUES).contains(&qid) && entries <= MAX_QUEUE_ENTRIES => {
                let cq = (cdw11 >> 16) as u16;
                if self.cqs.get(cq as usize).copied().flatten().is_none() {
                    SC_INVALID_FIELD
                } else {
                    self.sqs[qid] = Some(Queue { base: prp1, entries, cq, ..Default::default() });
                    SC_SUCCESS
                }
            }
            0x05 | 0x01 => SC_INVALID_FIELD,
            _ => SC_INVALID_OPCODE,
        };
        self.cmd(slot).status = status;
        self.complete(cx, slot);
    }

    fn io<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        let sqe = self.cmd(slot).sqe;
        let (opcode, prp1, prp2) = (sqe[0], le(&sqe, 24, 8), le(&sqe, 32, 8));
        let (slba, nlb) = (le(&sqe, 40, 8), le(&sqe, 48, 2) + 1);
        let status = if !matches!(opcode, OP_READ | OP_WRITE) {
            SC_INVALID_OPCODE
        } else if slba.checked_add(nlb).is_none_or(|e| e > self.blocks) {
            SC_LBA_OUT_OF_RANGE
        } else {
            SC_SUCCESS
        };
        if status != SC_SUCCESS {
            self.cmd(slot).status = status;
            return self.complete(cx, slot);
        }
        // The data pages (§4.3): PRP1 (any offset), then PRP2 as the second page or as a pointer to a PRP list.
        let len = nlb * BLOCK;
        let first = (4096 - prp1 % 4096).min(len);
        let rest = len - first;
        let c = self.cmd(slot);
        c.pos = slba * BLOCK;
        c.pages = vec![(prp1, first)];
        if rest > 4096 {
            let n = rest.div_ceil(4096);
            if !self.dma(cx, (slot, 0), Stage::PrpList, prp2, None, n * 8) {
                self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
                self.complete(cx, slot);
            }
            return;
        }
        if rest > 0 {
            c.pages.push((prp2, rest));
        }
        self.start_data(cx, slot);
    }

    pub(super) fn prp_list<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, done: FlowDone) {
        if done.fault.is_some() {
            self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
            return self.complete(cx, slot);
        }
        let c = self.cmd(slot);
        let len = (le(&c.sqe, 48, 2) + 1) * BLOCK;
        let rest = len - c.pages[0].1;
        for i in 0..rest.div_ceil(4096) as usize {
            c.pages.push((le(&done.data, i * 8, 8), (rest - i as u64 * 4096).min(4096)));
        }
        self.start_data(cx, slot);
    }

    /// A read goes to the media first; a write first fetches its data from the host.
    fn start_data<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        if self.cmd(slot).sqe[0] == OP_READ {
            return self.enter_media(cx, slot);
        }
        let pages = self.cmd(slot).pages.clone();
        self.cmd(slot).pending = pages.len();
        for (i, (addr, len)) in pages.into_iter().enumerate() {
            if !self.dma(cx, (slot, i), Stage::Data, addr, None, len) {
                self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
                self.cmd(slot).pending -= 1;
            }
        }
        if self.cmd(slot).pending == 0 {
            self.complete(cx, slot);
        }
    }

    /// Up to `media_parallelism` commands in the media at once; the others wait their turn.
    fn enter_media<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        if self.in_media >= self.timing.media_parallelism.max(1) {
            self.media_wait.push_back(slot);
            return;
        }
        self.in_media += 1;
        let latency = if self.cmd(slot).sqe[0] == OP_READ { self.timing.media_read_latency_ps } else { self.timing.media_write_latency_ps };
        self.trace_start(stage_name(Stage::MediaDone), cx.now());
        let t = self.tok(slot, 0, Stage::MediaDone);
        cx.set_timer(latency, t);
    }

    /// The media latency has passed: free the slot, stream the data through the shared pipe.
    pub(super) fn media_done<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        self.trace_end(Stage::MediaDone, cx.now());
        self.in_media -= 1;
        if let Some(next) = self.media_wait.pop_front() {
            self.enter_media(cx, next);
        }
        let now = cx.now();
        let pages: Vec<u64> = self.cmd(slot).pages.iter().map(|p| p.1).collect();
        let read = self.cmd(slot).sqe[0] == OP_READ;
        self.cmd(slot).pending = pages.len();
        if read {
            self.cmd(slot).unsent = vec![true; pages.len()];
        }
        for (i, len) in pages.iter().enumerate() {
            self.pipe_free = self.pipe_free.max(now) + self.timing.stream_ps(*len);
            if read {
                let t = self.tok(slot, i, Stage::PageStreamed);
                cx.set_timer(self.pipe_free - now, t);
            }
        }
        if !read {
            let t = self.tok(slot, 0, Stage::WriteStreamed);
            cx.set_timer(self.pipe_free - now, t);
        }
    }

    /// A read's page has streamed out of the media: DMA it to the host.
    pub(super) fn page_streamed<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, page: usize) {
        let c = self.cmd(slot);
        let (addr, len) = c.pages[page];
        let pos = c.pos + c.pages[..page].iter().map(|p| p.1).sum::<u64>();
        let mut buf = vec![0u8; len as usize];
        self.media.read(pos, &mut buf);
        if !self.dma(cx, (slot, page), Stage::Data, addr, Some(buf), len) {
            self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
            self.page_sent(cx, slot, page);
            self.data_flow_ended(cx, slot);
        }
    }

    /// A read's data page has left the controller (or never will): once all have, post the
    /// completion, which PCIe ordering keeps behind the data.
    pub(super) fn page_sent<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, page: usize) {
        let c = self.cmd(slot);
        if c.sqe[0] != OP_READ || c.unsent.is_empty() {
            return;
        }
        if let Some(u) = c.unsent.get_mut(page) {
            *u = false;
        }
        if !c.posted && c.unsent.iter().all(|u| !u) {
            self.post(cx, slot);
        }
    }

    pub(super) fn data_done<W: World>(&mut self, cx: &mut Cx<W>, slot: usize, done: FlowDone) {
        let (_, _, page, _) = untoken(done.token);
        if done.fault.is_some() {
            self.cmd(slot).status = SC_DATA_TRANSFER_ERROR;
            // A flow stopped before it had sent everything is never reported sent.
            self.page_sent(cx, slot, page);
        } else if self.cmd(slot).sqe[0] == OP_WRITE {
            let c = self.cmd(slot);
            let pos = c.pos + c.pages[..page].iter().map(|p| p.1).sum::<u64>();
            self.media.write(pos, &done.data);
        }
        self.data_flow_ended(cx, slot);
    }

    fn data_flow_ended<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        let c = self.cmd(slot);
        c.pending -= 1;
        if c.pending > 0 {
            return;
        }
        if c.sqe[0] == OP_WRITE && c.status == SC_SUCCESS {
            self.enter_media(cx, slot);
        } else {
            self.complete(cx, slot);
        }
    }

    /// Post the completion (if not yet) and free the command's slot.
    pub(super) fn complete<W: World>(&mut self, cx: &mut Cx<W>, slot: usize) {
        if !self.cmd(slot).posted {
            self.post(cx, slot);
        }
        self.cmds[slot] = None;
        self.free.push(slot);
    }

    /// MSI-X (PCIe 3.0 §6.1.4): write the vector's message data to its message address, unless masked.
    pub(super) fn interrupt<W: World>(&mut self, cx: &mut Cx<W>, vector: u16) {
        let func = self.func;
        let f = cx.fabric();
        let entry = MSIX_TABLE_OFFSET + vector as u64 * 16;
        let addr = reg_read(f, func, entry, 8);
        let data = reg_read(f, func, entry + 8, 4) as u32;
        let masked = reg_read(f, func, entry + 12, 4) & 1 != 0;
        // MSI-X Enable (bit 15) and Function Mask (bit 14) of the Message Control register.
        let control = f.config_read(func, devlend_fabric::config::MSIX_CAP + 2, 2).unwrap_or(0);
        let enabled = control & (1 << 15) != 0 && control & (1 << 14) == 0;
        if addr != 0 && !masked && enabled {
            self.dma(cx, (0, 0), Stage::Msi, addr, Some(data.to_le_bytes().to_vec()), 4);
        }
    }
}

/// The step names a traced command's breakdown shows.
fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Fetch => "fetch submission queue entry",
        Stage::PrpList => "fetch PRP list",
        Stage::Identify => "identify data",
        Stage::Data => "data",
        Stage::MediaDone => "media latency",
        Stage::PageStreamed | Stage::WriteStreamed => "media stream",
        Stage::Cqe => "post completion queue entry",
        Stage::Msi => "MSI-X interrupt",
    }
}
