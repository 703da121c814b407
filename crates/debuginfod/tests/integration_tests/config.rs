//! `Config::from_vars`.

use profkit_debuginfod::{Config, Error, DEFAULT_TIMEOUT};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

fn from(vars: &[(&str, &str)]) -> Result<Config, Error> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_vars(|name| map.get(name).cloned())
}

#[test]
fn defaults() {
    let c = from(&[("HOME", "/home/u")]).unwrap();
    assert!(c.urls.is_empty());
    assert!(!c.network());
    assert_eq!(c.timeout, DEFAULT_TIMEOUT);
    assert_eq!(c.timeout, Duration::from_secs(90));
    assert_eq!((c.max_size, c.max_time), (None, None));
    assert_eq!(c.cache, PathBuf::from("/home/u/.cache/debuginfod_client"));
    assert!(!c.verbose && !c.offline);
}

#[test]
fn each_variable() {
    let c = from(&[
        ("HOME", "/home/u"),
        ("XDG_CACHE_HOME", "/xdg"),
        (
            "DEBUGINFOD_URLS",
            "  https://a.example/ http://b.example:8002//\thttp://c \n",
        ),
        ("DEBUGINFOD_TIMEOUT", "10"),
        ("DEBUGINFOD_MAXSIZE", "1000"),
        ("DEBUGINFOD_MAXTIME", " 30 "),
        ("DEBUGINFOD_VERBOSE", "1"),
    ])
    .unwrap();
    assert_eq!(
        c.urls,
        ["https://a.example", "http://b.example:8002", "http://c"]
    );
    assert!(c.network());
    assert_eq!(c.timeout, Duration::from_secs(10));
    assert_eq!(c.max_size, Some(1000));
    assert_eq!(c.max_time, Some(Duration::from_secs(30)));
    assert_eq!(c.cache, PathBuf::from("/xdg/debuginfod_client"));
    assert!(c.verbose);
    let c = from(&[("XDG_CACHE_HOME", "/xdg"), ("DEBUGINFOD_CACHE_PATH", "/c")]).unwrap();
    assert_eq!(c.cache, PathBuf::from("/c"));
    // Empty counts as unset.
    let c = from(&[
        ("HOME", "/h"),
        ("DEBUGINFOD_VERBOSE", ""),
        ("DEBUGINFOD_MAXSIZE", ""),
        ("XDG_CACHE_HOME", ""),
    ])
    .unwrap();
    assert!(!c.verbose);
    assert_eq!(c.max_size, None);
    assert_eq!(c.cache, PathBuf::from("/h/.cache/debuginfod_client"));
    let mut off = c.clone();
    off.urls = vec!["http://x".into()];
    off.offline = true;
    assert!(!off.network());
}

#[test]
fn bad_values() {
    for (name, value) in [
        ("DEBUGINFOD_TIMEOUT", "ten"),
        ("DEBUGINFOD_TIMEOUT", "0"),
        ("DEBUGINFOD_TIMEOUT", "-5"),
        ("DEBUGINFOD_MAXSIZE", "1G"),
        ("DEBUGINFOD_MAXTIME", "1.5"),
    ] {
        match from(&[("HOME", "/h"), (name, value)]) {
            Err(e @ Error::BadVariable { .. }) => {
                let Error::BadVariable {
                    name: n, value: v, ..
                } = &e
                else {
                    unreachable!()
                };
                assert_eq!((n.as_str(), v.as_str()), (name, value));
                assert!(e.to_string().contains(name), "{e}");
            }
            other => panic!("{name}={value}: {other:?}"),
        }
    }
    assert!(matches!(from(&[]), Err(Error::BadVariable { .. })));
}
