//! How a command opens a shared (PostgreSQL) journal: its URL, and how long it waits for
//! a server it cannot reach (one restarting or failing over) before it gives up with exit
//! 1 and a hint: `$CLIO_POSTGRES_RECONNECT_SECS` when set, else `reconnect_secs` of the
//! `[postgres]` table of config.toml, else [`clio_postgres::DEFAULT_RECONNECT`] (30 s).
//! Workers, `--detach` submissions, `runs answer` and every other command wait the same way.

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use clio_postgres::PostgresConfig;

use crate::error::CliError;

/// The variable that sets the reconnect window, in seconds, over config.toml.
pub(crate) const RECONNECT_VAR: &str = "CLIO_POSTGRES_RECONNECT_SECS";

/// Returns the configuration a command opens the shared journal at `url` with, the home
/// being `root`.
pub(crate) fn config(root: &Path, url: &str) -> Result<PostgresConfig, CliError> {
    let mut config = PostgresConfig::new(url);
    if let Some(reconnect) = reconnect(root)? {
        config.reconnect = reconnect;
    }
    Ok(config)
}

/// Returns the reconnect window the environment or config.toml sets, if either does.
fn reconnect(root: &Path) -> Result<Option<Duration>, CliError> {
    if let Some(value) = std::env::var_os(RECONNECT_VAR).filter(|v| !v.is_empty()) {
        let text = value.to_string_lossy();
        return match seconds(text.trim().parse::<f64>().ok()) {
            Some(window) => Ok(Some(window)),
            None => Err(CliError::usage(anyhow!(
                "{RECONNECT_VAR}={text:?}: expected a number of seconds, 0 or more"
            ))),
        };
    }
    let path = root.join("config.toml");
    // A file that cannot be read or is not TOML sets nothing here: the reader of the
    // file's other settings reports what is wrong with it.
    // Read bounded (`crate::input`): a FIFO or device at its place is passed over here, not
    // waited on.
    let Ok(Some(text)) = crate::input::read_if_present(&path) else { return Ok(None) };
    let Ok(table) = toml::from_str::<toml::Table>(&text) else { return Ok(None) };
    let Some(postgres) = table.get("postgres") else { return Ok(None) };
    let Some(postgres) = postgres.as_table() else {
        return Err(CliError::user(anyhow!(
            "{}: postgres: expected a table ([postgres]), found {}",
            path.display(),
            postgres.type_str()
        )));
    };
    if let Some(unknown) = postgres.keys().find(|k| *k != "reconnect_secs") {
        return Err(CliError::user(anyhow!(
            "{}: postgres.{unknown}: unknown setting; [postgres] takes reconnect_secs",
            path.display()
        )));
    }
    let Some(value) = postgres.get("reconnect_secs") else { return Ok(None) };
    let number = match value {
        toml::Value::Integer(n) => Some(*n as f64),
        toml::Value::Float(x) => Some(*x),
        _ => None,
    };
    match seconds(number) {
        Some(window) => Ok(Some(window)),
        None => Err(CliError::user(anyhow!(
            "{}: postgres.reconnect_secs = {value}: expected a number of seconds, 0 or more",
            path.display()
        ))),
    }
}

/// A window of `n` seconds, when `n` is a finite number, 0 or more (at most a day).
fn seconds(n: Option<f64>) -> Option<Duration> {
    n.filter(|n| n.is_finite() && *n >= 0.0).map(|n| Duration::from_secs_f64(n.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home_with(config: &str) -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("clio-shared-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), config).unwrap();
        dir
    }

    #[test]
    fn config_toml_sets_the_reconnect_window_and_refuses_what_is_not_one() {
        // The variable is not set in unit tests; if it were, it would win.
        if std::env::var_os(RECONNECT_VAR).is_some() {
            return;
        }
        let url = "postgres://db/clio";
        let window = |text: &str| config(&home_with(text), url).map(|c| c.reconnect);
        assert_eq!(window("").unwrap(), clio_postgres::DEFAULT_RECONNECT);
        assert_eq!(window("[postgres]\nreconnect_secs = 5\n").unwrap(), Duration::from_secs(5));
        assert_eq!(
            window("[postgres]\nreconnect_secs = 0.5\n").unwrap(),
            Duration::from_millis(500)
        );
        for bad in [
            "[postgres]\nreconnect_secs = -1\n",
            "[postgres]\nreconnect_secs = \"soon\"\n",
            "[postgres]\nreconect_secs = 3\n",
            "postgres = 3\n",
        ] {
            let err = window(bad).expect_err(bad);
            assert_eq!(err.exit_code(), 1, "{bad}");
            assert!(err.error.to_string().contains("config.toml: postgres"), "{}", err.error);
        }
    }
}
