//! The install and trust store on a temporary home: install copies and records the
//! digest, list and remove, trust keyed by id, version and digest (a changed plugin is no
//! longer trusted), and installing an agent's references transitively.

use std::path::{Path, PathBuf};

use clio_plugins::{InstallError, Marketplace, Store, StoreError, digest_folder};
use clio_spec::PluginRef;
use semver::Version;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path)
}

#[test]
fn install_list_trust_and_remove() -> TestResult {
    let home = tempfile::tempdir()?;
    let store = Store::new(home.path());
    let market = Marketplace::load(&data("valid/marketplace"))?;
    assert_eq!(market.name, "clio");
    let v = Version::new(1, 4, 0);
    let installed = store.install(&market, "pdf", &v)?;
    assert_eq!(
        installed.digest,
        digest_folder(&data("valid/marketplace/plugins/pdf-1.4.0"))?,
        "the copy has the source's content"
    );
    assert!(installed.path.join("ai.iowarp.clio/plugin.toml").is_file());
    assert!(clio_plugins::load_plugin(&installed.path).is_ok(), "the copy loads");
    assert_eq!(store.list()?, vec![installed.clone()]);

    assert!(!store.is_trusted(&installed)?);
    let entry = store.trust(&installed)?;
    assert_eq!((entry.id.as_str(), entry.version.as_str()), ("pdf", "1.4.0"));
    assert!(store.is_trusted(&installed)?);

    // A changed plugin is no longer trusted.
    std::fs::write(installed.path.join("ai.iowarp.clio/extra.txt"), "changed")?;
    assert!(!store.is_trusted(&installed)?);
    std::fs::remove_file(installed.path.join("ai.iowarp.clio/extra.txt"))?;
    assert!(store.is_trusted(&installed)?);

    store.untrust("pdf", &v)?;
    assert!(!store.is_trusted(&installed)?);
    store.remove("clio", "pdf", &v)?;
    assert!(store.list()?.is_empty());
    assert!(matches!(store.remove("clio", "pdf", &v), Err(StoreError::NotInstalled { .. })));
    Ok(())
}

#[test]
fn installing_references_resolves_transitively() -> TestResult {
    let home = tempfile::tempdir()?;
    let store = Store::new(home.path());
    let market = Marketplace::load(&data("valid/marketplace"))?;
    let refs: Vec<PluginRef> =
        ["core", "clio/pdf@^1.2"].iter().map(|r| PluginRef::parse(r)).collect::<Result<_, _>>()?;
    let installed = store.install_references(&market, "agent writer", &refs)?;
    let names: Vec<String> = installed.iter().map(|i| format!("{}@{}", i.id, i.version)).collect();
    assert_eq!(names, ["document-runtime@2.1.0", "pdf@1.4.0"], "built-in core needs no copy");
    let refs = vec![PluginRef::parse("pdf@^3")?];
    let err = store.install_references(&market, "agent writer", &refs).unwrap_err();
    assert!(matches!(err, InstallError::Resolve(_)));
    assert_eq!(err.to_string(), "agent writer needs pdf@^3; only 1.3.0, 1.4.0 are available");
    Ok(())
}

#[test]
fn a_version_the_marketplace_does_not_list_is_refused() -> TestResult {
    let home = tempfile::tempdir()?;
    let market = Marketplace::load(&data("valid/marketplace"))?;
    let err = Store::new(home.path()).install(&market, "pdf", &Version::new(9, 0, 0)).unwrap_err();
    assert_eq!(err.to_string(), "marketplace clio does not list pdf 9.0.0");
    Ok(())
}

#[test]
fn an_invalid_marketplace_is_refused_with_its_problems() {
    let err = Marketplace::load(&data("invalid/marketplace")).unwrap_err();
    assert!(err.to_string().starts_with("marketplace "), "{err}");
    assert!(matches!(
        Marketplace::load(&data("valid/minimal")),
        Err(clio_plugins::MarketplaceError::NotAMarketplace { .. })
    ));
}

