//! Freezes an agent definition into a checksummed spec and verifies it, with `clio-spec`
//! alone: what a tool that pins agents in a registry or a lock file needs.
//!
//! The definition has two layers (`reviewer` extends `researcher`), so the frozen spec
//! shows how layers merge: plugins are collected, requirements take the stricter value,
//! preferences the nearer layer's. The frozen JSON is verified on the way back in, and a
//! copy changed after freezing is refused with the checksum it should have had.
//!
//! Run it with `cargo run -p clio-spec --example freeze_and_verify`.

#![allow(clippy::print_stdout, reason = "an example program: its output is the point")]

use clio_spec::{AgentDef, AgentDefinitionError, AgentSpec, PluginRef};

const DEFINITION: &str = r#"
id = "reviewer"
version = "1.0.0"
name = "Paper reviewer"
role = "Reviews a manuscript's methods and claims against the cited evidence."
extends = "researcher"
plugins = ["clio/pdf@^1.2", "clio/citations@~0.4"]

[requires]
context_tokens = 64000

[prefers]
effort = "high"

[[layer]]
id = "researcher"
description = "Finds and reads the literature on a question."
plugins = ["core", "memory", "clio/search@>=2.1 <4"]

[layer.requires]
tool_calling = true
context_tokens = 32000
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Freeze: parse the layers, merge them, and checksum the canonical JSON.
    let def = AgentDef::from_toml(DEFINITION, "reviewer.toml")?;
    let spec = def.spec()?;
    println!("froze {} {} from {}", spec.id(), spec.version(), spec.source());
    println!("  layers:   {}", spec.layers().join(" -> "));
    let requires = spec.requires();
    println!(
        "  requires: tool calling {}, {} context tokens",
        requires.tool_calling, requires.context_tokens
    );
    println!("  checksum: {}", spec.checksum());
    for plugin in spec.plugins() {
        let reference = PluginRef::parse(&plugin.reference)?;
        let name = match reference.marketplace() {
            Some(marketplace) => format!("{marketplace}/{}", reference.id()),
            None => reference.id().to_owned(),
        };
        let range = reference.range().map_or("any version".to_owned(), ToString::to_string);
        println!("  plugin {name:<16} {range:<12} (layer {})", plugin.layer);
    }
    assert!(spec.requires().tool_calling, "the researcher layer asks for tool calling");
    assert_eq!(spec.requires().context_tokens, 64000, "the stricter requirement wins");

    // Verify: the frozen JSON, as a registry would store it, reads back to the same spec.
    let frozen = serde_json::to_string_pretty(&spec.to_json())?;
    let verified = AgentSpec::from_json(&frozen)?;
    assert_eq!(verified, spec);
    println!("verified the frozen spec ({} bytes of JSON): checksum matches", frozen.len());

    // A spec changed after it was frozen is refused, naming both checksums.
    let mut tampered = spec.to_json();
    tampered["requires"]["context_tokens"] = serde_json::json!(1_000_000);
    match AgentSpec::from_json(&tampered.to_string()) {
        Err(AgentDefinitionError::ChecksumMismatch { expected, actual }) => {
            println!("refused a changed copy: it says {expected}, its content hashes to {actual}");
        }
        other => return Err(format!("a changed spec was not refused: {other:?}").into()),
    }
    Ok(())
}
