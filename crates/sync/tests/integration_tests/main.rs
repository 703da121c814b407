//! Integration tests of the sync stage: SimRing scenarios through the whole
//! path (rings → stage → event buffer → writer → session file → reader), and
//! a live-kernel dlopen test.

mod callgraph;
mod debug_frame;
mod live;
mod rotation;
mod scenarios;

use profkit_eventlog::{CpuAccounting, Event, ExpandedSample, SessionHeader, SessionReader};
use profkit_perf::{Layout, SimRing};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SimRings, SyncOptions, SyncStage};
use std::path::Path;

pub fn sim_stage(layout: Layout) -> SyncStage {
    SyncStage::new(SyncOptions::new(layout))
}

pub fn sim_recorder(dir: &Path, rings: Vec<SimRing>, buffer_bytes: usize) -> Recorder<SimRings> {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let header = SessionHeader {
        cpus: rings.iter().map(profkit_perf::RecordRing::cpu).collect(),
        ..Default::default()
    };
    let sink = FileSink::create(dir.join("session.pkl"), header).unwrap();
    Recorder::new(
        SimRings(rings),
        sim_stage(layout),
        Box::new(sink),
        RecorderOptions { buffer_bytes },
    )
    .unwrap()
}

/// Everything in a session: samples in order, markers with the chunk
/// index they were in, and the footer's accounting.
pub struct Decoded {
    pub samples: Vec<ExpandedSample>,
    pub markers: Vec<(usize, Event)>,
    pub accounting: Vec<CpuAccounting>,
}

pub fn decode(path: &Path) -> Decoded {
    let r = SessionReader::open(path).unwrap();
    assert!(r.bad_chunks().is_empty(), "{:?}", r.bad_chunks());
    let mut samples = Vec::new();
    let mut markers = Vec::new();
    for (i, c) in r.chunks().iter().enumerate() {
        r.for_each_sample(c, |s| samples.push(*s), |m| markers.push((i, m)))
            .unwrap();
    }
    let accounting = r
        .footer()
        .expect("footer written at stop")
        .accounting
        .clone();
    Decoded {
        samples,
        markers,
        accounting,
    }
}
