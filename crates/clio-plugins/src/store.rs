//! The install and trust store under a home folder the caller passes (the CLI passes
//! `$CLIO_HOME`, default `~/.clio`; this crate never reads the environment).
//!
//! Layout, all under `<home>/`:
//! - `plugins/<marketplace>/<id>/<version>/`: a copy of the plugin's folder;
//! - `plugins/<marketplace>/<id>/<version>.install.json`: `{marketplace, id, version,
//!   source, digest}`, where `source` is the folder it was copied from;
//! - `trust.json`: `{"trusted": [{id, version, digest}]}`.
//!
//! The content digest ([`digest_folder`]) is `sha256:` and the hex SHA-256 of every
//! regular file under the folder, in byte order of their `/`-separated relative paths,
//! each contributing `path NUL x-or-dash NUL decimal-length NUL bytes` (`x` when the
//! file is executable on Unix). Every regular file counts, `.git` included: a tool may run
//! or read anything in its plugin folder, and a changed `.git/payload` must not keep a
//! trust given to other content. Symbolic links, named pipes, sockets and devices are
//! refused (`plugin check` reports the same entries as `unsupported_file`). Trust is keyed by id, version *and* digest, and [`Store::is_trusted`]
//! recomputes the digest of the installed copy, so a plugin that changed is no longer
//! trusted.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use semver::Version;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use clio_spec::PluginRef;

use crate::manifest::LoadError;
use crate::marketplace::Marketplace;
use crate::plugin::Plugin;
use crate::resolve::{Candidate, Index, Resolution, ResolveError, resolve};

/// One installed plugin version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// The marketplace it came from.
    pub marketplace: String,
    /// Its id.
    pub id: String,
    /// Its version.
    pub version: Version,
    /// The folder it was copied from.
    pub source: PathBuf,
    /// The content digest recorded at install.
    pub digest: String,
    /// Where the copy is.
    pub path: PathBuf,
}

