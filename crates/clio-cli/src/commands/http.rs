//! `clio serve`'s HTTP side: the JSON API under `/api/v1/` (docs/http-api.md) and the run
//! viewer at `/` (its files embedded in the binary, `crates/clio-cli/assets/viewer/`),
//! served with axum on serve's tokio runtime, beside the socket and on the same journal
//! and drivers. The answers are built by `crate::commands::api` from the functions the
//! `runs` commands print with, on a blocking thread each (the journal is sync).
//!
//! Who may do what (docs/http-api.md, "Authentication"): on a loopback address a read needs
//! nothing; a write (any method but GET and HEAD) needs the token (`Authorization: Bearer
//! TOKEN`, else 401) and must not come from another site (an `Origin` that is not this
//! server's, or a `Sec-Fetch-Site` other than `same-origin` and `none`, is 403, checked
//! first). Every request must name this server in `Host` (a page on another name that
//! resolves here, DNS rebinding, is 403). On another address (`--bind ADDR
//! --allow-remote`) every request needs the token; a GET may carry it as `?token=`, which
//! is how the viewer's event stream (an `EventSource`, which sends no headers) does.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{self, ApiFailure};
use crate::args::ServeArgs;
use crate::error::CliError;
use crate::home::Home;

/// The longest a live event stream waits before it looks for new entries even though no
/// commit woke it (it is woken by each of the journal's commits).
const POLL: Duration = Duration::from_secs(2);

/// How long a connection may stay silent both ways (a request's headers or body half
/// sent, an idle keep-alive connection) before it is closed: `$CLIO_SERVE_IDLE_SECS`, 30
/// seconds by default. A live event stream is not silent: it sends a keep-alive comment
/// every 15 seconds.
fn idle_timeout() -> Duration {
    std::env::var("CLIO_SERVE_IDLE_SECS")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(30), Duration::from_secs_f64)
}

/// The listener of the HTTP side: each connection it accepts is closed once silent both
/// ways for `idle` ([`Idle`]), so a client that sends half a request and stops holds
/// nothing for good.
struct Listener {
    inner: tokio::net::TcpListener,
    idle: Duration,
}

impl axum::serve::Listener for Listener {
    type Io = Idle;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Idle, SocketAddr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let _ = stream.set_nodelay(true);
        (Idle::new(stream, self.idle), addr)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A connection that fails its pending read or write (`TimedOut`, and hyper closes it)
/// once nothing has moved either way for its idle time.
struct Idle {
    stream: tokio::net::TcpStream,
    idle: Duration,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl Idle {
    fn new(stream: tokio::net::TcpStream, idle: Duration) -> Idle {
        Idle { stream, idle, deadline: Box::pin(tokio::time::sleep(idle)) }
    }

    fn moved(&mut self) {
        let next = tokio::time::Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// On a pending read or write: `Ready(TimedOut)` once the idle time has passed.
    fn expired(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Error> {
        match self.deadline.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection was silent for too long",
            )),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl tokio::io::AsyncRead for Idle {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match std::pin::Pin::new(&mut self.stream).poll_read(cx, buf) {
            std::task::Poll::Ready(res) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                std::task::Poll::Ready(res)
            }
            std::task::Poll::Pending => self.expired(cx).map(Err),
        }
    }
}

impl tokio::io::AsyncWrite for Idle {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.stream).poll_write(cx, data) {
            std::task::Poll::Ready(res) => {
                if res.as_ref().is_ok_and(|n| *n > 0) {
                    self.moved();
                }
                std::task::Poll::Ready(res)
            }
            std::task::Poll::Pending => self.expired(cx).map(Err),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            std::task::Poll::Ready(res) => {
                if res.as_ref().is_ok_and(|n| *n > 0) {
                    self.moved();
                }
                std::task::Poll::Ready(res)
            }
            std::task::Poll::Pending => self.expired(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Where and how the HTTP side listens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    bind: IpAddr,
    port: u16,
    /// Listening on an address that is not loopback: every request needs the token.
    remote: bool,
}

impl Config {
    /// Validates `clio serve`'s flags: an address that is not loopback needs
    /// `--allow-remote`.
    pub(crate) fn of(args: &ServeArgs) -> Result<Config, CliError> {
        let remote = !args.bind.is_loopback();
        if remote && !args.allow_remote {
            return Err(CliError::usage(anyhow!(
                "--bind {}: not a loopback address, so others on the network could reach the API",
                args.bind
            ))
            .hint("add --allow-remote to listen there anyway (every request then needs the token of $CLIO_HOME/serve.token)"));
        }
        Ok(Config { bind: args.bind, port: args.port, remote })
    }

