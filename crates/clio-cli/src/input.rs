//! The files a person names or keeps in the home (workflows, agent definitions and specs,
//! `config.toml`, models files, launch records), read through [`clio_spec::read_input`]:
//! only a regular file, at most [`clio_spec::MAX_INPUT_BYTES`], UTF-8 without a BOM. Every
//! refusal is the person's to fix (exit 1), names the file and says what to do.

use std::path::Path;

use anyhow::anyhow;
use clio_spec::{FileKind, InputError};

use crate::error::CliError;

/// Reads the input file at `path` as text.
pub(crate) fn read_file(path: &Path) -> Result<String, CliError> {
    clio_spec::read_input(path).map_err(input_error)
}

/// Reads the input file at `path` as text; `None` when there is no such file.
pub(crate) fn read_if_present(path: &Path) -> Result<Option<String>, CliError> {
    match clio_spec::read_input(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(input_error(error)),
    }
}

/// Turns a refused input file into the person's error, with a hint where one helps. An
/// I/O error stays the cause under "cannot read FILE".
pub(crate) fn input_error(error: InputError) -> CliError {
    let hint = match &error {
        InputError::NotAFile { kind: FileKind::Directory, .. } => {
            Some("name a file inside the folder".to_owned())
        }
        InputError::NotAFile { .. } => Some(
            "clio reads a whole file before it acts on it: save what the pipe or device gives to a regular file and name that"
                .to_owned(),
        ),
        InputError::TooLarge { limit, .. } => Some(format!(
            "input files are read whole and may hold at most {limit} bytes; split the input or check that this is the file you meant"
        )),
        InputError::InvalidUtf8 { .. } => {
            Some("save the file as UTF-8 (`iconv -t UTF-8` converts one)".to_owned())
        }
        InputError::ByteOrderMark { .. } => Some(
            "remove the first three bytes (`sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`), or save it as UTF-8 without a BOM"
                .to_owned(),
        ),
        InputError::Io { .. } => None,
    };
    let cli = match error {
        InputError::Io { path, source } => CliError::user(
            anyhow::Error::new(source).context(format!("cannot read {}", path.display())),
        ),
        other => CliError::user(anyhow!(other)),
    };
    match hint {
        Some(hint) => cli.hint(hint),
        None => cli,
    }
}
