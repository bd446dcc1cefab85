//! A minimal WebDriver client for the browser tests: HTTP/1.1 over a tokio `TcpStream` with
//! JSON bodies, driving Debian's Chromium through ChromeDriver (`/usr/bin/chromedriver`).
//!
//! [`Browser`] owns the ChromeDriver process, started in a process group of its own; dropping
//! it (also when a test panics) ends the session and kills that group, Chromium included.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rocketmq_broker_lite::embedded::TempDir;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's ChromeDriver (package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The key of an element reference in W3C WebDriver answers.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Whether the browser tests can run. Without Chromium or ChromeDriver they are skipped with
/// a notice, unless `ROCKETMQ_REQUIRE_BROWSER=1` (CI), which makes it a failure.
pub fn browser_available() -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let required = std::env::var("ROCKETMQ_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "ROCKETMQ_REQUIRE_BROWSER=1 but {missing:?} missing: apt-get install chromium chromium-driver"
    );
    eprintln!(
        "SKIPPED: {missing:?} not installed (apt-get install chromium chromium-driver; \
         set ROCKETMQ_REQUIRE_BROWSER=1 to make this a failure)"
    );
    false
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers (names lower-cased).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Decodes a chunked body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        raw = &raw[eol + 2..];
        if size == 0 || raw.len() < size {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
}

/// Whether `raw` holds a whole response: its headers, and the body their `Content-Length` or
/// chunked encoding announces (a response with neither ends when the connection closes).
/// Servers may keep the connection open despite `Connection: close` (ChromeDriver does).
fn is_complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    for line in head.split("\r\n").skip(1) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match (k.trim(), v.trim()) {
            ("content-length", v) => return v.parse::<usize>().is_ok_and(|n| body.len() >= n),
            ("transfer-encoding", "chunked") => {
                return body.starts_with(b"0\r\n\r\n")
                    || body.windows(7).any(|w| w == b"\r\n0\r\n\r\n")
            }
            _ => {}
        }
    }
    // No body announced: 1xx, 204 and 304 have none; the rest runs to the end of the stream.
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    status.starts_with('1') || status == "204" || status == "304"
}

/// Parses a whole HTTP/1.1 response.
fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)
    } else if let Some(len) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body[..len.min(body.len())].to_vec()
    } else {
        body.to_vec()
    };
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// The request's bytes.
fn request_bytes(
    method: &str,
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &[u8])>,
) -> Vec<u8> {
    // `Host: addr` unless the caller names the host itself.
    let mut req = if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n")
    } else {
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n")
    };
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some((ctype, b)) = body {
        req.push_str(&format!(
            "Content-Type: {ctype}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    } else if method != "GET" && method != "DELETE" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    if let Some((_, b)) = body {
        bytes.extend_from_slice(b);
    }
    bytes
}

/// One HTTP/1.1 request to `addr` (`host:port`), `Connection: close`, within 90 s.
pub async fn http(
    method: &str,
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &[u8])>,
) -> std::io::Result<HttpResponse> {
    let bytes = request_bytes(method, addr, path, headers, body);
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(&bytes).await?;
        let mut raw = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&chunk[..n]);
            if is_complete(&raw) {
                break;
            }
        }
        parse_response(&raw)
    };
    tokio::time::timeout(Duration::from_secs(90), exchange)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "HTTP request timed out"))?
}