/// One trusted plugin version and the content it was trusted with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    /// The plugin's id.
    pub id: String,
    /// Its version.
    pub version: String,
    /// Its content digest when it was trusted.
    pub digest: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallRecord {
    marketplace: String,
    id: String,
    version: String,
    source: PathBuf,
    digest: String,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    trusted: Vec<TrustEntry>,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or folder could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A plugin folder holds a symbolic link, which is not installed.
    #[error("{}: symbolic links are not allowed in a plugin folder", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A plugin folder holds a named pipe, socket or device, whose content no digest can
    /// pin (and reading a pipe would block).
    #[error("{}: {kind} is not allowed in a plugin folder, only regular files and folders", path.display())]
    NotAFile {
        /// The entry.
        path: PathBuf,
        /// What it is: "a named pipe (FIFO)", "a socket", "a character device", ...
        kind: &'static str,
    },
    /// A store file cannot be read: not a regular file, too large, not UTF-8, or an I/O
    /// error (the message names the file).
    #[error(transparent)]
    Read(#[from] clio_spec::InputError),
    /// A store file does not have the expected format.
    #[error("{}: {message}", path.display())]
    Record {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The marketplace does not list that plugin version.
    #[error("marketplace {marketplace} does not list {id} {version}")]
    NotListed {
        /// The marketplace.
        marketplace: String,
        /// The plugin.
        id: String,
        /// The version.
        version: Version,
    },
    /// That plugin version is not installed.
    #[error("{marketplace}/{id} {version} is not installed")]
    NotInstalled {
        /// The marketplace.
        marketplace: String,
        /// The plugin.
        id: String,
        /// The version.
        version: Version,
    },
}

/// Why the plugins a run loads could not be chosen ([`Store::choose_for_run`]).
#[derive(Debug, thiserror::Error)]
pub enum ChooseError {
    /// No choice satisfies every range, told as a chain of who needs what.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An installed plugin that might be chosen does not load.
    #[error("installed plugin {}: {source}", path.display())]
    Load {
        /// Its folder in the store.
        path: PathBuf,
        /// Why it does not load.
        #[source]
        source: LoadError,
    },
}

/// Why installing an agent's plugins failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The references cannot be resolved.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// Copying or recording failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

/// The store under one home folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    home: PathBuf,
}

impl Store {
    /// Opens the store under `home`; nothing is read or created until it is used.
    pub fn new(home: &Path) -> Store {
        Store { home: home.to_path_buf() }
    }

    /// Returns the home folder.
    pub fn home(&self) -> &Path {
        &self.home
    }

    fn slot(&self, marketplace: &str, id: &str, version: &Version) -> (PathBuf, PathBuf) {
        let dir = self.home.join("plugins").join(marketplace).join(id);
        (dir.join(version.to_string()), dir.join(format!("{version}.install.json")))
    }

    /// Installs plugin `id` at `version` from `market`: copies its folder and records
    /// its source and digest, replacing an earlier copy of the same version.
    pub fn install(
        &self,
        market: &Marketplace,
        id: &str,
        version: &Version,
    ) -> Result<Installed, StoreError> {
        let listed = market.plugin(id, version).ok_or_else(|| StoreError::NotListed {
            marketplace: market.name.clone(),
            id: id.to_owned(),
            version: version.clone(),
        })?;
        let source = market.root.join(&listed.source);
        let (path, record_path) = self.slot(&market.name, id, version);
        let staging = path.with_extension("installing");
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
        }
        copy_folder(&source, &staging)?;
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io(&path))?;
        }
        std::fs::rename(&staging, &path).map_err(io(&path))?;
        let digest = digest_folder(&path)?;
        let record = InstallRecord {
            marketplace: market.name.clone(),
            id: id.to_owned(),
            version: version.to_string(),
            source: source.clone(),
            digest: digest.clone(),
        };
        write_json(&record_path, &record)?;
        Ok(Installed {
            marketplace: market.name.clone(),
            id: id.to_owned(),
            version: version.clone(),
            source,
            digest,
            path,
        })
    }

    /// Installs every plugin of `resolution` that comes from `market` (built-in plugins
    /// need no copy).
    pub fn install_resolution(
        &self,
        market: &Marketplace,
        resolution: &Resolution,
    ) -> Result<Vec<Installed>, StoreError> {
        resolution
            .plugins
            .iter()
            .filter(|r| r.marketplace == market.name)
            .map(|r| self.install(market, &r.id, &r.version))
            .collect()
    }

    /// Resolves `references` (needed by `root`, such as `agent x`) against `market` and
    /// the built-in plugins, and installs the result.
    pub fn install_references(
        &self,
        market: &Marketplace,
        root: &str,
        references: &[PluginRef],
    ) -> Result<Vec<Installed>, InstallError> {
        let resolution = resolve(&market.index(), root, references)?;
        Ok(self.install_resolution(market, &resolution)?)
    }

    /// Chooses the installed plugins a run of `root` (such as `agent x`) loads: one version
    /// of every plugin `references` need, transitively (the `requires` of each candidate
    /// count, so a plugin's own needs are met too), every range satisfied, the newest
    /// preferred ([`resolve`]). The folders in `given` (passed by hand) are the only
    /// candidates for their ids, from any marketplace ([`LOCAL`](crate::LOCAL)); built-in
    /// plugins need nothing installed. Returns the installed versions chosen, by id.
    ///
    /// Only the installed plugins the references can reach are loaded, so a broken plugin
    /// the run does not need does not stop it.
    pub fn choose_for_run(
        &self,
        root: &str,
        references: &[PluginRef],
        given: &[Plugin],
    ) -> Result<Vec<Installed>, ChooseError> {
        let installed = self.list()?;
        let mut index = Index::with_builtins();
        let builtin: BTreeSet<String> =
            crate::BUILTIN_PLUGINS.iter().map(|id| (*id).to_owned()).collect();
        let mut seen: BTreeSet<String> = builtin.clone();
        for plugin in given {
            index.add(Candidate::of(crate::LOCAL, plugin));
            seen.insert(plugin.id.clone());
        }
        let mut wanted: Vec<String> = Vec::new();
        let want = |id: &str, wanted: &mut Vec<String>, seen: &mut BTreeSet<String>| {
            if seen.insert(id.to_owned()) {
                wanted.push(id.to_owned());
            }
        };
        for reference in references.iter().chain(given.iter().flat_map(Plugin::dependencies)) {
            want(reference.id(), &mut wanted, &mut seen);
        }
        while let Some(id) = wanted.pop() {
            for candidate in installed.iter().filter(|i| i.id == id) {
                let plugin = crate::load_plugin(&candidate.path)
                    .map_err(|source| ChooseError::Load { path: candidate.path.clone(), source })?;
                for reference in plugin.dependencies() {
                    want(reference.id(), &mut wanted, &mut seen);
                }
                index.add(Candidate::of(&candidate.marketplace, &plugin));
            }
        }
        let mut all: Vec<PluginRef> = references.to_vec();
        // A given folder's own needs count as the run's.
        all.extend(given.iter().flat_map(Plugin::dependencies).cloned());
        let resolution = resolve(&index, root, &all)?;
        Ok(resolution
            .plugins
            .iter()
            .filter(|r| r.marketplace != crate::LOCAL && !builtin.contains(&r.id))
            .filter_map(|r| {
                installed
                    .iter()
                    .find(|i| {
                        i.marketplace == r.marketplace && i.id == r.id && i.version == r.version
                    })
                    .cloned()
            })
            .collect())
    }

    /// Lists every installed plugin version, sorted by marketplace, id and version.
    pub fn list(&self) -> Result<Vec<Installed>, StoreError> {
        let root = self.home.join("plugins");
        let mut out = Vec::new();
        for market in sorted_dir(&root)? {
            for plugin in sorted_dir(&market)? {
                for entry in sorted_dir(&plugin)? {
                    let Some(name) = entry.file_name().map(|n| n.to_string_lossy().into_owned())
                    else {
                        continue;
                    };
                    let Some(version_text) = name.strip_suffix(".install.json") else { continue };
                    let text = clio_spec::read_input(&entry)?;
                    let record: InstallRecord = serde_json::from_str(&text).map_err(|err| {
                        StoreError::Record { path: entry.clone(), message: err.to_string() }
                    })?;
                    let version = Version::parse(&record.version).map_err(|err| {
                        StoreError::Record { path: entry.clone(), message: err.to_string() }
                    })?;
                    out.push(Installed {
                        path: plugin.join(version_text),
                        marketplace: record.marketplace,
                        id: record.id,
                        version,
                        source: record.source,
                        digest: record.digest,
                    });
                }
            }
        }
        out.sort_by(|a, b| {
            (&a.marketplace, &a.id, &a.version).cmp(&(&b.marketplace, &b.id, &b.version))
        });
        Ok(out)
    }

    /// Removes an installed plugin version (its trust entry stays, keyed by digest).
    pub fn remove(&self, marketplace: &str, id: &str, version: &Version) -> Result<(), StoreError> {
        let (path, record) = self.slot(marketplace, id, version);
        if !record.exists() {
            return Err(StoreError::NotInstalled {
                marketplace: marketplace.to_owned(),
                id: id.to_owned(),
                version: version.clone(),
            });
        }
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io(&path))?;
        }
        std::fs::remove_file(&record).map_err(io(&record))
    }

    /// Returns the trust list.
    pub fn trusted(&self) -> Result<Vec<TrustEntry>, StoreError> {
        Ok(self.read_trust()?.trusted)
    }

    fn read_trust(&self) -> Result<TrustFile, StoreError> {
        let path = self.home.join("trust.json");
        match clio_spec::read_input(&path) {
            Ok(text) => {
                if let Some(duplicate) = clio_spec::duplicate_json_key(&text) {
                    return Err(StoreError::Record { path, message: duplicate.to_string() });
                }
                serde_json::from_str(&text)
                    .map_err(|err| StoreError::Record { path, message: err.to_string() })
            }
            Err(err) if err.is_not_found() => Ok(TrustFile::default()),
            Err(err) => Err(StoreError::Read(err)),
        }
    }

    /// Trusts `installed` with the content it has now.
    pub fn trust(&self, installed: &Installed) -> Result<TrustEntry, StoreError> {
        let digest = digest_folder(&installed.path)?;
        self.trust_at(&installed.id, &installed.version.to_string(), &digest)
    }

    /// Trusts plugin `id` at `version` with the content whose digest is `digest`: what a
    /// person said yes to after being shown that digest (a run's trust question, or
    /// `clio plugin trust DIR` on a folder). Nothing is recomputed, so a plugin that
    /// changed since it was shown is not trusted by this.
    pub fn trust_at(
        &self,
        id: &str,
        version: &str,
        digest: &str,
    ) -> Result<TrustEntry, StoreError> {
        let entry = TrustEntry {
            id: id.to_owned(),
            version: version.to_owned(),
            digest: digest.to_owned(),
        };
        let mut file = self.read_trust()?;
        if !file.trusted.contains(&entry) {
            file.trusted.push(entry.clone());
            file.trusted.sort_by(|a, b| {
                (&a.id, &a.version, &a.digest).cmp(&(&b.id, &b.version, &b.digest))
            });
        }
        write_json(&self.home.join("trust.json"), &file)?;
        Ok(entry)
    }

    /// Removes every trust entry of plugin `id` at `version`.
    pub fn untrust(&self, id: &str, version: &Version) -> Result<(), StoreError> {
        let mut file = self.read_trust()?;
        let version = version.to_string();
        file.trusted.retain(|e| !(e.id == id && e.version == version));
        write_json(&self.home.join("trust.json"), &file)
    }

    /// Says whether `installed` is trusted as its content is now: its id, version and
    /// current digest are on the trust list.
    pub fn is_trusted(&self, installed: &Installed) -> Result<bool, StoreError> {
        let digest = digest_folder(&installed.path)?;
        self.is_trusted_at(&installed.id, &installed.version.to_string(), &digest)
    }

    /// Says whether plugin `id` at `version` with content digest `digest` is on the trust
    /// list.
    pub fn is_trusted_at(&self, id: &str, version: &str, digest: &str) -> Result<bool, StoreError> {
        Ok(self
            .read_trust()?
            .trusted
            .iter()
            .any(|e| e.id == id && e.version == version && e.digest == digest))
    }
}

