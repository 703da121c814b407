//! The control protocol: one JSON request line, one JSON response line.
//!
//! ```text
//! client                                   daemon
//!   connect(DIR/control.sock) ──────────▶  accept, SO_PEERCRED: owner or root?
//!   {"request":"dump"}\n      ──────────▶  engine.dump()
//!                             ◀──────────  {"ok":{...status...}}\n   (or {"error":"..."}\n)
//!   close                                  close
//! ```
//!
//! Lines are compact JSON (no raw newline can occur inside). Unknown
//! fields are ignored in both directions, so fields can be added later.

use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest request line the daemon accepts (bytes, newline included).
pub const MAX_REQUEST_LINE: usize = 4096;
/// Longest response line a client accepts (bytes, newline included).
pub const MAX_RESPONSE_LINE: usize = 16 << 20;

/// What a client asks the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// Stop sampling, finish the session file, exit. Answer: the engine's
    /// stop summary.
    Stop,
    /// Flush everything sampled so far to disk. Answer: status after the
    /// flush.
    Dump,
    /// Report the daemon's and the engine's counters. Answer: `{"daemon":
    /// {...}, "engine": {...}}`.
    Status,
    /// Discard the samples so far. Answer: `null`.
    Reset,
    /// Close the current part of the session and go on in a new one
    /// (`profctl rotate`; SIGHUP does the same). Answer: what the engine
    /// says of the new part.
    Rotate,
}

impl Request {
    /// Every request, in a stable order.
    pub const ALL: [Request; 5] = [
        Request::Stop,
        Request::Dump,
        Request::Status,
        Request::Reset,
        Request::Rotate,
    ];

    /// The request's name on the wire and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Request::Stop => "stop",
            Request::Dump => "dump",
            Request::Status => "status",
            Request::Reset => "reset",
            Request::Rotate => "rotate",
        }
    }

    /// How long a client waits for the answer.
    ///
    /// `stop` drains every ring, reconciles and writes the footer, which
    /// can take seconds on a big machine; `dump` waits for the disk.
    pub fn timeout(self) -> Duration {
        Duration::from_secs(match self {
            Request::Stop => 120,
            Request::Dump => 60,
            Request::Status => 10,
            Request::Reset => 30,
            Request::Rotate => 60,
        })
    }

    /// The request as one line (newline included).
    pub fn to_line(self) -> String {
        let mut s = serde_json::to_string(&self).expect("a unit enum always serializes");
        s.push('\n');
        s
    }
}

impl FromStr for Request {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Request::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                format!("unknown request {s:?} (expected stop, dump, status, reset or rotate)")
            })
    }
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// Done; the value depends on the request (see [`Request`]).
    Ok(serde_json::Value),
    /// Refused or failed, with a message for the user.
    Error(String),
}

impl Response {
    /// The value, or [`Error::Request`] with the daemon's message.
    pub fn into_result(self, request: Request) -> Result<serde_json::Value> {
        match self {
            Response::Ok(v) => Ok(v),
            Response::Error(message) => Err(Error::Request {
                request: request.name(),
                message,
            }),
        }
    }

    /// The response as one line (newline included).
    pub fn to_line(&self) -> String {
        // Serializing a `Value` cannot fail (its map keys are strings).
        let mut s = serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"error\":\"cannot encode response: {e}\"}}"));
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_format_is_stable() {
        assert_eq!(Request::Stop.to_line(), "{\"request\":\"stop\"}\n");
        assert_eq!(Request::Reset.to_line(), "{\"request\":\"reset\"}\n");
        assert_eq!(
            Response::Ok(json!({"a": 1})).to_line(),
            "{\"ok\":{\"a\":1}}\n"
        );
        assert_eq!(
            Response::Error("no".into()).to_line(),
            "{\"error\":\"no\"}\n"
        );
    }

    #[test]
    fn requests_round_trip_and_ignore_unknown_fields() {
        for r in Request::ALL {
            let back: Request = serde_json::from_str(r.to_line().trim_end()).unwrap();
            assert_eq!(back, r);
            assert_eq!(r.name().parse::<Request>().unwrap(), r);
        }
        let r: Request = serde_json::from_str(r#"{"request":"dump","since":3}"#).unwrap();
        assert_eq!(r, Request::Dump);
        assert!("bogus".parse::<Request>().is_err());
    }

    #[test]
    fn stop_waits_longest() {
        assert!(Request::ALL
            .iter()
            .all(|r| r.timeout() <= Request::Stop.timeout()));
        assert!(Request::Stop.timeout() >= Duration::from_secs(60));
    }

    #[test]
    fn error_response_becomes_request_error() {
        let e = Response::Error("uid 65534 may not".into())
            .into_result(Request::Reset)
            .unwrap_err();
        assert!(e.to_string().contains("`reset`") && e.to_string().contains("65534"));
    }
}
