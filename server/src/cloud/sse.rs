//! Server-sent events as OpenAI-compatible endpoints stream them: a byte-level event parser
//! (events split at blank lines, `data:` lines joined, comments ignored, any line ending) and
//! the `chat.completion.chunk` payload reader.

use serde_json::Value;

/// Feeds bytes in whatever pieces the network delivers; yields each complete event's data.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<String>,
    /// The last byte was `\r`: a `\n` right after it belongs to the same line ending.
    after_cr: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes; returns the data of every event they completed.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, &mut events);
                }
                _ => self.line.push(b),
            }
        }
        events
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                events.push(std::mem::take(&mut self.data).join("\n"));
            }
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alive)
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        if field == "data" {
            self.data.push(value.to_owned());
        }
    }

    /// Data left without its closing blank line when the stream ended.
    pub fn pending(&self) -> bool {
        !self.data.is_empty() || !self.line.is_empty()
    }
}

/// One streamed chunk, read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chunk {
    pub content: String,
    pub finish_reason: Option<String>,
    pub usage: Option<(u64, u64)>,
}

/// What an event's data says.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Chunk(Chunk),
    Done,
}

/// Reads one event's data: `[DONE]`, or a `chat.completion.chunk`. An `error` object or data
/// that is not such a chunk is an error (a malformed stream).
pub fn parse_event(data: &str) -> Result<Event, String> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(Event::Done);
    }
    let v: Value = serde_json::from_str(data).map_err(|e| format!("the stream carried data that is not JSON ({e})"))?;
    if let Some(err) = v.get("error") {
        let message = err.get("message").and_then(Value::as_str).unwrap_or("unknown error");
        return Err(format!("the endpoint reported an error mid-stream: {message}"));
    }
    let mut chunk = Chunk::default();
    if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        chunk.usage = Some((n("prompt_tokens"), n("completion_tokens")));
    }
    let choices = v.get("choices").and_then(Value::as_array).ok_or("a stream chunk without `choices`")?;
    if let Some(choice) = choices.first() {
        if let Some(s) = choice.pointer("/delta/content").and_then(Value::as_str) {
            chunk.content.push_str(s);
        }
        chunk.finish_reason = choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned);
    } else if chunk.usage.is_none() {
        return Err("a stream chunk with no choices and no usage".into());
    }
    Ok(Event::Chunk(chunk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_any_split_and_line_ending() {
        let stream = "data: {\"a\":1}\n\n: keep-alive\r\n\r\ndata: line1\r\ndata: line2\r\n\r\nevent: x\rdata: [DONE]\r\r";
        let whole = SseParser::new().feed(stream.as_bytes());
        assert_eq!(whole, vec!["{\"a\":1}", "line1\nline2", "[DONE]"]);
        // Byte by byte (a chunk boundary between \r and \n included) gives the same events.
        let mut p = SseParser::new();
        let split: Vec<String> = stream.bytes().flat_map(|b| p.feed(&[b])).collect();
        assert_eq!(split, whole);
        assert!(!p.pending());
        let mut p = SseParser::new();
        assert!(p.feed(b"data: {\"choices\":[").is_empty());
        assert!(p.pending());
    }

    #[test]
    fn chunks_done_usage_and_errors() {
        let c = parse_event(r#"{"choices":[{"index":0,"delta":{"content":"def "},"finish_reason":null}]}"#).unwrap();
        assert_eq!(c, Event::Chunk(Chunk { content: "def ".into(), finish_reason: None, usage: None }));
        let c = parse_event(r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#).unwrap();
        assert_eq!(c, Event::Chunk(Chunk { content: "".into(), finish_reason: Some("stop".into()), usage: Some((9, 4)) }));
        let c = parse_event(r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#).unwrap();
        assert!(matches!(c, Event::Chunk(Chunk { usage: Some((1, 2)), .. })));
        assert_eq!(parse_event(" [DONE] ").unwrap(), Event::Done);
        assert!(parse_event("{not json").unwrap_err().contains("not JSON"));
        assert!(parse_event(r#"{"error":{"message":"overloaded"}}"#).unwrap_err().contains("overloaded"));
        assert!(parse_event(r#"{"id":"x"}"#).is_err());
    }
}
