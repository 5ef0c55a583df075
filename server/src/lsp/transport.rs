//! The stdio guard between the editor and tower-lsp-server: frames are checked before the
//! protocol layer sees them.
//!
//! tower-lsp-server reads stdin through `tokio_util::codec::FramedRead`, which ends the stream
//! after the first undecodable message: one malformed frame (invalid JSON, a lone surrogate, a
//! broken header) would leave the server deaf. Here every frame is read and parsed first;
//! invalid ones are answered with a JSON-RPC parse error (`-32700`, id `null`) and dropped, and
//! only valid ones are forwarded. Output frames pass through unchanged, whole, so our answers
//! never interleave with the server's.

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Frames larger than this are refused (and skipped) rather than buffered.
pub const MAX_FRAME_BYTES: usize = 512 << 20;

/// One framed message read from the editor.
#[derive(Debug, PartialEq)]
pub enum Frame {
    Valid(Vec<u8>),
    /// Could not be used; the reason is logged and answered as a parse error.
    Invalid(String),
}

/// Reads the next frame. `None` at end of input.
pub async fn read_frame<R: AsyncRead + Unpin>(input: &mut BufReader<R>) -> Option<Frame> {
    let mut length: Option<Result<usize, String>> = None;
    let mut saw_header = false;
    loop {
        let mut line = Vec::new();
        if input.read_until(b'\n', &mut line).await.ok()? == 0 {
            return None;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if saw_header {
                break;
            }
            continue; // stray blank line between frames
        }
        saw_header = true;
        if let Some((name, value)) = text.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                length = Some(value.trim().parse::<usize>().map_err(|_| format!("bad Content-Length {:?}", value.trim())));
            }
        }
    }
    let length = match length {
        None => return Some(Frame::Invalid("a message without a Content-Length header".into())),
        Some(Err(e)) => return Some(Frame::Invalid(e)),
        Some(Ok(n)) => n,
    };
    if length > MAX_FRAME_BYTES {
        // Skip it without holding it in memory.
        let mut rest = length as u64;
        let mut sink = tokio::io::sink();
        let copied = tokio::io::copy(&mut input.take(rest), &mut sink).await.ok()?;
        rest -= copied;
        if rest > 0 {
            return None;
        }
        return Some(Frame::Invalid(format!("a message of {length} bytes (the limit is {MAX_FRAME_BYTES})")));
    }
    let mut body = vec![0; length];
    input.read_exact(&mut body).await.ok()?;
    let body = match serde_json::from_slice::<Value>(&body) {
        // JSON allows lone UTF-16 surrogates in strings (`"\ud800"`), Rust strings do not: they
        // become U+FFFD, which is one UTF-16 unit too, so positions after them stay right.
        // serde_json reports them as "lone … surrogate" or "unexpected end of hex escape".
        Err(_) => replace_lone_surrogates(&body),
        _ => body,
    };
    Some(match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(_)) => Frame::Valid(body),
        Ok(_) => Frame::Invalid("a message that is not a JSON object".into()),
        Err(e) => Frame::Invalid(format!("invalid JSON: {e}")),
    })
}

/// Rewrites `\uD800`–`\uDFFF` escapes that do not form a surrogate pair as `\uFFFD`.
pub fn replace_lone_surrogates(body: &[u8]) -> Vec<u8> {
    fn hex4(b: &[u8]) -> Option<u16> {
        u16::from_str_radix(std::str::from_utf8(b.get(..4)?).ok()?, 16).ok()
    }
    let unit_at = |i: usize| -> Option<u16> {
        (body.get(i) == Some(&b'\\') && body.get(i + 1) == Some(&b'u')).then(|| hex4(&body[i + 2..])).flatten()
    };
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] != b'\\' {
            out.push(body[i]);
            i += 1;
            continue;
        }
        match unit_at(i) {
            Some(high @ 0xD800..=0xDBFF) if matches!(unit_at(i + 6), Some(0xDC00..=0xDFFF)) => {
                out.extend_from_slice(&body[i..i + 12]);
                let _ = high;
                i += 12;
            }
            Some(0xD800..=0xDFFF) => {
                out.extend_from_slice(b"\\uFFFD");
                i += 6;
            }
            _ => {
                // Any other escape: copy the backslash and the escaped byte together.
                out.extend_from_slice(&body[i..(i + 2).min(body.len())]);
                i += 2;
            }
        }
    }
    out
}

