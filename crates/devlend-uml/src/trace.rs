//! An opt-in trace of what the controller handles, for finding where two runs of the same guest
//! part: with `DEVLEND_UML_TRACE=DIR` set, each device socket's connection writes
//! `DIR/<socket file name>.trace`, one line per message taken or sent (time-travel messages with
//! their op, seq and time and the guest's time after it; vhost-user requests; kicks with the time
//! their accesses start; loads answered; in-band calls and their replies; each turn of the engine
//! with where it stopped; in a run of several guests, `guests.rs`, a guest's time-travel messages go
//! to its first device's trace, and the engine's turns, which serve every guest, are not written).
//! No wall-clock times and no file descriptors are written, so two runs
//! that did the same thing write the same file and `diff` shows the first message where they part.
//! Unset (the default), a trace is one `Option` that is `None`: nothing is formatted or written.

use crate::error::{UmlError, UmlResult};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The environment variable naming the folder traces go to.
pub const ENV: &str = "DEVLEND_UML_TRACE";

#[derive(Default)]
pub struct Trace {
    out: Option<BufWriter<File>>,
}

impl Trace {
    /// The trace of the connection on `socket`: a file in `$DEVLEND_UML_TRACE` when it is set.
    pub fn for_socket(socket: &str) -> UmlResult<Trace> {
        let Some(dir) = std::env::var_os(ENV) else { return Ok(Trace::default()) };
        let name = Path::new(socket).file_name().map_or_else(|| "device".into(), |n| n.to_string_lossy().into_owned());
        let file = File::create(Path::new(&dir).join(format!("{name}.trace"))).map_err(|error| UmlError::Io { what: "creating the trace file", error })?;
        Ok(Trace { out: Some(BufWriter::new(file)) })
    }

    /// Write the line `line` makes, only when tracing.
    pub fn line(&mut self, line: impl FnOnce() -> String) -> UmlResult<()> {
        let Some(out) = self.out.as_mut() else { return Ok(()) };
        writeln!(out, "{}", line()).map_err(|error| UmlError::Io { what: "writing the trace", error })
    }
}

/// A time-travel op's name (um_timetravel.h), for the trace.
pub fn op_name(op: u32) -> &'static str {
    use crate::timetravel as tt;
    match op {
        tt::ACK => "ACK",
        tt::START => "START",
        tt::REQUEST => "REQUEST",
        tt::WAIT => "WAIT",
        tt::GET => "GET",
        tt::UPDATE => "UPDATE",
        tt::RUN => "RUN",
        tt::FREE_UNTIL => "FREE_UNTIL",
        tt::GET_TOD => "GET_TOD",
        _ => "?",
    }
}
