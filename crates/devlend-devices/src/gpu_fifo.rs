//! How a copy engine takes its next copy from host memory: the GPFIFO entry the doorbell's put
//! pointer names, then the methods it points at, two dependent DMA reads (see [`crate::gpu`]).
//! Each read leaves the engine `dma_issue_ps` after it decided on it, and its data is used
//! `dma_completion_ps` after it arrived; a fault ends the copy as a fault of the engine's DMA.

use crate::gpu::*;
use crate::gpu_actor::Token;
use devlend_engine::machine::{Cx, FlowDone, World};

fn le(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n].iter().rev().fold(0, |a, x| a << 8 | *x as u64)
}

impl Gpu {
    /// Fetch the GPFIFO entry before put pointer `put` of engine `ce`'s ring.
    pub(crate) fn fetch_entry<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, put: u32) {
        let ring = self.reg(cx.fabric(), ce_reg(ce, CE_GPFIFO_ADDR), 8);
        let entries = self.reg(cx.fabric(), ce_reg(ce, CE_GPFIFO_ENTRIES), 4).max(1);
        let at = ring + (put.wrapping_sub(1) as u64 % entries) * GP_ENTRY_BYTES;
        self.fetching[ce] = true;
        let issue = self.engine_ps(cx).0;
        if let Err(why) = cx.dma_read_after(issue, at, GP_ENTRY_BYTES, Token::Entry(ce).encode()) {
            self.fetch_failed(cx, ce, (at, why));
        }
    }

    /// The entry arrived: fetch the methods it points at.
    pub(crate) fn entry_fetched<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, done: FlowDone) {
        if let Some(fault) = done.fault {
            return self.fetch_failed(cx, ce, fault);
        }
        let (at, len) = (le(&done.data, 0, 8), le(&done.data, 8, 4));
        if len != METHODS_BYTES {
            self.fetching[ce] = false;
            return self.end(cx, ce, STATUS_INVALID);
        }
        let (issue, completion) = self.engine_ps(cx);
        if let Err(why) = cx.dma_read_after(completion + issue, at, len, Token::Methods(ce).encode()) {
            self.fetch_failed(cx, ce, (at, why));
        }
    }

    /// The methods arrived: execute them into the engine's registers and start the copy.
    pub(crate) fn methods_fetched<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, done: FlowDone) {
        self.fetching[ce] = false;
        if let Some(fault) = done.fault {
            let s = self.set_flow_fault(cx.fabric(), ce, fault);
            return self.end(cx, ce, s);
        }
        let m = &done.data;
        let f = cx.fabric();
        for (reg, from, n) in [(CE_SRC, 0, 8), (CE_DST, 8, 8), (CE_LEN, 16, 8), (CE_DIR, 24, 4), (CE_SEM_VALUE, 28, 4)] {
            self.reg_write(f, ce_reg(ce, reg), &m[from..from + n]);
        }
        let completion = self.engine_ps(cx).1;
        self.start(cx, ce, completion);
    }

    fn fetch_failed<W: World>(&mut self, cx: &mut Cx<W>, ce: usize, fault: (u64, devlend_fabric::route::Failure)) {
        self.fetching[ce] = false;
        let s = self.set_flow_fault(cx.fabric(), ce, fault);
        self.end(cx, ce, s);
    }
}
