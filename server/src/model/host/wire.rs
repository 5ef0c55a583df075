//! The shared host's protocol: length-prefixed serde_json frames over its Unix socket (a
//! 4-byte big-endian length, then that many bytes of JSON).
//!
//! A window says [`ToHost::Hello`] and gets [`FromHost::Ready`]; `ghostline doctor` says
//! [`ToHost::Status`] instead (it is not counted as a window). A job ([`ToHost::Complete`],
//! [`ToHost::Chat`]) is answered by a [`FromHost::Piece`] per generated token, each of which the
//! window answers with its stop rule's [`ToHost::Verdict`] (the rule is the window's code: the
//! host runs the same worker as in-process, and stops exactly where it would), then one
//! [`FromHost::Done`]. [`ToHost::Cancel`] (the next key) makes the job end as cancelled.

use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::model::{GenerateError, ModelInfo, Timings, Token};

/// Bumped whenever a frame changes: part of the host's key, so a window never talks to a host
/// of another protocol.
pub const PROTOCOL: u32 = 4;

/// The largest frame read (a prompt of a million tokens is far beyond any context).
const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ToHost {
    Hello,
    Status,
    /// `unfinished`: the window's [`crate::model::Prompt::unfinished`] on the empty text;
    /// `lead`: its [`crate::model::Prompt::lead`]; `blank_enders`: its
    /// [`crate::model::Prompt::blank_enders`] (the host's worker applies both itself).
    Complete { id: u64, tokens: Vec<Token>, stop_key: u64, max_tokens: usize, unfinished: bool, lead: String, blank_enders: String },
    Chat { id: u64, messages: Vec<(String, String)>, max_tokens: u32 },
    /// The window's stop rule on the text so far: `Some(len)` keeps `text[..len]` and ends;
    /// `unfinished`: the text may not end there (the next token is no end token).
    Verdict { id: u64, stop: Option<usize>, unfinished: bool },
    Cancel { id: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum FromHost {
    Ready(HostInfo),
    /// The text a generated token added (may be empty: a token that ends inside a character).
    Piece { id: u64, text: String },
    Done { id: u64, result: Result<(String, Timings), GenerateError> },
}

/// What the host says of itself: to a window at `Hello`, to `ghostline doctor` at `Status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub pid: u32,
    /// The model as the host loaded it (its memory plan stays with the host).
    pub model: ModelInfo,
    /// Windows connected now (this one included, at `Hello`).
    pub windows: usize,
    /// The host's resident memory (VmRSS), 0 where unknown.
    pub rss_bytes: u64,
}

pub fn write<T: Serialize>(out: &mut impl Write, frame: &T) -> io::Result<()> {
    let body = serde_json::to_vec(frame).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
    buf.extend_from_slice(&body);
    out.write_all(&buf)?;
    out.flush()
}

/// The next frame; `None` when the other side closed the connection between frames.
pub fn read<T: DeserializeOwned>(input: &mut impl Read) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {len} bytes")));
    }
    let mut body = vec![0; len];
    input.read_exact(&mut body)?;
    serde_json::from_slice(&body).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        let job = ToHost::Complete { id: 7, tokens: vec![1, 2, 3], stop_key: u64::MAX, max_tokens: 64, unfinished: true, lead: " re".into(), blank_enders: ",)".into() };
        write(&mut buf, &job).unwrap();
        let done = FromHost::Done { id: 7, result: Err(GenerateError::Cancelled) };
        write(&mut buf, &done).unwrap();
        let mut input = &buf[..];
        assert_eq!(read::<ToHost>(&mut input).unwrap(), Some(job));
        assert_eq!(read::<FromHost>(&mut input).unwrap(), Some(done));
        assert_eq!(read::<FromHost>(&mut input).unwrap(), None);
        // A frame cut short is an error, not the end.
        let mut cut = &buf[..6];
        assert!(read::<ToHost>(&mut cut).is_err());
    }
}