fn encode(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Copies checked frames from `editor_in` to `server_in`, and whole frames from `server_out`
/// (plus our parse-error answers) to `editor_out`, until either side closes.
pub async fn guard<I, O, SI, SO>(editor_in: I, mut editor_out: O, mut server_in: SI, server_out: SO)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    SI: AsyncWrite + Unpin + Send + 'static,
    SO: AsyncRead + Unpin + Send + 'static,
{
    let (answers, mut answered) = mpsc::unbounded_channel::<Vec<u8>>();
    let inbound = tokio::spawn(async move {
        let mut input = BufReader::new(editor_in);
        while let Some(frame) = read_frame(&mut input).await {
            match frame {
                Frame::Valid(body) => {
                    if server_in.write_all(&encode(&body)).await.is_err() || server_in.flush().await.is_err() {
                        break;
                    }
                }
                Frame::Invalid(why) => {
                    tracing::warn!("dropping a message from the client: {why}");
                    let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("Parse error: {why}")}});
                    let _ = answers.send(serde_json::to_vec(&error).expect("serializable"));
                }
            }
        }
        // End of input: closing the server's stdin lets it finish as it would on EOF.
        let _ = server_in.shutdown().await;
    });
    let mut from_server = BufReader::new(server_out);
    loop {
        tokio::select! {
            frame = read_frame(&mut from_server) => match frame {
                Some(Frame::Valid(body)) => {
                    if editor_out.write_all(&encode(&body)).await.is_err() || editor_out.flush().await.is_err() {
                        break;
                    }
                }
                Some(Frame::Invalid(why)) => tracing::error!("the server wrote an invalid frame: {why}"),
                None => break,
            },
            Some(body) = answered.recv() => {
                if editor_out.write_all(&encode(&body)).await.is_err() || editor_out.flush().await.is_err() {
                    break;
                }
            }
        }
    }
    inbound.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(bytes: &[u8]) -> Vec<Frame> {
        let mut input = BufReader::new(bytes);
        let mut out = Vec::new();
        while let Some(f) = read_frame(&mut input).await {
            out.push(f);
        }
        out
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let fix = |s: &str| String::from_utf8(replace_lone_surrogates(s.as_bytes())).unwrap();
        assert_eq!(fix(r#""a\ud800b""#), r#""a\uFFFDb""#);
        assert_eq!(fix(r#""\udc00\ud83e\udd80""#), r#""\uFFFD\ud83e\udd80""#);
        assert_eq!(fix(r#""\\ud800""#), r#""\\ud800""#); // an escaped backslash, not an escape
        assert_eq!(fix(r#""\ud800""#).len(), r#""\uFFFD""#.len());
    }

    #[tokio::test]
    async fn bad_frames_are_reported_and_the_stream_goes_on() {
        let good = br#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let mut bytes = encode(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
        bytes.extend(encode(br#"{"text":"\ud800"}"#));
        bytes.extend(encode(b"[1, 2]"));
        bytes.extend(b"Content-Type: application/vscode-jsonrpc\r\n\r\n");
        bytes.extend(b"Content-Length: many\r\n\r\n");
        bytes.extend(encode(good));
        let got = frames(&bytes).await;
        assert_eq!(got.len(), 6, "{got:?}");
        assert!(matches!(&got[0], Frame::Invalid(w) if w.contains("invalid JSON")));
        assert_eq!(got[1], Frame::Valid(br#"{"text":"\uFFFD"}"#.to_vec()));
        assert!(matches!(&got[2], Frame::Invalid(w) if w.contains("not a JSON object")));
        assert!(matches!(&got[3], Frame::Invalid(w) if w.contains("without a Content-Length")));
        assert!(matches!(&got[4], Frame::Invalid(w) if w.contains("bad Content-Length")));
        assert_eq!(got[5], Frame::Valid(good.to_vec()));
    }
}
