//! `clio plugin check|install|list|trust|remove`: plugin folders and marketplaces, and
//! the store and trust list under `$CLIO_HOME`.

use std::io::Write;

use anyhow::anyhow;
use clio_plugins::{
    Installed, Marketplace, Store, check as check_path, load_plugin, plugin_digest,
};
use clio_spec::{PluginRef, parse_plugin_version};

use super::write_json;
use crate::args::{
    JsonArgs, PluginCheckArgs, PluginInstallArgs, PluginTrustArgs, PluginVersionArgs,
};
use crate::error::CliError;
use crate::home::Home;
use crate::launch::agent_spec;

/// Checks a plugin folder or marketplace; exit 1 when it has errors.
pub(super) fn check(args: &PluginCheckArgs, out: &mut dyn Write) -> Result<(), CliError> {
    // A path that is not there is a mistake in the command, not a plugin with a problem.
    if !args.path.exists() {
        return Err(CliError::user(anyhow!("{}: no such file or folder", args.path.display()))
            .hint("name a plugin folder (with ai.iowarp.clio/) or a marketplace folder (with .claude-plugin/marketplace.json)"));
    }
    let report = check_path(&args.path);
    if args.json {
        write_json(out, &report.to_json())?;
    } else {
        write!(out, "{}", report.render())?;
    }
    if report.ok {
        Ok(())
    } else {
        Err(CliError::user(anyhow!("{}: the check found errors", args.path.display())))
    }
}

/// Installs references (or an agent's plugins) from a marketplace, transitively.
pub(super) fn install(
    home: &Home,
    args: &PluginInstallArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let market = Marketplace::load(&args.marketplace).map_err(|error| {
        CliError::user(error).hint("a marketplace is a folder with .claude-plugin/marketplace.json")
    })?;
    let mut references = Vec::new();
    let mut root = "the command line".to_owned();
    if let Some(agent) = &args.agent {
        let spec = agent_spec(agent)?;
        root = format!("agent {}", spec.id());
        references.extend(spec.plugin_refs());
    }
    for text in &args.references {
        references.push(PluginRef::parse(text).map_err(CliError::usage)?);
    }
    if references.is_empty() {
        return Err(CliError::usage(anyhow!("name the plugins to install, or pass --agent FILE")));
    }
    let store = Store::new(home.root());
    let installed = store
        .install_references(&market, &root, &references)
        .map_err(|error| CliError::user(error).hint(offered(&market)))?;
    if args.json {
        let value: Vec<_> = installed.iter().map(installed_json).collect();
        return write_json(out, &serde_json::Value::Array(value));
    }
    if installed.is_empty() {
        writeln!(out, "nothing to install: every plugin needed is built in")?;
    }
    for plugin in &installed {
        writeln!(
            out,
            "installed {}/{} {}  digest {}",
            plugin.marketplace, plugin.id, plugin.version, &plugin.digest
        )?;
    }
    if !installed.is_empty() {
        writeln!(
            out,
            "hint: trust a plugin to let its code run: `clio plugin trust MARKETPLACE/ID VERSION`"
        )?;
    }
    Ok(())
}

/// The most `id@version` pairs a hint names; a larger marketplace is summed up after them.
const OFFERED_SHOWN: usize = 24;

/// Returns a hint naming what `market` offers, as `id@version` pairs (the first
/// [`OFFERED_SHOWN`], then how many more: a hint is one readable line, not a listing).
fn offered(market: &Marketplace) -> String {
    let listed: Vec<String> =
        market.plugins.iter().map(|l| format!("{}@{}", l.plugin.id, l.plugin.version)).collect();
    if listed.is_empty() {
        return format!("marketplace {} lists no plugins", market.name);
    }
    let shown = listed.len().min(OFFERED_SHOWN);
    let more = match listed.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!("marketplace {} offers: {}{more}", market.name, listed[..shown].join(", "))
}

fn installed_json(plugin: &Installed) -> serde_json::Value {
    serde_json::json!({
        "marketplace": plugin.marketplace,
        "id": plugin.id,
        "version": plugin.version.to_string(),
        "digest": plugin.digest,
        "path": plugin.path.display().to_string(),
        "source": plugin.source.display().to_string(),
    })
}

