//! Problems and reports: what `plugin check` and plugin loading say is wrong, each with
//! a stable code, the file, the line where there is one, and the field.
//!
//! Codes are part of the public contract (tests, CI scripts and the docs table in
//! `docs/plugins.md` name them), so a code is never renamed; a new kind of problem gets a
//! new code.

use std::fmt;

use serde_json::{Value as Json, json};

macro_rules! problem_codes {
    ($($variant:ident = $code:literal, $severity:ident, $doc:literal;)*) => {
        /// The stable code of a [`Problem`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ProblemCode {
            $(#[doc = $doc] $variant,)*
        }

        impl ProblemCode {
            /// Every code, in documentation order.
            pub const ALL: &'static [ProblemCode] = &[$(ProblemCode::$variant,)*];

            /// Returns the code as written in reports, such as `unknown_field`.
            pub fn as_str(self) -> &'static str {
                match self { $(ProblemCode::$variant => $code,)* }
            }

            /// Returns how serious a problem with this code is.
            pub fn severity(self) -> Severity {
                match self { $(ProblemCode::$variant => Severity::$severity,)* }
            }

            /// Returns the one-line description used in `docs/plugins.md`.
            pub fn description(self) -> &'static str {
                match self { $(ProblemCode::$variant => $doc,)* }
            }
        }
    };
}

problem_codes! {
    ParseError = "parse_error", Error, "A TOML or JSON file does not parse.";
    UnknownField = "unknown_field", Error, "A field that the format does not have.";
    WrongType = "wrong_type", Error, "A field holds the wrong kind of value.";
    MissingField = "missing_field", Error, "A required field is absent.";
    InvalidId = "invalid_id", Error, "An id or name breaks its grammar.";
    InvalidVersion = "invalid_version", Error, "A version is not a full semver version.";
    InvalidReference = "invalid_reference", Error, "A plugin reference or range does not parse.";
    InvalidOption = "invalid_option", Error, "A `defer`, `callers` or `permission` value is not one of the allowed values.";
    UnknownHookEvent = "unknown_hook_event", Error, "A hook names an event that is not a key of HOOK_EVENTS.";
    HookCycle = "hook_cycle", Error, "Hooks' `before`/`after` orderings form a cycle.";
    DuplicateTool = "duplicate_tool", Error, "A plugin declares the same tool name twice.";
    DuplicateId = "duplicate_id", Error, "Two hooks, subagents, flows, servers or bindings of one plugin share an id.";
    PromptMissing = "prompt_missing", Error, "A prompt file does not exist.";
    PathOutside = "path_outside", Error, "A path is absolute or leaves the folder it must stay in.";
    ExecutableMissing = "executable_missing", Error, "A tool's or hook's command file does not exist.";
    UnknownMcpServer = "unknown_mcp_server", Error, "A tool names an MCP server the plugin does not declare.";
    HostCallOutsideBinding = "host_call_outside_binding", Error, "A host call's name is not `__<binding>_<name>__`.";
    SubagentUnknownTool = "subagent_unknown_tool", Error, "A subagent names a tool that none of its plugins has.";
    SubagentUnknownPlugin = "subagent_unknown_plugin", Error, "A subagent names a plugin that is neither built in nor available.";
    StructuredOutputInvalid = "structured_output_invalid", Error, "A subagent's structured output is not a JSON-schema object of the supported subset.";
    WorkflowInvalid = "workflow_invalid", Error, "A `flows/*.json` workflow file has the wrong structure.";
    PythonPluginInvalid = "python_plugin_invalid", Error, "`plugin.py` does not parse, declares its plugin with values that are not literals, or declares one wrongly.";
    PythonFlowInvalid = "python_flow_invalid", Error, "A `flows/*.py` flow file does not parse, or declares a flow wrongly (no `id`, an id twice, an option of the wrong type).";
    RequiresUnresolved = "requires_unresolved", Error, "A plugin's or agent's references cannot all be satisfied.";
    RequiresExternal = "requires_external", Warning, "A plugin checked on its own requires a plugin that only its marketplace can supply.";
    FlowMissing = "flow_missing", Error, "An agent or subagent selects a flow that no plugin provides.";
    NotAPlugin = "not_a_plugin", Error, "A folder without `ai.iowarp.clio/` is not a CLIO plugin.";
    SourceInvalid = "source_invalid", Error, "A marketplace entry's `source` is not a relative path inside the marketplace.";
    SourceMissing = "source_missing", Error, "A marketplace entry's `source` does not exist.";
    ListedTwice = "listed_twice", Error, "A marketplace lists the same name and version twice.";
    NameMismatch = "name_mismatch", Error, "A marketplace entry's `name` differs from the plugin's id.";
    VersionMismatch = "version_mismatch", Error, "A marketplace entry's `version` differs from the plugin's version.";
    AgentInvalid = "agent_invalid", Error, "A marketplace agent's definition does not freeze into a spec.";
    IoError = "io_error", Error, "A file or folder cannot be read.";
    UnsupportedFile = "unsupported_file", Error, "A plugin folder holds a symbolic link, named pipe, socket or device, which trust cannot pin (`plugin trust` refuses it).";
}

