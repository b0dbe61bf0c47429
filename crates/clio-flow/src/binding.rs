//! Script bindings: the host functions that answer a `run_code` script's reserved calls
//! (`__<binding>_<call>__`). The registry keeps them ([`crate::Registry::binding`]);
//! `run_code` answers a script's reserved call with the one that owns it.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::error::FlowError;

/// What a host call returns: its value, later.
pub type HostCallFuture = Pin<Box<dyn Future<Output = Result<Value, FlowError>> + Send>>;

/// A host function answering one reserved call of a script binding.
pub type HostCallHandler = Arc<dyn Fn(Value) -> HostCallFuture + Send + Sync>;

/// A script binding: the host functions that answer a script's reserved calls
/// `__<name>_<call>__`, without a tool call of their own.
///
/// Use a host call only for what a gated tool call already allowed: it asks no
/// permission. A host call registered under a name outside the binding's prefix is
/// never answered.
#[derive(Clone)]
pub struct Binding {
    decl: clio_plugins::ScriptBinding,
    calls: BTreeMap<String, HostCallHandler>,
    /// The plugin whose code answers its calls (empty: the host's own): an untrusted
    /// plugin's binding is refused.
    pub(crate) plugin: String,
}

impl Binding {
    /// Returns binding `name` with no host calls.
    pub fn new(name: impl Into<String>) -> Binding {
        Binding {
            decl: clio_plugins::ScriptBinding { name: name.into(), host_calls: Vec::new() },
            calls: BTreeMap::new(),
            plugin: String::new(),
        }
    }

    /// Returns the binding answering reserved call `call` (the full name,
    /// `__<binding>_<name>__`) with `handler`, which gets the call's arguments.
    pub fn host_call<F, Fut>(mut self, call: impl Into<String>, handler: F) -> Binding
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, FlowError>> + Send + 'static,
    {
        let call = call.into();
        self.decl.host_calls.push(call.clone());
        self.calls.insert(call, Arc::new(move |args| Box::pin(handler(args))));
        self
    }

    /// Returns the binding's name.
    pub fn name(&self) -> &str {
        &self.decl.name
    }

    /// Says whether the binding answers `call`: inside its prefix and registered.
    pub(crate) fn answers(&self, call: &str) -> bool {
        self.decl.owns(call) && self.calls.contains_key(call)
    }

    pub(crate) fn handler(&self, call: &str) -> Option<HostCallHandler> {
        self.calls.get(call).filter(|_| self.decl.owns(call)).cloned()
    }
}

impl fmt::Debug for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Binding")
            .field("name", &self.decl.name)
            .field("host_calls", &self.decl.host_calls)
            .finish()
    }
}