/// Lists installed plugins and whether each is trusted.
pub(super) fn list(home: &Home, args: &JsonArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let store = Store::new(home.root());
    let installed = store.list().map_err(CliError::from)?;
    let mut rows = Vec::new();
    for plugin in &installed {
        let trusted = store.is_trusted(plugin).map_err(CliError::from)?;
        rows.push((plugin, trusted));
    }
    if args.json {
        let value: Vec<_> = rows
            .iter()
            .map(|(plugin, trusted)| {
                let mut value = installed_json(plugin);
                value["trusted"] = serde_json::Value::Bool(*trusted);
                value
            })
            .collect();
        return write_json(out, &serde_json::Value::Array(value));
    }
    if rows.is_empty() {
        writeln!(out, "no plugins installed in {}", home.root().display())?;
    }
    for (plugin, trusted) in rows {
        let trust = if trusted { "trusted" } else { "not trusted" };
        writeln!(out, "{}/{} {}  {trust}", plugin.marketplace, plugin.id, plugin.version)?;
    }
    Ok(())
}

/// Finds the installed plugin named by `args`.
fn find_installed(store: &Store, args: &PluginVersionArgs) -> Result<Installed, CliError> {
    let (marketplace, id) = args.plugin.split_once('/').ok_or_else(|| {
        CliError::usage(anyhow!("name the plugin as MARKETPLACE/ID, such as examples/materials"))
    })?;
    let version = parse_plugin_version(&args.plugin_version).map_err(CliError::usage)?;
    let installed = store.list().map_err(CliError::from)?;
    installed
        .into_iter()
        .find(|p| p.marketplace == marketplace && p.id == id && p.version == version)
        .ok_or_else(|| {
            CliError::user(anyhow!("{}/{} {} is not installed", marketplace, id, version))
                .hint("`clio plugin list` shows what is installed")
        })
}

/// Trusts an installed plugin version, or a plugin folder, at its current content.
pub(super) fn trust(
    home: &Home,
    args: &PluginTrustArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = Store::new(home.root());
    let Some(version) = &args.plugin_version else {
        let folder = std::path::Path::new(&args.plugin);
        if args.json {
            // The human line goes nowhere: the JSON is the whole report.
            let entry = trust_folder(&store, folder, &mut std::io::sink())?;
            let value = serde_json::json!({
                "id": entry.id, "version": entry.version, "digest": entry.digest,
                "path": folder.display().to_string(),
            });
            return write_json(out, &value);
        }
        trust_folder(&store, folder, out)?;
        return Ok(());
    };
    let named = PluginVersionArgs {
        plugin: args.plugin.clone(),
        plugin_version: version.clone(),
        json: args.json,
    };
    let plugin = find_installed(&store, &named)?;
    let entry = store.trust(&plugin).map_err(CliError::from)?;
    if args.json {
        let mut value = installed_json(&plugin);
        value["digest"] = serde_json::Value::String(entry.digest.clone());
        value["trusted"] = serde_json::Value::Bool(true);
        return write_json(out, &value);
    }
    writeln!(
        out,
        "trusted {}/{} {} at digest {}",
        plugin.marketplace, entry.id, entry.version, entry.digest
    )?;
    Ok(())
}

/// Trusts the plugin in `folder` (as passed to `--plugin`) at the content it has now:
/// its id, version and the digest of the folder go on the trust list.
pub(super) fn trust_folder(
    store: &Store,
    folder: &std::path::Path,
    out: &mut dyn Write,
) -> Result<clio_plugins::TrustEntry, CliError> {
    if !folder.is_dir() {
        return Err(CliError::usage(anyhow!(
            "{} is no plugin folder; name an installed plugin as MARKETPLACE/ID VERSION",
            folder.display()
        )));
    }
    let plugin = load_plugin(folder).map_err(|e| {
        CliError::from(e)
            .hint(format!("`clio plugin check {}` lists every problem", folder.display()))
    })?;
    let digest = plugin_digest(&plugin).map_err(CliError::user)?;
    let entry =
        store.trust_at(&plugin.id, &plugin.version.to_string(), &digest).map_err(CliError::from)?;
    writeln!(
        out,
        "trusted {} {} ({}) at digest {}",
        entry.id,
        entry.version,
        folder.display(),
        entry.digest
    )?;
    Ok(entry)
}

/// Removes an installed plugin version.
pub(super) fn remove(
    home: &Home,
    args: &PluginVersionArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = Store::new(home.root());
    let plugin = find_installed(&store, args)?;
    store.remove(&plugin.marketplace, &plugin.id, &plugin.version).map_err(CliError::from)?;
    if args.json {
        return write_json(out, &installed_json(&plugin));
    }
    writeln!(out, "removed {}/{} {}", plugin.marketplace, plugin.id, plugin.version)?;
    Ok(())
}