    /// Binds the listening socket.
    pub(crate) async fn bind(&self) -> Result<tokio::net::TcpListener, CliError> {
        let at = SocketAddr::new(self.bind, self.port);
        tokio::net::TcpListener::bind(at).await.map_err(|error| {
            let in_use = error.kind() == std::io::ErrorKind::AddrInUse;
            let cli = CliError::user(anyhow!(error).context(format!("cannot listen on {at}")));
            if in_use {
                cli.hint("pass --port N for another port, or --port 0 for a free one")
            } else {
                cli
            }
        })
    }

    /// Returns the viewer's address on `listener`, with the token in its fragment (which
    /// a browser does not send to the server): the page that opens it can write.
    pub(crate) fn url(
        &self,
        listener: &tokio::net::TcpListener,
        token: &str,
    ) -> Result<String, CliError> {
        let at = listener.local_addr().map_err(CliError::internal)?;
        Ok(format!("http://{at}/#token={token}"))
    }
}

/// What every handler shares.
#[derive(Clone)]
struct App {
    /// The served home: it lends the journal, the runtime and the drivers.
    home: Home,
    token: Arc<str>,
    /// The `Host` values that name this server, and the origins of its own pages.
    hosts: Arc<[String]>,
    origins: Arc<[String]>,
    remote: bool,
    /// On a shared journal (no journal held here), a handle of it kept open for the
    /// notices of every process's commits (`LISTEN`), which wake the live event streams.
    notices: Option<clio_journal::Journal>,
}

/// Serves the API and the viewer on `listener` until the task is aborted.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    home: Home,
    token: String,
) {
    let port = listener.local_addr().map_or(config.port, |a| a.port());
    let hosts: Vec<String> = if config.bind.is_loopback() {
        ["127.0.0.1", "localhost", "[::1]"].iter().map(|h| format!("{h}:{port}")).collect()
    } else {
        vec![SocketAddr::new(config.bind, port).to_string()]
    };
    let origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}")).collect();
    let notices = if home.held().is_none() && home.shared_journal().is_some() {
        let home = home.clone();
        tokio::task::spawn_blocking(move || home.reading_journal().ok().flatten())
            .await
            .ok()
            .flatten()
    } else {
        None
    };
    // Its listener starts now, not with the first stream.
    if let Some(journal) = &notices {
        drop(journal.changes());
    }
    let app = App {
        home,
        token: token.into(),
        hosts: hosts.into(),
        origins: origins.into(),
        remote: config.remote,
        notices,
    };
    let drivers = app.home.held().and_then(|held| held.drivers.clone());
    let listener = Listener { inner: listener, idle: idle_timeout() };
    if let Err(error) = axum::serve(listener, router(app)).await
        && let Some(drivers) = drivers
    {
        drivers.log(format!("error: the HTTP API stopped: {error}\n"));
    }
}

/// `clio serve` on a shared (PostgreSQL) journal: the viewer and the HTTP API only, read
/// from the shared journal (workers drive its runs: no socket, no drives here), until
/// Ctrl-C or SIGTERM. The team's view of its fleet. It steers the runs through the journal,
/// never by driving one: an answer or a resume hands a run to the workers, a cancel marks
/// it, a stop is an event the run's worker reads (docs/deploy.md).
pub(crate) fn serve_shared(
    home: &Home,
    args: &ServeArgs,
    out: &mut dyn std::io::Write,
    err: &mut dyn std::io::Write,
) -> Result<(), CliError> {
    let config = Config::of(args)?;
    // The journal answers, or this says why, before anything listens.
    home.reading_journal()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::internal)?;
    let token = crate::serve::token::load_or_create(home)?;
    let listener = rt.block_on(config.bind())?;
    let url = config.url(&listener, &token)?;
    writeln!(out, "{url}")?;
    out.flush()?;
    writeln!(
        err,
        "serving the viewer and the HTTP API of the shared journal {} on {} (workers drive its runs); Ctrl-C stops it",
        home.journal_path().display(),
        url.split('#').next().unwrap_or(&url)
    )?;
    let server = rt.spawn(serve(listener, config, home.clone(), token));
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt =
            signal(SignalKind::interrupt()).map_err(|e| CliError::internal(anyhow!(e)))?;
        let mut terminate =
            signal(SignalKind::terminate()).map_err(|e| CliError::internal(anyhow!(e)))?;
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        Ok::<_, CliError>(())
    })?;
    server.abort();
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn router(app: App) -> Router {
    Router::new()
        .route("/api/v1/runs", get(list).post(create))
        .route("/api/v1/runs/{id}", get(show))
        .route("/api/v1/runs/{id}/tasks", get(tasks))
        .route("/api/v1/runs/{id}/events", get(events))
        .route("/api/v1/runs/{id}/events/stream", get(stream))
        .route("/api/v1/runs/{id}/questions", get(questions))
        .route("/api/v1/runs/{id}/answer", post(answer))
        .route("/api/v1/runs/{id}/cancel", post(cancel))
        .route("/api/v1/runs/{id}/stop", post(stop))
        .route("/api/v1/runs/{id}/resume", post(resume))
        .route("/api/v1/workflows/check", post(check))
        .route("/api/v1/plugins", get(plugins))
        .route("/api/{*rest}", any(no_route))
        .route("/", get(page))
        .route("/runs/{id}", get(page))
        .route("/assets/{name}", get(asset))
        .fallback(no_route)
        .method_not_allowed_fallback(no_method)
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// A refusal of the guard or a handler, as the API answers errors:
/// `{"ok": false, "error": {...}}` with `status`.
fn refusal(status: StatusCode, error: CliError) -> Response {
    let mut value = error.to_json();
    value["error"]["status"] = json!(status.as_u16());
    (status, axum::Json(value)).into_response()
}

fn failure(failure: ApiFailure) -> Response {
    let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    refusal(status, failure.error)
}

/// The largest request body the API reads (a workflow to check, an answer).
const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// Checks who asks before any handler runs (see the module doc), and refuses a body its
/// `Content-Length` says is past [`BODY_LIMIT`] before reading any of it.
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    if let Some(response) = app.refusal_of(&request) {
        return response;
    }
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if let Some(length) = length.filter(|n| *n > BODY_LIMIT as u64) {
        let error = CliError::usage(anyhow!(
            "{} {}: the body is {length} bytes, past the limit of {BODY_LIMIT}",
            request.method(),
            request.uri().path()
        ));
        return refusal(StatusCode::PAYLOAD_TOO_LARGE, error);
    }
    next.run(request).await
}

