//! Prints a session's off-CPU markers and footer counts (a debugging aid:
//! `cargo run -p profkit-eventlog --example offcpu_dump -- SESSION.pkl`).
use profkit_eventlog::{decode_events, ChunkEncoder, Event, SessionReader};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: offcpu_dump SESSION.pkl");
    let r = SessionReader::open(&path).expect("open");
    println!("header: {:?}", r.header().event);
    let (mut markers, mut intervals, mut ns) = (0u64, 0u64, 0u64);
    // Bytes of the markers as written, and as they would be with one
    // marker per wait (count 1, each wait its own length: the mean).
    let (mut bytes, mut one_each) = (0u64, 0u64);
    let size = |e: &Event| {
        let mut enc = ChunkEncoder::new();
        enc.event(e);
        enc.bytes().len() as u64
    };
    for c in r.chunks() {
        let p = r.payload(c);
        decode_events(p, |e| {
            if let Event::OffCpu {
                count, total_ns, ..
            } = &e
            {
                markers += 1;
                intervals += count;
                ns += total_ns;
                bytes += size(&e);
                // The same waits, one marker each (the mean length).
                let mut one = e.clone();
                if let Event::OffCpu {
                    count: c1,
                    total_ns: t1,
                    ..
                } = &mut one
                {
                    *t1 /= (*c1).max(1);
                    *c1 = 1;
                }
                one_each += size(&one) * count;
                if std::env::var_os("ALL").is_some() {
                    println!("round {} {e:?}", c.round);
                }
            }
        })
        .expect("decode");
    }
    println!(
        "off-CPU markers {markers}, intervals {intervals}, {:.1} ms",
        ns as f64 / 1e6
    );
    println!("marker bytes {bytes}; one marker per wait: {one_each} bytes");
    if let Some(f) = r.footer() {
        for a in &f.accounting {
            println!("{a:?}");
        }
    }
}