/// Returns the digest trust is pinned to for `plugin`: the content digest of its folder
/// (the folder holding `ai.iowarp.clio/`, as [`digest_folder`] computes it) when it was
/// read from one, else `sha256:` and the hex SHA-256 of its declaration
/// ([`Plugin::describe`](crate::Plugin::describe)), which is all a plugin built in code
/// brings.
pub fn plugin_digest(plugin: &crate::Plugin) -> Result<String, StoreError> {
    if let Some(root) = plugin.folder.as_deref().and_then(Path::parent) {
        return digest_folder(root);
    }
    let hash = Sha256::digest(plugin.describe().to_string().as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

fn sorted_dir(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(StoreError::Io { path: dir.to_path_buf(), source: err }),
    };
    let mut out = Vec::new();
    for entry in entries {
        out.push(entry.map_err(io(dir))?.path());
    }
    out.sort();
    Ok(out)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let text = serde_json::to_string_pretty(value)
        .map_err(|err| StoreError::Record { path: path.to_path_buf(), message: err.to_string() })?;
    let staging = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&staging).map_err(io(&staging))?;
    file.write_all(text.as_bytes()).map_err(io(&staging))?;
    file.sync_all().map_err(io(&staging))?;
    std::fs::rename(&staging, path).map_err(io(path))
}