impl App {
    /// Returns the refusal of `request`, or `None` when it may go on.
    fn refusal_of(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        let path = request.uri().path().to_owned();
        if !self.remote {
            let host = text(header::HOST).unwrap_or("");
            // Host names are not case-sensitive (`LOCALHOST:8080` names this server too).
            if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
                let error = CliError::user(anyhow!(
                    "{path}: Host `{host}` does not name this server ({})",
                    self.hosts.join(", ")
                ));
                return Some(refusal(StatusCode::FORBIDDEN, error));
            }
        }
        let writes = request.method() != Method::GET && request.method() != Method::HEAD;
        if writes {
            if let Some(origin) = text(header::ORIGIN)
                && !self.origins.iter().any(|o| o == origin)
            {
                let error = CliError::user(anyhow!(
                    "{} {path}: refused, it comes from another site ({origin})",
                    request.method()
                ));
                return Some(refusal(StatusCode::FORBIDDEN, error));
            }
            if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
                && site != "same-origin"
                && site != "none"
            {
                let error = CliError::user(anyhow!(
                    "{} {path}: refused, the browser says it comes from another site (Sec-Fetch-Site: {site})",
                    request.method()
                ));
                return Some(refusal(StatusCode::FORBIDDEN, error));
            }
        }
        if writes || self.remote {
            let bearer = text(header::AUTHORIZATION).and_then(|v| v.strip_prefix("Bearer "));
            let query = (!writes).then(|| query_token(request.uri().query())).flatten();
            let given = bearer.map(str::to_owned).or(query);
            if !given.is_some_and(|t| same(t.trim().as_bytes(), self.token.as_bytes())) {
                let what =
                    if writes { request.method().to_string() } else { "every request".into() };
                let error = CliError::user(anyhow!("{what} {path}: needs the token of clio serve"))
                    .hint("send `Authorization: Bearer TOKEN`, TOKEN from $CLIO_HOME/serve.token (or the #token= of the address clio serve printed)");
                let mut response = refusal(StatusCode::UNAUTHORIZED, error);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return Some(response);
            }
        }
        None
    }

    /// Runs `answer` on a blocking thread with the served home, and answers with its JSON
    /// or its failure.
    async fn answer(
        &self,
        answer: impl FnOnce(&Home) -> Result<Value, ApiFailure> + Send + 'static,
    ) -> Response {
        match self.blocking(answer).await {
            Ok(value) => axum::Json(value).into_response(),
            Err(error) => failure(error),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Home) -> Result<T, ApiFailure> + Send + 'static,
    ) -> Result<T, ApiFailure> {
        let home = self.home.clone();
        tokio::task::spawn_blocking(move || work(&home)).await.unwrap_or_else(|error| {
            Err(ApiFailure {
                status: 500,
                error: CliError::internal(anyhow!("the request's work stopped: {error}")),
            })
        })
    }
}

