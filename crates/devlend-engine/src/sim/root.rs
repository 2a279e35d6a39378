//! A root complex that re-splits reads (000 §7.1): a read request passing through a root whose
//! CPU profile re-splits reads (`read_split_bytes`) becomes requests of that size, issued with
//! the root's own tag pool (shared by every route through it), whose completions come back to
//! the root and are forwarded to the original requester on the rest of its completion path. Off
//! the path of a read that ends at its root complex (RAM): `Sim::arrive` calls in here only at a
//! stage flagged `resplit`, and for completions of a root's own sub-requests.

use super::{InFlight, Ps, Request, Sim};
use devlend_wire::TlpKind;
use std::collections::VecDeque;

/// A sub-request waiting for a root-complex tag: (re-split point (path, stage), parent request,
/// bytes, offset).
pub(super) type RootWait = ((u32, u32), u32, u32, u64);

impl Sim {
    /// Tell the engine where a re-splitting root's own completions go: completions of the
    /// sub-requests it issues at stage `req_stage` of `req_path` follow `root_cpl` (which ends at the
    /// root), then continue as completions of the original request from `resume_stage` of its path.
    pub fn set_root_completion(&mut self, req_path: u32, req_stage: u32, root_cpl: u32, resume_stage: u32) {
        self.sub_cpl.insert((req_path, req_stage), (root_cpl, resume_stage));
        self.sub_key.insert(root_cpl, (req_path, req_stage));
    }

    pub(super) fn resplit(&mut self, id: u32, tlp: InFlight, split: u32, delay: Ps) {
        self.stats.resplit_requests += 1;
        let key = (tlp.path, tlp.stage());
        let root = self.root_of(key);
        let tags = self.paths[tlp.path as usize].limits.root_tags;
        let mut off = 0;
        while off < tlp.len() {
            let n = split.min(tlp.len() - off);
            self.root_tags.entry(root).or_insert_with(|| (tags, VecDeque::new())).1.push_back((key, tlp.req, n, tlp.offset + off as u64));
            off += n;
        }
        // The original request is consumed at the root; its buffer slot frees.
        let port = self.paths[tlp.path as usize].stages[tlp.stage() as usize].port;
        self.return_credit(port, tlp.class(), self.now + self.t.updatefc_ps);
        self.free_tlps.push(id);
        self.root_issue(root, self.now + delay);
    }

    /// The root complex (host) of a re-split point.
    fn root_of(&self, key: (u32, u32)) -> u16 {
        self.paths[key.0 as usize].stages[key.1 as usize].root.expect("a re-split stage is at a root complex")
    }

    /// Issue waiting sub-requests while the root has tags (one pool per root complex, assumed:
    /// the root's outbound read tracking is shared by every route through it).
    fn root_issue(&mut self, root: u16, at: Ps) {
        loop {
            let entry = self.root_tags.get_mut(&root).unwrap();
            if entry.0 == 0 {
                return;
            }
            let Some((key, parent, n, off)) = entry.1.pop_front() else { return };
            entry.0 -= 1;
            let (cpl, _) = self.sub_cpl[&key];
            let flow = self.reqs[parent as usize].flow;
            let sub = self.alloc_req(Request { flow, remaining: n, parent, cpl_path: cpl, cpl_stage: 0 });
            let id = self.alloc_tlp(InFlight::new(TlpKind::MemRead, n, key.0, key.1 + 1, u32::MAX, sub, off, true));
            self.enqueue(id, at);
        }
    }

    /// A sub-request's completion reached the re-splitting root: free the root's tag, forward the
    /// data to the original requester on the remainder of the original completion path.
    pub(super) fn root_completion(&mut self, id: u32, tlp: InFlight, delay: Ps) {
        let key = self.sub_key[&tlp.path];
        let (_, resume) = self.sub_cpl[&key];
        let parent = self.reqs[tlp.req as usize].parent;
        let p = self.reqs[parent as usize];
        let r = &mut self.reqs[tlp.req as usize];
        r.remaining -= tlp.len();
        let sub_done = r.remaining == 0;
        // Forwarded as a completion of the parent from the stage after the root. It still occupies
        // the root's ingress buffer (the same link as the last stage of the root's path), which it
        // frees when it leaves, as any TLP does.
        let fwd = InFlight::new(TlpKind::Completion, tlp.len(), p.cpl_path, resume, p.flow, parent, tlp.offset, false);
        self.tlps[id as usize] = fwd;
        self.enqueue(id, self.now + delay);
        if sub_done {
            self.free_reqs.push(tlp.req);
            let root = self.root_of(key);
            self.root_tags.get_mut(&root).unwrap().0 += 1;
            self.root_issue(root, self.now + delay);
        }
    }
}
