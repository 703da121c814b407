//! Prints a session's off-CPU markers and footer counts (a debugging aid:
//! `cargo run -p profkit-eventlog --example offcpu_dump -- SESSION.pkl`).
use profkit_eventlog::{decode_events, Event, SessionReader};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: offcpu_dump SESSION.pkl");
    let r = SessionReader::open(&path).expect("open");
    println!("header: {:?}", r.header().event);
    let (mut markers, mut intervals, mut ns) = (0u64, 0u64, 0u64);
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
    if let Some(f) = r.footer() {
        for a in &f.accounting {
            println!("{a:?}");
        }
    }
}
