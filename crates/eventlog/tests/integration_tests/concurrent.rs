//! A reader running while the writer appends.

use std::sync::atomic::{AtomicBool, Ordering};

use profkit_eventlog::*;

use crate::util::*;

#[test]
fn concurrent_reader_sees_a_prefix_of_complete_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let s = small_synth(150, 2000, 5);
    let ps = payloads(&s);
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    let done = AtomicBool::new(false);

    std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let mut reads = 0;
            let mut torn_seen = 0;
            loop {
                let finished = done.load(Ordering::Acquire);
                let r = SessionReader::open(&path).unwrap();
                let n = r.chunks().len();
                for (i, c) in r.chunks().iter().enumerate() {
                    assert_eq!((c.index, c.round), (i as u64, i as u64));
                    assert_eq!(r.payload(c), &ps[i][..], "chunk {i}");
                }
                match r.bad_chunks() {
                    [] => {}
                    [b] => {
                        assert!(b.is_torn_tail(), "{b}");
                        assert_eq!(b.index, n as u64);
                        torn_seen += 1;
                    }
                    bad => panic!("corruption seen while appending: {bad:?}"),
                }
                reads += 1;
                if finished {
                    assert!(r.is_complete());
                    assert_eq!(n, ps.len());
                    return (reads, torn_seen);
                }
            }
        });
        for (round, p) in ps.iter().enumerate() {
            w.append_chunk(round as u64, 0, p).unwrap();
            // Give the reader time to take snapshots between chunks too.
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        w.write_footer(&SessionFooter {
            rounds: ps.len() as u64,
            ..Default::default()
        })
        .unwrap();
        done.store(true, Ordering::Release);
        let (reads, torn) = reader.join().unwrap();
        eprintln!("{reads} snapshots read, {torn} with a torn tail");
        assert!(reads >= 1);
    });
}