/// `application/x-www-form-urlencoded` of `pairs`.
pub fn form_body(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A WebDriver command that failed.
#[derive(Debug, Clone)]
pub struct WdError {
    /// The WebDriver error code (`no such element`, ...).
    pub error: String,
    /// Its message.
    pub message: String,
}

impl std::fmt::Display for WdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

/// A headless Chromium driven through ChromeDriver.
pub struct Browser {
    driver: Option<Child>,
    addr: String,
    session: Option<String>,
    profile: TempDir,
}

/// A free port on the loopback interface (free when asked; ChromeDriver binds it next).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts ChromeDriver and a Chromium session (headless, a fresh profile, the browser's
    /// console log recorded, a 1200x800 window).
    pub async fn start() -> Browser {
        let profile = TempDir::new("dashboard-chromium").expect("profile dir");
        let log = profile.path().join("chromedriver.log");
        let mut b = Browser {
            driver: None,
            addr: String::new(),
            session: None,
            profile,
        };
        // The port is free when chosen, but another connection may take it as its local end
        // before ChromeDriver binds it: ChromeDriver then exits, and starts again on another.
        let mut attempt = 0;
        'start: loop {
            attempt += 1;
            let port = free_port();
            let driver = Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .arg(format!("--log-path={}", log.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                // A group of its own: killing it kills the browser it starts too.
                .process_group(0)
                .spawn()
                .expect("chromedriver starts");
            b.driver = Some(driver);
            b.addr = format!("127.0.0.1:{port}");
            // ChromeDriver is up when /status says ready.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(Ok(Some(st))) = b.driver.as_mut().map(Child::try_wait) {
                    assert!(
                        attempt < 3,
                        "chromedriver exited at start: {st}; log: {}",
                        b.driver_log()
                    );
                    eprintln!("chromedriver exited at start ({st}); again on another port");
                    continue 'start;
                }
                if let Ok(r) = http("GET", &b.addr, "/status", &[], None).await {
                    let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                    if v["value"]["ready"] == true {
                        break 'start;
                    }
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "chromedriver not ready after 30 s; log: {}",
                    b.driver_log()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let user_data = b.profile.path().join("profile");
        let caps = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "timeouts": {"implicit": 0, "pageLoad": 60000, "script": 30000},
                    "goog:loggingPrefs": {"browser": "ALL"},
                    "goog:chromeOptions": {
                        "binary": CHROMIUM,
                        "args": [
                            "--headless",
                            "--no-sandbox",
                            "--disable-gpu",
                            "--disable-quic",
                            "--no-first-run",
                            "--disable-background-networking",
                            "--disable-component-update",
                            "--disable-sync",
                            "--disable-dev-shm-usage",
                            "--window-size=1200,800",
                            format!("--user-data-dir={}", user_data.display()),
                        ]
                    }
                }
            }
        });
        let v = match b.raw("POST", "/session", Some(caps)).await {
            Ok(v) => v,
            Err(e) => panic!("no browser session: {e}; log: {}", b.driver_log()),
        };
        let id = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {v}"))
            .to_string();
        b.session = Some(id);
        b
    }

    /// The end of ChromeDriver's log (for failure messages).
    pub fn driver_log(&self) -> String {
        let text = std::fs::read_to_string(self.profile.path().join("chromedriver.log"))
            .unwrap_or_default();
        let tail: Vec<char> = text.chars().rev().take(4000).collect();
        tail.into_iter().rev().collect()
    }

    /// A WebDriver command: its `value`, or the WebDriver error.
    async fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, WdError> {
        let bytes = body.map(|b| b.to_string().into_bytes());
        let r = http(
            method,
            &self.addr,
            path,
            &[],
            bytes
                .as_deref()
                .map(|b| ("application/json; charset=utf-8", b)),
        )
        .await
        .map_err(|e| WdError {
            error: "http".into(),
            message: e.to_string(),
        })?;
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| WdError {
            error: "json".into(),
            message: format!("{e}: {}", r.text()),
        })?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if r.status >= 400 || value.get("error").is_some_and(|e| e.is_string()) {
            return Err(WdError {
                error: value["error"].as_str().unwrap_or("unknown").to_string(),
                message: value["message"].as_str().unwrap_or_default().to_string(),
            });
        }
        Ok(value)
    }

    fn session_path(&self, rest: &str) -> String {
        format!(
            "/session/{}{rest}",
            self.session.as_deref().unwrap_or("none")
        )
    }

    /// A command of the session; panics on a WebDriver error.
    pub async fn cmd(&self, method: &str, rest: &str, body: Option<Value>) -> Value {
        let path = self.session_path(rest);
        match self.raw(method, &path, body).await {
            Ok(v) => v,
            Err(e) => panic!("WebDriver {method} {path}: {e}"),
        }
    }

    /// Opens `url` and waits for it to load.
    pub async fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The first element matching `css`, if any.
    pub async fn find(&self, css: &str) -> Option<String> {
        let path = self.session_path("/element");
        match self
            .raw(
                "POST",
                &path,
                Some(json!({"using": "css selector", "value": css})),
            )
            .await
        {
            Ok(v) => v[ELEMENT_KEY].as_str().map(str::to_string),
            Err(e) if e.error == "no such element" => None,
            Err(e) => panic!("finding {css:?}: {e}"),
        }
    }

    /// Every element matching `css`.
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let v = self
            .cmd(
                "POST",
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT_KEY].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The element matching `css`; panics if there is none.
    pub async fn get(&self, css: &str) -> String {
        match self.find(css).await {
            Some(e) => e,
            None => panic!(
                "no element {css:?} on {}; page text: {}",
                self.url().await,
                self.page_text().await
            ),
        }
    }

    /// Waits (up to `limit`) for an element matching `css`.
    pub async fn wait_for(&self, css: &str, limit: Duration) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(e) = self.find(css).await {
                return e;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "no element {css:?} after {limit:?} on {}; page text: {}",
                    self.url().await,
                    self.page_text().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The rendered text of an element.
    pub async fn text(&self, el: &str) -> String {
        self.cmd("GET", &format!("/element/{el}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The rendered text of the element matching `css`.
    pub async fn text_of(&self, css: &str) -> String {
        let el = self.get(css).await;
        self.text(&el).await
    }

    /// An attribute of an element (`None` when absent).
    pub async fn attr(&self, el: &str, name: &str) -> Option<String> {
        self.cmd("GET", &format!("/element/{el}/attribute/{name}"), None)
            .await
            .as_str()
            .map(str::to_string)
    }

    /// An attribute of the element matching `css`; panics when absent.
    pub async fn attr_of(&self, css: &str, name: &str) -> String {
        let el = self.get(css).await;
        match self.attr(&el, name).await {
            Some(v) => v,
            None => panic!("{css:?} has no attribute {name:?}"),
        }
    }

    /// Clears a field and types `text` into it.
    pub async fn fill(&self, css: &str, text: &str) {
        let el = self.get(css).await;
        self.cmd("POST", &format!("/element/{el}/clear"), Some(json!({})))
            .await;
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        let el = self.get(css).await;
        self.cmd("POST", &format!("/element/{el}/click"), Some(json!({})))
            .await;
    }

    /// Runs `script` in the page (`return ...` gives the value).
    pub async fn execute(&self, script: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// The page's visible text.
    pub async fn page_text(&self) -> String {
        match self
            .raw(
                "POST",
                &self.session_path("/execute/sync"),
                Some(json!({"script": "return document.body ? document.body.innerText : ''", "args": []})),
            )
            .await
        {
            Ok(v) => v.as_str().unwrap_or_default().chars().take(3000).collect(),
            Err(e) => format!("(unreadable: {e})"),
        }
    }

    /// The browser console's entries since the last call (ChromeDriver's `browser` log):
    /// `(level, message)`.
    pub async fn console(&self) -> Vec<(String, String)> {
        let v = self
            .cmd("POST", "/se/log", Some(json!({"type": "browser"})))
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["level"].as_str().unwrap_or_default().to_string(),
                            e["message"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The console's errors since the last read (JavaScript errors, failed resource loads,
    /// content-security-policy violations).
    pub async fn console_errors(&self) -> Vec<String> {
        self.console()
            .await
            .into_iter()
            .filter(|(level, _)| level == "SEVERE")
            .map(|(_, m)| m)
            .collect()
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let v = self.cmd("GET", "/screenshot", None).await;
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("a base64 screenshot")
    }

    /// Ends the session and stops ChromeDriver and the browser.
    pub async fn quit(mut self) {
        if let Some(id) = self.session.take() {
            let _ = self.raw("DELETE", &format!("/session/{id}"), None).await;
        }
        self.kill();
    }

    /// Kills ChromeDriver's process group (the browser's processes with it) and reaps it.
    fn kill(&mut self) {
        if let Some(mut child) = self.driver.take() {
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that failed: end the session (ChromeDriver then closes the browser), briefly
        // and blocking, then kill what is left.
        if let Some(id) = self.session.take() {
            if let Ok(mut s) = std::net::TcpStream::connect(&self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                let req = request_bytes("DELETE", &self.addr, &format!("/session/{id}"), &[], None);
                if s.write_all(&req).is_ok() {
                    let mut raw = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while let Ok(n) = s.read(&mut chunk) {
                        if n == 0 {
                            break;
                        }
                        raw.extend_from_slice(&chunk[..n]);
                        if is_complete(&raw) {
                            break;
                        }
                    }
                }
            }
        }
        self.kill();
    }
}