impl fmt::Display for ProblemCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How serious a problem is: errors make a report not ok, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// The plugin or marketplace cannot be installed as it is.
    Error,
    /// Worth knowing, but installing works.
    Warning,
}

impl Severity {
    /// Returns `error` or `warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One thing wrong with a plugin folder or marketplace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The stable code.
    pub code: ProblemCode,
    /// The file, relative to the checked folder, with `/` separators.
    pub file: String,
    /// The 1-based line, where the format knows it.
    pub line: Option<u32>,
    /// The field path, such as `tools[1].permission`; empty for the file as a whole.
    pub field: String,
    /// What is wrong, lowercase, without a trailing period.
    pub message: String,
}

/// Reads the text file at `path` with [`clio_spec::read_input`]'s bounds (a regular file
/// only, at most 64 MiB, UTF-8 without a byte order mark); when it cannot be read, records
/// a problem on `file` and returns `None`, so a check goes on with the other files: an
/// `io_error` ("cannot read the `what`: it is a named pipe (FIFO), not a regular file"),
/// or a `parse_error` at its line for text that is not UTF-8.
pub(crate) fn read_or_report(
    path: &std::path::Path,
    file: String,
    what: &str,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    match clio_spec::read_input(path) {
        Ok(text) => Some(text),
        Err(err) => {
            problems.push(input_problem(&err, file, what));
            None
        }
    }
}

/// The problem for an input file `file` (the `what`: manifest, marketplace, workflow
/// file, ...) that [`clio_spec::read_input`] refused.
pub(crate) fn input_problem(err: &clio_spec::InputError, file: String, what: &str) -> Problem {
    use clio_spec::InputError;
    let (code, line, message) = match err {
        InputError::Io { source, .. } => {
            (ProblemCode::IoError, None, format!("cannot read the {what}: {source}"))
        }
        InputError::NotAFile { kind, .. } => (
            ProblemCode::IoError,
            None,
            format!("cannot read the {what}: it is {kind}, not a regular file"),
        ),
        InputError::TooLarge { size, limit, .. } => (
            ProblemCode::IoError,
            None,
            format!(
                "cannot read the {what}: it is {size} bytes or more, over the limit of {limit} bytes ({} MiB)",
                limit / (1024 * 1024)
            ),
        ),
        InputError::InvalidUtf8 { offset, line, column, .. } => (
            ProblemCode::ParseError,
            u32::try_from(*line).ok(),
            format!(
                "invalid UTF-8 at byte offset {offset} (line {line}, column {column}): the {what} must be UTF-8 text"
            ),
        ),
        InputError::ByteOrderMark { .. } => (
            ProblemCode::ParseError,
            Some(1),
            format!(
                "the {what} starts with a UTF-8 byte order mark (bytes EF BB BF at byte offset 0, line 1, column 1): save it as UTF-8 without a BOM"
            ),
        ),
    };
    Problem { code, file, line, field: String::new(), message }
}

impl Problem {
    /// Returns the problem's severity, which follows from its code.
    pub fn severity(&self) -> Severity {
        self.code.severity()
    }

    /// Returns the problem as JSON: `code`, `severity`, `file`, `line`, `field`, `message`.
    pub fn to_json(&self) -> Json {
        json!({
            "code": self.code.as_str(),
            "severity": self.severity().as_str(),
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "message": self.message,
        })
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}] {}", self.severity().as_str(), self.code, self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.field.is_empty() {
            write!(f, " {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The result of `check`: whether the plugin or marketplace is fine, and every problem.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// True when no problem is an error.
    pub ok: bool,
    /// Every problem found, sorted by file, line, field and code.
    pub problems: Vec<Problem>,
    /// The flows written in Python the check read (from their syntax trees), in file
    /// order, so that a person sees what each `flows/*.py` declares.
    pub flows: Vec<FlowListing>,
}