/// Returns the files of `folder` the digest covers, as (relative path, full path),
/// sorted by relative path: every regular file, `.git` included; a link, pipe, socket or
/// device anywhere in it refuses the folder (the first in path order is named).
fn walk(folder: &Path) -> Result<Vec<(String, PathBuf)>, StoreError> {
    let walk = crate::files::walk_plugin(folder);
    if let Some((path, err)) = walk.unreadable.into_iter().next() {
        return Err(StoreError::Io { path, source: err });
    }
    if let Some((path, refused)) = walk.refused.into_iter().next() {
        return Err(match refused {
            crate::files::Refused::Symlink => StoreError::Symlink { path },
            other => StoreError::NotAFile { path, kind: other.describe() },
        });
    }
    Ok(walk.files)
}

/// Returns the content digest of `folder`, as documented in this module.
pub fn digest_folder(folder: &Path) -> Result<String, StoreError> {
    let mut hasher = Sha256::new();
    // One buffer for every file: a plugin that brings a server's binary is megabytes, and
    // reading each file whole made a fresh allocation of its size (and its page faults)
    // on every launch.
    let mut buffer = vec![0u8; 64 * 1024];
    for (rel, path) in walk(folder)? {
        // Not followed, and checked again: an entry swapped for a link, a pipe or a device
        // since the walk is refused, not read (a pipe would block the open).
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.file_type().is_symlink() {
            return Err(StoreError::Symlink { path });
        }
        if !meta.is_file() {
            return Err(StoreError::NotAFile { path, kind: "an entry that is not a regular file" });
        }
        let mode = if crate::files::is_executable(&meta) { "x" } else { "-" };
        hasher.update(rel.as_bytes());
        hasher.update([0]);
        hasher.update(mode.as_bytes());
        hasher.update([0]);
        let before = hasher.clone();
        if !hash_streamed(&mut hasher, &path, &mut buffer).map_err(io(&path))? {
            // The file changed size while it was read: hashed whole, as read at once.
            hasher = before;
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            hasher.update(bytes.len().to_string().as_bytes());
            hasher.update([0]);
            hasher.update(&bytes);
        }
    }
    let hex: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("sha256:{hex}"))
}

/// Hashes the file at `path` as [`digest_folder`] does (its length, a zero byte, its
/// bytes), reading it through `buffer`; returns `false`, with `hasher` in no useful state,
/// when the file did not hold the length its open handle reported.
fn hash_streamed(hasher: &mut Sha256, path: &Path, buffer: &mut [u8]) -> std::io::Result<bool> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    hasher.update(len.to_string().as_bytes());
    hasher.update([0]);
    let mut read = 0u64;
    loop {
        let n = match file.read(buffer) {
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if n == 0 {
            return Ok(read == len);
        }
        read += n as u64;
        if read > len {
            return Ok(false);
        }
        hasher.update(&buffer[..n]);
    }
}

/// Copies the files the digest covers from `from` into a new folder `to`, keeping
/// permissions.
fn copy_folder(from: &Path, to: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    for (rel, path) in walk(from)? {
        let target = to.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::copy(&path, &target).map_err(io(&path))?;
    }
    Ok(())
}
