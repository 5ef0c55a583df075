//! A minimal HTTP/1.1 client for servers on the loopback interface (llama-server in the bench
//! and in the tests): one request per connection (`Connection: close`), JSON bodies, chunked
//! answers joined. No TLS, no redirects, no keep-alive: the harness needs none of them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind(("127.0.0.1", 0)).and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| e.to_string())
}

/// One exchange with `127.0.0.1:port`: the status and the body (chunked transfer undone).
pub fn request(port: u16, method: &str, path: &str, body: Option<&str>, timeout: Duration) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("127.0.0.1:{port}: {e}"))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("reading from 127.0.0.1:{port}: {e}"))?;
    parse_response(&String::from_utf8_lossy(&raw))
}

/// `GET path`: the status and the body.
pub fn get(port: u16, path: &str, timeout: Duration) -> Result<(u16, String), String> {
    request(port, "GET", path, None, timeout)
}

/// `POST path` with a JSON body: the status and the answer as JSON (a string when it is not).
pub fn post_json(port: u16, path: &str, body: &Value, timeout: Duration) -> Result<(u16, Value), String> {
    let (status, text) = request(port, "POST", path, Some(&body.to_string()), timeout)?;
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok((status, value))
}

fn parse_response(text: &str) -> Result<(u16, String), String> {
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("malformed HTTP response")?;
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).ok_or("malformed HTTP status line")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    Ok((status, if chunked { dechunk(rest) } else { rest.to_owned() }))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let plain = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).unwrap(), (200, "{}".to_owned()));
        let chunked = "HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (503, "{\"a\":1}".to_owned()));
        assert!(parse_response("HTTP/1.1 200 OK").is_err(), "no blank line after the head");
        assert!(parse_response("garbage\r\n\r\n").is_err(), "no status code");
    }
}
