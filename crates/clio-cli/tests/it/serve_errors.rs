//! Issue 44 item 7, `clio serve`'s HTTP side: every error is the API's JSON error (a method
//! a route does not take, 405; a query string that does not read, 400; a body past the
//! limit, 413), the `Host` check ignores case, and a connection that sends half a request
//! and stops is closed once silent for the idle time (`$CLIO_SERVE_IDLE_SECS`). And item 4:
//! a run's events page (`?after=&limit=`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::{temp_home, workspace_root};

/// A `clio serve --port 0` on a home of its own, killed when dropped.
struct Serve {
    child: Child,
    home: std::path::PathBuf,
    /// `127.0.0.1:PORT`.
    addr: String,
    token: String,
}

impl Serve {
    fn start(name: &str, idle_secs: &str) -> Serve {
        let home = temp_home(&format!("serve-errors-{name}"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_clio"))
            .args(["--home", home.to_str().unwrap(), "serve", "--port", "0"])
            .current_dir(workspace_root())
            .env("CLIO_SERVE_IDLE_SECS", idle_secs)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let rest = line.trim().strip_prefix("http://").unwrap_or_else(|| panic!("{line}"));
        let (addr, token) = rest.split_once("/#token=").unwrap();
        Serve { child, home, addr: addr.to_owned(), token: token.to_owned() }
    }

    /// Sends `head` (the request line and headers, without the blank line) and `body`;
    /// returns the status, the response's head and its body.
    fn send(&self, head: &str, body: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let request = format!("{head}\r\nConnection: close\r\n\r\n{body}");
        // A refusal may come before the body is read; what was sent is not the point.
        let _ = stream.write_all(request.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, head.to_owned(), body.to_owned())
    }

    /// Checks that `head` + `body` is answered `code` with the API's JSON error.
    fn refused(&self, head: &str, body: &str, code: u16) -> (String, Value) {
        let (got, head_back, text) = self.send(head, body);
        assert_eq!(got, code, "{head}: {head_back}\n{text}");
        let error: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{head}: not JSON ({e}): {text}"));
        assert_eq!(error["ok"], false, "{text}");
        assert_eq!(error["error"]["status"], code, "{text}");
        assert!(error["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{text}");
        (head_back, error)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_http_error_is_the_apis_json_error() {
    let serve = Serve::start("json", "30");
    let host = format!("Host: {}", serve.addr);
    // A route asked with a method it does not take: 405, naming the ones it takes.
    let (head, error) =
        serve.refused(&format!("GET /api/v1/runs/1/cancel HTTP/1.1\r\n{host}"), "", 405);
    assert!(head.to_ascii_lowercase().contains("\r\nallow: post"), "{head}");
    assert!(error["error"]["message"].as_str().unwrap().contains("GET"), "{error}");
    let bearer = format!("Authorization: Bearer {}", serve.token);
    serve.refused(&format!("DELETE /api/v1/runs HTTP/1.1\r\n{host}\r\n{bearer}"), "", 405);
    // A query string that does not read: 400.
    for path in [
        "/api/v1/runs?limit=many",
        "/api/v1/runs/1/events?after=-1",
        "/api/v1/runs/1/events/stream?after=x",
    ] {
        let (_, error) = serve.refused(&format!("GET {path} HTTP/1.1\r\n{host}"), "", 400);
        assert!(error["error"]["message"].as_str().unwrap().contains("query"), "{error}");
    }
    // A body past the limit: 413.
    let big = format!(
        "POST /api/v1/workflows/check HTTP/1.1\r\n{host}\r\n{bearer}\r\nContent-Length: 50000000"
    );
    serve.refused(&big, "", 413);
    // And a route that is not there stays the JSON 404.
    serve.refused(&format!("GET /api/v1/nothing HTTP/1.1\r\n{host}"), "", 404);
}

#[test]
fn the_host_check_ignores_case() {
    let serve = Serve::start("host", "30");
    let port = serve.addr.rsplit(':').next().unwrap();
    for host in [format!("LOCALHOST:{port}"), format!("LocalHost:{port}"), serve.addr.clone()] {
        let (code, _, body) = serve.send(&format!("GET /api/v1/runs HTTP/1.1\r\nHost: {host}"), "");
        assert_eq!(code, 200, "Host: {host}: {body}");
    }
    // Another name is still refused, as JSON.
    serve.refused(&format!("GET /api/v1/runs HTTP/1.1\r\nHost: evil.example:{port}"), "", 403);
}

/// Reads from `stream` until the server closes it; returns what it sent. Fails the test if
/// it is still open after a minute (the server holds it for good).
fn until_closed(stream: &mut TcpStream) -> String {
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the half-sent request's connection is still open: {e}"),
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn a_half_sent_request_is_closed_once_silent_for_the_idle_time() {
    let serve = Serve::start("idle", "0.5");
    // Headers that never end.
    let mut headers = TcpStream::connect(&serve.addr).unwrap();
    headers
        .write_all(format!("GET /api/v1/runs HTTP/1.1\r\nHost: {}\r\n", serve.addr).as_bytes())
        .unwrap();
    let sent = until_closed(&mut headers);
    assert!(!sent.contains("200 OK"), "{sent}");
    // A body that never ends.
    let mut body = TcpStream::connect(&serve.addr).unwrap();
    let head = format!(
        "POST /api/v1/workflows/check HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Length: 100\r\n\r\n{{\"st",
        serve.addr, serve.token
    );
    body.write_all(head.as_bytes()).unwrap();
    let sent = until_closed(&mut body);
    assert!(!sent.contains("200 OK"), "{sent}");
    // A request sent whole is still answered.
    let (code, _, text) =
        serve.send(&format!("GET /api/v1/runs HTTP/1.1\r\nHost: {}", serve.addr), "");
    assert_eq!(code, 200, "{text}");
}

/// Issue 44 item 4: a run's events come in pages (`?after=SEQ&limit=N`, each answer naming
/// the next page's `after`), which together are every entry, in order.
#[test]
fn a_runs_events_come_in_pages() {
    let serve = Serve::start("pages", "30");
    let h = serve.home.to_str().unwrap();
    let ran = crate::support::clio(&[
        "--home",
        h,
        "run",
        "examples/agents/minimal.toml",
        "--input",
        "x",
        "--models",
        "examples/models/models.toml",
        "--detach",
    ]);
    assert_eq!(ran.code, 0, "{}", ran.render());
    let host = format!("Host: {}", serve.addr);
    let get = |path: &str| -> Value {
        let (code, _, body) = serve.send(&format!("GET {path} HTTP/1.1\r\n{host}"), "");
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    for _ in 0..600 {
        if get("/api/v1/runs/1")["run"]["status"] == "succeeded" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let all = get("/api/v1/runs/1/events");
    let all = all["entries"].as_array().unwrap().clone();
    assert!(all.len() > 2, "{all:?}");
    assert!(get("/api/v1/runs/1/events").get("next_after").is_none(), "no page without a limit");
    let mut paged = Vec::new();
    let mut after: Option<u64> = None;
    for _ in 0..all.len() + 1 {
        let path = match after {
            Some(a) => format!("/api/v1/runs/1/events?after={a}&limit=2"),
            None => "/api/v1/runs/1/events?limit=2".to_owned(),
        };
        let page = get(&path);
        let entries = page["entries"].as_array().unwrap();
        assert!(entries.len() <= 2, "{page}");
        paged.extend(entries.iter().cloned());
        match page["next_after"].as_u64() {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(paged, all, "the pages are every entry, in order");
}