#[test]
fn the_digest_depends_on_content_names_and_mode() -> TestResult {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("a"), "x")?;
    let first = digest_folder(dir.path())?;
    assert!(first.starts_with("sha256:") && first.len() == 7 + 64);
    std::fs::write(dir.path().join("a"), "y")?;
    let second = digest_folder(dir.path())?;
    assert_ne!(first, second);
    std::fs::rename(dir.path().join("a"), dir.path().join("b"))?;
    assert_ne!(digest_folder(dir.path())?, second);
    let without_git = digest_folder(dir.path())?;
    std::fs::create_dir(dir.path().join(".git"))?;
    std::fs::write(dir.path().join(".git/payload"), "echo one")?;
    let with_git = digest_folder(dir.path())?;
    assert_ne!(with_git, without_git, ".git is content: a tool can run what is in it");
    std::fs::write(dir.path().join(".git/payload"), "echo two")?;
    assert_ne!(digest_folder(dir.path())?, with_git, "a changed .git/payload changes the digest");
    std::fs::remove_dir_all(dir.path().join(".git"))?;
    assert_eq!(digest_folder(dir.path())?, without_git);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let before = digest_folder(dir.path())?;
        std::fs::set_permissions(dir.path().join("b"), std::fs::Permissions::from_mode(0o755))?;
        assert_ne!(digest_folder(dir.path())?, before, "the executable bit counts");
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("link"))?;
        assert!(matches!(digest_folder(dir.path()), Err(StoreError::Symlink { .. })));
    }
    Ok(())
}

/// A named pipe in a plugin folder is refused by its kind, by the digest and by
/// `plugin check` alike, and nothing blocks on it (reading a FIFO waits for a writer).
#[cfg(unix)]
#[test]
fn a_fifo_is_refused_by_trust_and_by_the_check() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("data"))?;
    std::fs::write(clio.join("plugin.toml"), "id = \"piped\"\nversion = \"1.0.0\"\n")?;
    let status = std::process::Command::new("mkfifo").arg(clio.join("data/pipe")).status()?;
    assert!(status.success());
    let err = digest_folder(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::NotAFile { .. }), "{err}");
    assert!(err.to_string().contains("a named pipe (FIFO) is not allowed"), "{err}");
    let report = clio_plugins::check(dir.path());
    assert!(!report.ok);
    let problem = report
        .problems
        .iter()
        .find(|p| p.code == clio_plugins::ProblemCode::UnsupportedFile)
        .unwrap_or_else(|| panic!("{}", report.render()));
    assert_eq!(problem.file, "ai.iowarp.clio/data/pipe");
    assert!(
        problem.message.starts_with("a named pipe (FIFO) is not allowed"),
        "{}",
        problem.message
    );
    assert!(clio_plugins::load_plugin(dir.path()).is_err(), "what the check refuses does not load");
    // A pipe where a workflow file is read: named by its kind, and the check does not block.
    std::fs::create_dir_all(clio.join("flows"))?;
    let status = std::process::Command::new("mkfifo").arg(clio.join("flows/loop.json")).status()?;
    assert!(status.success());
    let rendered = clio_plugins::check(dir.path()).render();
    assert!(
        rendered.contains("error[io_error] ai.iowarp.clio/flows/loop.json: cannot read the workflow file: it is a named pipe (FIFO), not a regular file"),
        "{rendered}"
    );
    Ok(())
}

/// A symbolic link anywhere in the folder, `.git` included: the check reports it where
/// trust refuses it, so the two agree on what a plugin may contain.
#[cfg(unix)]
#[test]
fn the_check_refuses_the_links_trust_refuses() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(&clio)?;
    std::fs::create_dir_all(dir.path().join(".git"))?;
    std::fs::write(clio.join("plugin.toml"), "id = \"linked\"\nversion = \"1.0.0\"\n")?;
    assert!(clio_plugins::check(dir.path()).ok);
    digest_folder(dir.path())?;
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join(".git/payload"))?;
    assert!(matches!(digest_folder(dir.path()), Err(StoreError::Symlink { .. })));
    let report = clio_plugins::check(dir.path());
    assert!(!report.ok, "{}", report.render());
    assert!(
        report
            .render()
            .contains("error[unsupported_file] .git/payload: a symbolic link is not allowed"),
        "{}",
        report.render()
    );
    Ok(())
}

