//! The name-server address list asked of an address server over HTTP, as Java 4.9.8's
//! `TopAddressing.fetchNSAddr` asks it at `MixAll.getWSAddr()`:
//! `GET http://<domain>:8080/rocketmq/<subgroup>` (no `:8080` when the domain names a port),
//! answered with `host:port;host:port`. Shared by the client (`ROCKETMQ_NAMESRV_DOMAIN`) and
//! the broker (`fetchNamesrvAddrByAddressServer`).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::RemotingError;

/// Java's default domain (`MixAll.DEFAULT_NAMESRV_ADDR_LOOKUP`, the default of the
/// `rocketmq.namesrv.domain` system property).
pub const DEFAULT_DOMAIN: &str = "jmenv.tbsite.net";

/// Java's default subgroup (the default of `rocketmq.namesrv.domain.subgroup`).
pub const DEFAULT_SUBGROUP: &str = "nsaddr";

/// How long one lookup may take (Java `TopAddressing.fetchNSAddr()`: 3 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

/// Largest answer read.
const MAX_RESPONSE: usize = 64 * 1024;

/// The lookup URL's host (with port) and path (Java `MixAll.getWSAddr`).
pub fn lookup_target(domain: &str, subgroup: &str) -> (String, String) {
    let host = if domain.contains(':') {
        domain.to_string()
    } else {
        format!("{domain}:8080")
    };
    (host, format!("/rocketmq/{subgroup}"))
}

/// The lookup URL, `http://<host>:<port>/rocketmq/<subgroup>` (for messages).
pub fn lookup_url(domain: &str, subgroup: &str) -> String {
    let (host, path) = lookup_target(domain, subgroup);
    format!("http://{host}{path}")
}

/// Asks the address server of `domain` for the list of `subgroup`: `Ok(Some(list))` with the
/// answer's first line, trimmed (`host:port;host:port`, not checked further), `Ok(None)` when
/// the answer is blank, and [`RemotingError::AddressServer`] when there is no answer within
/// `timeout`, the server cannot be reached, or the answer is not HTTP status 200.
pub async fn fetch(
    domain: &str,
    subgroup: &str,
    timeout: Duration,
) -> Result<Option<String>, RemotingError> {
    let (host, path) = lookup_target(domain, subgroup);
    let fail = |reason: String| RemotingError::AddressServer {
        url: format!("http://{host}{path}"),
        reason,
    };
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
/// (Java `TopAddressing.clearNewLine`); `Ok(None)` for a blank body; an error for another
/// status or something that is no HTTP answer.
pub fn parse_answer(answer: &[u8]) -> Result<Option<String>, String> {
    if answer.is_empty() {
        return Err("connection closed without an answer".to_string());
    }
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
        assert_eq!(
            lookup_url(DEFAULT_DOMAIN, DEFAULT_SUBGROUP),
            "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
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
        assert!(parse_answer(b"").is_err());
    }

    /// Nothing listening: an error naming the URL, not a panic or a hang.
    #[tokio::test]
    async fn an_unreachable_server_is_an_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let domain = format!("127.0.0.1:{port}");
        let e = fetch(&domain, "nsaddr", DEFAULT_TIMEOUT).await.unwrap_err();
        assert!(
            matches!(&e, RemotingError::AddressServer { url, .. } if url.ends_with("/rocketmq/nsaddr")),
            "{e}"
        );
    }
}
