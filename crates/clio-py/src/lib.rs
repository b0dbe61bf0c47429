//! `clio_agent._native`: the native module of the `clio-agent` Python package, which
//! backs the SDK's rules with the Rust crates that own them (SPEC §13): specs and ranges by
//! clio-spec, workflows by clio-workflow, hook events by clio-plugins.
//!
//! The bridge is thin on purpose: every function takes and returns text (JSON, or a plain
//! string), so that the rules are plain Rust tested as Rust (the `rules` module), and the Python
//! layer (`python/clio_agent/sdk/_bridge.py`) shapes values and errors the seeds' way. A
//! refusal raises `clio_agent._native.Refusal` with one argument, the JSON
//! `{"family", "kind", "message", "details"}`, which the Python layer raises again as the
//! seeds' class (`AgentDefinitionError`, `VersionRangeError`, `WorkflowError`,
//! `ValueError`) carrying the Rust error's fields.
//!
//! Built by maturin (`python/pyproject.toml`) with the stable ABI of CPython 3.10
//! (`abi3-py310`): one wheel serves every CPython from 3.10 on.

use pyo3::prelude::*;

mod plugins;
mod rules;

use rules::Rule;

pyo3::create_exception!(
    _native,
    Refusal,
    pyo3::exceptions::PyValueError,
    "A rule of CLIO's Rust crates refused a value; the one argument is the refusal's JSON."
);

/// Turns a rule's result into Python's: a refusal raises [`Refusal`].
fn raised<T>(result: Rule<T>) -> PyResult<T> {
    result.map_err(|refusal: Box<rules::Refusal>| {
        PyErr::new::<Refusal, _>(rules::refusal_json(&refusal))
    })
}

/// Freezes an agent definition (the JSON `AgentDef::from_json` reads) from `source`;
/// returns the spec's JSON.
#[pyfunction]
fn agent_spec(definition: &str, source: &str) -> PyResult<String> {
    raised(rules::agent_spec(definition, source))
}

/// Reads a spec's JSON back, checking its checksum; returns it as Rust writes it.
#[pyfunction]
fn spec_verify(text: &str) -> PyResult<String> {
    raised(rules::spec_verify(text))
}

/// Parses a plugin reference: `{"id", "marketplace", "range"}`.
#[pyfunction]
fn plugin_ref(text: &str) -> PyResult<String> {
    raised(rules::plugin_ref(text))
}

/// Whether a plugin reference accepts a version.
#[pyfunction]
fn plugin_ref_accepts(reference: &str, version: &str) -> PyResult<bool> {
    raised(rules::plugin_ref_accepts(reference, version))
}

/// Parses a version range: `{"text", "desugared"}`.
#[pyfunction]
fn range_parse(text: &str) -> PyResult<String> {
    raised(rules::range_parse(text))
}

/// Whether a version range accepts a version.
#[pyfunction]
fn range_accepts(range: &str, version: &str) -> PyResult<bool> {
    raised(rules::range_accepts(range, version))
}

/// Checks a full plugin version; returns it as semver prints it.
#[pyfunction]
fn version_parse(text: &str) -> PyResult<String> {
    raised(rules::version_parse(text))
}

/// Checks an id (plugin, marketplace, agent, layer).
#[pyfunction]
fn id_check(text: &str) -> PyResult<()> {
    raised(rules::id_check(text))
}

/// Reads a `Requires` mapping; returns it whole.
#[pyfunction]
fn requires(text: &str) -> PyResult<String> {
    raised(rules::requires(text))
}

/// `Requires::union`.
#[pyfunction]
fn requires_union(a: &str, b: &str) -> PyResult<String> {
    raised(rules::requires_union(a, b))
}

/// Reads a `Prefers` mapping; returns it whole.
#[pyfunction]
fn prefers(text: &str) -> PyResult<String> {
    raised(rules::prefers(text))
}

/// `Prefers::union`: `mine`, unset fields from `fallback`.
#[pyfunction]
fn prefers_union(mine: &str, fallback: &str) -> PyResult<String> {
    raised(rules::prefers_union(mine, fallback))
}

/// Checks a workflow as `clio workflow check` does; returns its JSON.
#[pyfunction]
fn workflow(text: &str) -> PyResult<String> {
    raised(rules::workflow(text))
}

/// The hook events: `[{"key", "name", "power"}]`.
#[pyfunction]
fn hook_events() -> String {
    rules::hook_events()
}

/// A plugin declaration (the manifest's shape, as JSON) described by clio-plugins.
#[pyfunction]
fn plugin_describe(declaration: &str) -> PyResult<String> {
    raised(plugins::describe(declaration))
}

/// Checks a plugin folder or a marketplace as `clio plugin check` does (clio-plugins'
/// `check`); returns `{ok, problems, flows, text}`, `text` the report as the CLI prints it.
#[pyfunction]
fn plugin_check(path: &str) -> String {
    let report = clio_plugins::check(std::path::Path::new(path));
    let mut json = report.to_json();
    json["text"] = serde_json::Value::String(report.render());
    json.to_string()
}

/// Runs the `clio` command in this process (clio-cli's library, the Rust runtime itself,
/// not a subprocess) with `args` (without the program name), the interpreter's lock
/// released while it runs; returns its exit code, what it wrote on stdout and on stderr.
/// The embedded runtime of `clio_agent.runtime` drives runs with it, on the same journal
/// a `clio` command uses.
#[pyfunction]
fn clio(py: Python<'_>, args: Vec<String>) -> (u8, String, String) {
    py.detach(|| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv = std::iter::once("clio".to_owned()).chain(args);
        let code = clio_cli::run(argv, &mut out, &mut err);
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    })
}

/// The native half of `clio_agent`: CLIO's rules from its Rust crates.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Refusal", m.py().get_type::<Refusal>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(agent_spec, m)?)?;
    m.add_function(wrap_pyfunction!(spec_verify, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_ref, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_ref_accepts, m)?)?;
    m.add_function(wrap_pyfunction!(range_parse, m)?)?;
    m.add_function(wrap_pyfunction!(range_accepts, m)?)?;
    m.add_function(wrap_pyfunction!(version_parse, m)?)?;
    m.add_function(wrap_pyfunction!(id_check, m)?)?;
    m.add_function(wrap_pyfunction!(requires, m)?)?;
    m.add_function(wrap_pyfunction!(requires_union, m)?)?;
    m.add_function(wrap_pyfunction!(prefers, m)?)?;
    m.add_function(wrap_pyfunction!(prefers_union, m)?)?;
    m.add_function(wrap_pyfunction!(workflow, m)?)?;
    m.add_function(wrap_pyfunction!(hook_events, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_describe, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_check, m)?)?;
    m.add_function(wrap_pyfunction!(clio, m)?)?;
    Ok(())
}
