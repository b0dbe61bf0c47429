//! The token of `clio serve`'s HTTP API: 32 random bytes as hex, made on the first start
//! and kept in `$CLIO_HOME/serve.token` (mode 0600, this user's only), so that it stays
//! the same across restarts and a program of this user can read it. Every request that
//! changes something needs it (`Authorization: Bearer TOKEN`), and with `--allow-remote`
//! every request does (docs/http-api.md, "Authentication").

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use anyhow::{Context, anyhow};

use crate::error::CliError;
use crate::home::Home;

/// Returns the token of `home`, making it on the first call. A token file that others
/// may read is refused: its token is no secret any more.
pub(crate) fn load_or_create(home: &Home) -> Result<String, CliError> {
    let path = home.root().join("serve.token");
    match std::fs::metadata(&path) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(CliError::user(anyhow!(
                    "{} may be read by other users (mode {:o}): its token is no secret",
                    path.display(),
                    meta.permissions().mode() & 0o777
                ))
                .hint(format!(
                    "delete it (a new token is made) or `chmod 600 {}`",
                    path.display()
                )));
            }
            // Read as an input file (`crate::input`): a FIFO or device put in its place is
            // refused, not waited on.
            let text = crate::input::read_file(&path)?;
            let token = text.trim().to_owned();
            if token.len() < 32 || !token.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(CliError::user(anyhow!("{} holds no token", path.display()))
                    .hint("delete it: `clio serve` makes a new one"));
            }
            Ok(token)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => create(&path),
        Err(error) => {
            Err(CliError::user(anyhow!(error).context(format!("cannot read {}", path.display()))))
        }
    }
}

fn create(path: &std::path::Path) -> Result<String, CliError> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("cannot read random bytes from /dev/urandom for the token")
        .map_err(CliError::internal)?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {}", dir.display()))
            .map_err(CliError::user)?;
    }
    // Made with its mode: there is no moment at which others may read it.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
        .map_err(CliError::user)?;
    writeln!(file, "{token}")
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
        .map_err(CliError::user)?;
    Ok(token)
}
