//! The parts of fleet reports that need no server.

use super::*;

#[test]
fn diff_sides_parse() {
    let s = DiffSide::parse("host:web-* time:0,3600 build:ABC123").unwrap();
    assert_eq!(s.hosts.as_deref(), Some("web-*"));
    assert!(s.time.is_some());
    assert_eq!(s.build_ids, ["abc123"]);
    assert_eq!(
        DiffSide::parse("db-1").unwrap().hosts.as_deref(),
        Some("db-1")
    );
    for bad in ["", "colour:red", "build:xyz", "time:soon", "host:"] {
        let e = DiffSide::parse(bad).unwrap_err().to_string();
        assert!(e.contains("host:GLOB, time:WINDOW"), "{bad}: {e}");
    }
}

#[test]
fn a_diff_side_replaces_only_what_it_names() {
    let fleet = FleetOptions {
        hosts: Some("web-*".into()),
        build_ids: vec!["ab".into()],
        ..FleetOptions::default()
    };
    let (f, o) = DiffSide::parse("time:10,20")
        .unwrap()
        .apply(&fleet, &ReportOptions::default());
    assert_eq!(f.hosts.as_deref(), Some("web-*"));
    assert_eq!(f.build_ids, ["ab"]);
    assert!(o.time.is_some());
}