/// A flow written in Python, as `plugin check` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowListing {
    /// The plugin's id.
    pub plugin: String,
    /// The `.py` file, relative to the checked folder.
    pub file: String,
    /// The line of its `class` statement.
    pub line: u32,
    /// The flow's id.
    pub id: String,
    /// Its class.
    pub class: String,
    /// What it does.
    pub description: String,
    /// Its railroad diagram, if it declares one.
    pub shape: String,
    /// Its options, each `{name, type, default, line}`.
    pub options: Vec<Json>,
}

impl FlowListing {
    /// Returns the listing as one line, then indented lines for the shape and options.
    fn render(&self) -> String {
        let mut out =
            format!("flow {} ({}:{}, class {})", self.id, self.file, self.line, self.class);
        if !self.description.is_empty() {
            out.push_str(&format!(": {}", self.description.lines().next().unwrap_or_default()));
        }
        out.push('\n');
        if !self.shape.is_empty() {
            out.push_str(&format!("  shape: {}\n", self.shape));
        }
        for option in &self.options {
            let name = option.get("name").and_then(Json::as_str).unwrap_or("?");
            let ty = option.get("type").map(describe_type).unwrap_or_default();
            let default = option.get("default").map(Json::to_string).unwrap_or_default();
            out.push_str(&format!("  option {name}: {ty} = {default}\n"));
        }
        out
    }

    fn to_json(&self) -> Json {
        json!({
            "plugin": self.plugin,
            "file": self.file,
            "line": self.line,
            "id": self.id,
            "class": self.class,
            "description": self.description,
            "shape": self.shape,
            "options": self.options,
        })
    }
}

/// Returns an option type given as data (`{"type": "int", "min": 1, ...}`) as a person
/// reads it: `int (1..)`, `list[str]`, `one of "a", "b"`, `str or none`.
fn describe_type(ty: &Json) -> String {
    let kind = ty.get("type").and_then(Json::as_str).unwrap_or("any");
    match kind {
        "int" => {
            let bound = |k: &str| ty.get(k).and_then(Json::as_i64).map(|n| n.to_string());
            match (bound("min"), bound("max")) {
                (None, None) => "int".into(),
                (min, max) => {
                    format!("int ({}..{})", min.unwrap_or_default(), max.unwrap_or_default())
                }
            }
        }
        "one_of" => {
            let values: Vec<String> = ty
                .get("values")
                .and_then(Json::as_array)
                .map(|v| v.iter().map(Json::to_string).collect())
                .unwrap_or_default();
            format!("one of {}", values.join(", "))
        }
        "list" => {
            format!("list[{}]", ty.get("items").map(describe_type).unwrap_or_else(|| "any".into()))
        }
        "optional" => format!(
            "{} or none",
            ty.get("inner").map(describe_type).unwrap_or_else(|| "any".into())
        ),
        other => other.to_owned(),
    }
}

impl Report {
    /// Builds a report from problems, sorting them and deriving `ok`.
    pub fn new(mut problems: Vec<Problem>) -> Report {
        problems.sort_by(|a, b| {
            (&a.file, a.line, &a.field, a.code, &a.message)
                .cmp(&(&b.file, b.line, &b.field, b.code, &b.message))
        });
        problems.dedup();
        let ok = problems.iter().all(|p| p.severity() != Severity::Error);
        Report { ok, problems, flows: Vec::new() }
    }

    /// Returns the report as text: one line per problem, then a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for flow in &self.flows {
            out.push_str(&flow.render());
        }
        for problem in &self.problems {
            out.push_str(&problem.to_string());
            out.push('\n');
        }
        let errors = self.problems.iter().filter(|p| p.severity() == Severity::Error).count();
        let warnings = self.problems.len() - errors;
        if self.ok {
            out.push_str(&format!("ok ({warnings} warning(s))\n"));
        } else {
            out.push_str(&format!("not ok: {errors} error(s), {warnings} warning(s)\n"));
        }
        out
    }

    /// Returns the report as JSON: `{ok, problems}`.
    pub fn to_json(&self) -> Json {
        json!({
            "ok": self.ok,
            "problems": self.problems.iter().map(Problem::to_json).collect::<Vec<_>>(),
            "flows": self.flows.iter().map(FlowListing::to_json).collect::<Vec<_>>(),
        })
    }
}

/// Collects problems for one file while it is read.
pub(crate) struct Sink<'a> {
    pub(crate) file: String,
    pub(crate) problems: &'a mut Vec<Problem>,
}

impl Sink<'_> {
    /// Records a problem in this sink's file.
    pub(crate) fn push(
        &mut self,
        code: ProblemCode,
        field: impl Into<String>,
        line: Option<u32>,
        message: impl Into<String>,
    ) {
        self.problems.push(Problem {
            code,
            file: self.file.clone(),
            line,
            field: field.into(),
            message: message.into(),
        });
    }
}