/// Returns the `token` of a query string.
fn query_token(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| pair.strip_prefix("token=")).map(str::to_owned)
}

/// Compares two secrets in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a run id from the path.
fn run_id(text: &str) -> Result<u64, ApiFailure> {
    text.parse().map_err(|_| ApiFailure::bad_input(format!("run id `{text}` is not a number")))
}

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    limit: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
struct AfterQuery {
    after: Option<u64>,
    /// The most entries one answer holds (`events`; a page).
    limit: Option<usize>,
}

/// Reads a query string, or answers its mistake as the API's JSON error (400).
fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, Box<Response>> {
    q.map(|Query(q)| q).map_err(|rejection| {
        let status = rejection.status();
        let error = CliError::usage(anyhow!("the query string: {}", rejection.body_text()))
            .hint("docs/http-api.md lists each route's parameters");
        Box::new(refusal(status, error))
    })
}

/// Reads a request's body, or answers why it cannot as the API's JSON error (413 for a
/// body past the limit, 400 for one cut short).
fn body(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Box<Response>> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let error = CliError::usage(anyhow!("the request's body: {}", rejection.body_text()));
        Box::new(refusal(status, error))
    })
}

async fn list(State(app): State<App>, q: Result<Query<ListQuery>, QueryRejection>) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    app.answer(move |home| api::list(home, q.limit)).await
}

async fn show(State(app): State<App>, Path(id): Path<String>) -> Response {
    app.answer(move |home| api::show(home, run_id(&id)?)).await
}

async fn tasks(State(app): State<App>, Path(id): Path<String>) -> Response {
    app.answer(move |home| api::tasks(home, run_id(&id)?)).await
}

async fn events(
    State(app): State<App>,
    Path(id): Path<String>,
    q: Result<Query<AfterQuery>, QueryRejection>,
) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    app.answer(move |home| api::events(home, run_id(&id)?, q.after, q.limit)).await
}

async fn questions(State(app): State<App>, Path(id): Path<String>) -> Response {
    app.answer(move |home| api::questions(home, run_id(&id)?)).await
}

async fn answer(
    State(app): State<App>,
    Path(id): Path<String>,
    given: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body(given) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    app.answer(move |home| api::answer(home, run_id(&id)?, &body)).await
}

async fn cancel(State(app): State<App>, Path(id): Path<String>) -> Response {
    app.answer(move |home| api::cancel(home, run_id(&id)?)).await
}

/// `POST runs`: a new run, its input any JSON value (`api::create`).
async fn create(State(app): State<App>, body: Bytes) -> Response {
    app.answer(move |home| api::create(home, &body)).await
}

/// `POST runs/{id}/stop`: the body is empty (every live model turn of the run) or
/// `{"task": n}` (that agent's or subagent's turn).
async fn stop(
    State(app): State<App>,
    Path(id): Path<String>,
    given: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body(given) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    app.answer(move |home| {
        let task = if body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            let value: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                ApiFailure::bad_input(format!(
                    "the body is not JSON ({{\"task\": n}} or nothing): {e}"
                ))
            })?;
            match value.get("task") {
                None | Some(serde_json::Value::Null) => None,
                Some(t) => Some(t.as_u64().ok_or_else(|| {
                    ApiFailure::bad_input(format!("`task` must be a task id (a number), not {t}"))
                })?),
            }
        };
        api::stop(home, run_id(&id)?, task)
    })
    .await
}

async fn resume(State(app): State<App>, Path(id): Path<String>) -> Response {
    app.answer(move |home| api::resume(home, run_id(&id)?)).await
}

async fn check(State(app): State<App>, given: Result<Bytes, BytesRejection>) -> Response {
    let body = match body(given) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    app.answer(move |_| api::check_workflow(&body)).await
}

async fn plugins(State(app): State<App>) -> Response {
    app.answer(api::plugins).await
}

async fn no_route(request: Request) -> Response {
    let error =
        CliError::usage(anyhow!("{} {}: no such route", request.method(), request.uri().path()))
            .hint("docs/http-api.md lists the routes; they are under /api/v1/");
    refusal(StatusCode::NOT_FOUND, error)
}

