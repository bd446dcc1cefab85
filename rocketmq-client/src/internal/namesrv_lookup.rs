//! The name-server address list fetched over HTTP when none is configured (Java
//! `TopAddressing.fetchNSAddr`, `MixAll.getWSAddr`): `GET http://<domain>:8080/rocketmq/<subgroup>`
//! (no `:8080` when the domain names a port), answered with `host:port;host:port`.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{ClientError, Result};

/// Largest answer read.
const MAX_RESPONSE: usize = 64 * 1024;

/// The lookup URL's host (with port) and path (Java `MixAll.getWSAddr`).
pub(crate) fn lookup_target(domain: &str, subgroup: &str) -> (String, String) {
    let host = if domain.contains(':') {
        domain.to_string()
    } else {
        format!("{domain}:8080")
    };
    (host, format!("/rocketmq/{subgroup}"))
}

/// Fetches the address list: `Ok(None)` when the server answered with nothing usable.
pub(crate) async fn fetch(
    domain: &str,
    subgroup: &str,
    timeout: Duration,
) -> Result<Option<String>> {
    let (host, path) = lookup_target(domain, subgroup);
    let fail = |why: String| ClientError::NoNameServer(format!("http://{host}{path}: {why}"));
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&host)
            .await
            .map_err(|e| fail(e.to_string()))?;
        // HTTP/1.0: the answer is not chunked and ends with the connection.
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: */*\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut answer = Vec::new();
        (&mut stream)
            .take(MAX_RESPONSE as u64 + 1)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if answer.len() > MAX_RESPONSE {
            return Err(fail(format!("answer longer than {MAX_RESPONSE} bytes")));
        }
        Ok(answer)
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| fail(format!("no answer in {timeout:?}")))??;
    parse_answer(&answer).map_err(fail)
}

/// The address list of an HTTP answer: status 200, body up to its first line break, trimmed
/// (Java `TopAddressing.clearNewLine`).
pub(crate) fn parse_answer(answer: &[u8]) -> std::result::Result<Option<String>, String> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .or_else(|| text.split_once("\n\n"))
        .ok_or_else(|| "malformed HTTP answer".to_string())?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .ok_or_else(|| "malformed HTTP status line".to_string())?;
    if status != "200" {
        return Err(format!("HTTP status {status}"));
    }
    let line = body.trim().lines().next().unwrap_or("").trim();
    Ok((!line.is_empty()).then(|| line.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_as_java_builds_it() {
        assert_eq!(
            lookup_target("jmenv.tbsite.net", "nsaddr"),
            ("jmenv.tbsite.net:8080".into(), "/rocketmq/nsaddr".into())
        );
        assert_eq!(
            lookup_target("127.0.0.1:9000", "unit1"),
            ("127.0.0.1:9000".into(), "/rocketmq/unit1".into())
        );
    }

    #[test]
    fn answers() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n 10.0.0.1:9876;10.0.0.2:9876\r\nx";
        assert_eq!(
            parse_answer(ok).unwrap().as_deref(),
            Some("10.0.0.1:9876;10.0.0.2:9876")
        );
        assert_eq!(
            parse_answer(b"HTTP/1.0 200 OK\r\n\r\n  \r\n").unwrap(),
            None
        );
        assert!(parse_answer(b"HTTP/1.0 404 Not Found\r\n\r\nnope").is_err());
        assert!(parse_answer(b"garbage").is_err());
    }
}