/// The digest's format, computed apart: every file by its path's bytes, as its path, a zero
/// byte, `x` or `-`, a zero byte, its length in decimal, a zero byte and its bytes.
#[cfg(unix)]
fn digest_as_specified(files: &[(String, Vec<u8>, bool)]) -> String {
    use sha2::{Digest, Sha256};
    let mut sorted: Vec<&(String, Vec<u8>, bool)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut hasher = Sha256::new();
    for (name, bytes, executable) in sorted {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(if *executable { "x" } else { "-" });
        hasher.update([0]);
        hasher.update(bytes.len().to_string());
        hasher.update([0]);
        hasher.update(bytes);
    }
    let hex: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(unix)]
proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Files read through the digest's buffer (64 KB) hash as the format says, whether they
    /// are empty, smaller than it, or span it several times.
    #[test]
    fn the_digest_of_a_folder_is_its_files_in_the_documented_format(
        files in proptest::collection::btree_map(
            "[a-z]{1,6}",
            (proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 65_530..65_542),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 150_000..200_000),
            ], proptest::prelude::any::<bool>()),
            1..5,
        )
    ) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(String, Vec<u8>, bool)> =
            files.into_iter().map(|(name, (bytes, x))| (name, bytes, x)).collect();
        for (name, bytes, executable) in &files {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let mode = if *executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        proptest::prop_assert_eq!(digest_folder(dir.path()).unwrap(), digest_as_specified(&files));
    }
}

/// A run's plugins are chosen by the resolver among the installed versions: the newest
/// that fits every range, and what each one requires too (pdf brings document-runtime).
/// A folder given by hand stands in for its id; a range it does not meet is an error.
#[test]
fn a_run_chooses_its_installed_plugins_transitively() -> TestResult {
    let home = tempfile::tempdir()?;
    let store = Store::new(home.path());
    let market = Marketplace::load(&data("valid/marketplace"))?;
    for (id, v) in [("pdf", "1.3.0"), ("pdf", "1.4.0"), ("document-runtime", "2.1.0")] {
        store.install(&market, id, &Version::parse(v)?)?;
    }
    let refs = |list: &[&str]| -> Result<Vec<PluginRef>, Box<dyn std::error::Error>> {
        Ok(list.iter().map(|r| PluginRef::parse(r)).collect::<Result<_, _>>()?)
    };
    let names = |chosen: &[clio_plugins::Installed]| -> Vec<String> {
        chosen.iter().map(|i| format!("{}/{}@{}", i.marketplace, i.id, i.version)).collect()
    };

    let chosen = store.choose_for_run("agent writer", &refs(&["core", "pdf@^1.2"])?, &[])?;
    assert_eq!(names(&chosen), ["clio/document-runtime@2.1.0", "clio/pdf@1.4.0"]);
    let chosen = store.choose_for_run("agent writer", &refs(&["pdf@~1.3"])?, &[])?;
    assert_eq!(names(&chosen), ["clio/document-runtime@2.1.0", "clio/pdf@1.3.0"]);

    // A pdf folder passed by hand is the run's pdf, from any marketplace; its own needs
    // are still met from the store.
    let folder = clio_plugins::load_plugin(&data("valid/marketplace/plugins/pdf-1.3.0"))?;
    let chosen = store.choose_for_run(
        "agent writer",
        &refs(&["clio/pdf@^1"])?,
        std::slice::from_ref(&folder),
    )?;
    assert_eq!(names(&chosen), ["clio/document-runtime@2.1.0"]);
    let err = store.choose_for_run("agent writer", &refs(&["pdf@^1.4"])?, &[folder]).unwrap_err();
    assert!(matches!(err, clio_plugins::ChooseError::Resolve(_)), "{err:?}");
    assert!(err.to_string().contains("agent writer needs pdf@^1.4"), "{err}");

    // Nothing installed that fits: the chain says who needs what.
    store.remove("clio", "document-runtime", &Version::new(2, 1, 0))?;
    let err = store.choose_for_run("agent writer", &refs(&["pdf@^1"])?, &[]).unwrap_err();
    assert!(err.to_string().contains("document-runtime"), "{err}");
    Ok(())
}