/// A route asked with a method it does not take: the API's JSON error (405), with the
/// methods it takes in `Allow` (set by the router).
async fn no_method(request: Request) -> Response {
    let error = CliError::usage(anyhow!(
        "{} {}: this route does not take {}",
        request.method(),
        request.uri().path(),
        request.method()
    ))
    .hint("docs/http-api.md lists each route's method");
    refusal(StatusCode::METHOD_NOT_ALLOWED, error)
}

/// A live event stream: the entries still to send, where the stream stands, and the
/// run's end once the entries read hold it.
struct Live {
    app: App,
    /// Notices of the journal's commits: the stream reads the run again when something was
    /// written, not at a fixed interval.
    changes: Option<clio_journal::Changes>,
    run: u64,
    after: Option<u64>,
    queue: VecDeque<Value>,
    ended: Option<&'static str>,
    done: bool,
}

/// `GET runs/{id}/events/stream`: every entry of the run after `?after=` (or the
/// `Last-Event-ID` a reconnecting browser sends), then each one as it is appended, as
/// `entry` events whose id is the entry's `seq`; an `end` event once the run has ended.
async fn stream(
    State(app): State<App>,
    Path(id): Path<String>,
    q: Result<Query<AfterQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    let q = match query(q) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    let run = match run_id(&id) {
        Ok(run) => run,
        Err(error) => return failure(error),
    };
    let resumed = headers.get("last-event-id").and_then(|v| v.to_str().ok()?.parse().ok());
    let after = resumed.or(q.after);
    // Taken before the first read, so that no commit after it goes unnoticed.
    let changes = match app.home.held() {
        Some(held) => Some(held.journal.changes()),
        // A worker's commit reaches this process as a notice of the shared journal's.
        None => app.notices.as_ref().map(clio_journal::Journal::changes),
    };
    let first = app.blocking(move |home| api::entries_after(home, run, after)).await;
    let (entries, ended) = match first {
        Ok(first) => first,
        Err(error) => return failure(error),
    };
    let live = Live { app, changes, run, after, queue: entries.into(), ended, done: false };
    let events = futures::stream::unfold(live, next_event);
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

async fn next_event(mut live: Live) -> Option<(Result<Event, Infallible>, Live)> {
    loop {
        if live.done {
            return None;
        }
        if let Some(entry) = live.queue.pop_front() {
            let seq = entry.get("seq").and_then(Value::as_u64);
            live.after = seq.or(live.after);
            let mut event = Event::default().event("entry").data(entry.to_string());
            if let Some(seq) = seq {
                event = event.id(seq.to_string());
            }
            return Some((Ok(event), live));
        }
        if let Some(status) = live.ended {
            live.done = true;
            let data = json!({ "run": live.run, "status": status });
            return Some((Ok(Event::default().event("end").data(data.to_string())), live));
        }
        match live.changes.as_mut() {
            // A commit of any run wakes the stream; `POLL` only bounds the wait.
            Some(changes) => {
                let _ = tokio::time::timeout(POLL, changes.changed()).await;
            }
            None => tokio::time::sleep(POLL).await,
        }
        let (run, after) = (live.run, live.after);
        match live.app.blocking(move |home| api::entries_after(home, run, after)).await {
            Ok((entries, ended)) => {
                live.queue = entries.into();
                live.ended = ended;
            }
            Err(error) => {
                live.done = true;
                let data = error.error.to_json();
                return Some((Ok(Event::default().event("error").data(data.to_string())), live));
            }
        }
    }
}

/// The viewer's files, embedded in the binary.
const INDEX: &str = include_str!("../../assets/viewer/index.html");
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../assets/viewer/app.js")),
    ("dag.js", "text/javascript; charset=utf-8", include_str!("../../assets/viewer/dag.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("../../assets/viewer/style.css")),
];

/// The headers of every viewer file: nothing but this server's own files runs or loads
/// in the page, and no other site may frame it.
fn viewer_response(kind: &'static str, body: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    response
}

async fn page() -> Response {
    viewer_response("text/html; charset=utf-8", INDEX)
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => viewer_response(kind, body),
        None => {
            let error = CliError::usage(anyhow!("/assets/{name}: no such file of the viewer"));
            refusal(StatusCode::NOT_FOUND, error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert_eq!(query_token(Some("after=3&token=ff")).as_deref(), Some("ff"));
        assert_eq!(query_token(Some("after=3")), None);
    }
}
