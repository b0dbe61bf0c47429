//! Reading an input file a person names (a workflow, an agent definition, `config.toml`, a
//! models or script file, a plugin manifest) with bounds: the one place in CLIO where such
//! files are read, so that every command refuses the same things the same way.
//!
//! The rules, each with an error that names the file:
//!
//! - Only a regular file is read (symlinks are followed). A directory, a named pipe (FIFO),
//!   a character or block device or a socket is refused by its kind, from its metadata,
//!   before it is opened: `/dev/zero` ends at once, a FIFO never blocks. The file is opened
//!   with `O_NONBLOCK` and its kind checked again on the open handle, so a file swapped for a
//!   FIFO in between cannot block the read either.
//! - At most [`MAX_INPUT_BYTES`] (64 MiB) are read: a larger file is refused with its size,
//!   and a file that grows past the cap while it is read is refused too.
//! - The text must be UTF-8: invalid bytes are refused with the byte offset of the first
//!   one and its line and column. A UTF-8 byte order mark (`EF BB BF`) at the start is
//!   refused at line 1, column 1: JSON forbids it (RFC 8259 §8.1), and a file read one way
//!   here and another way by `jq` or a TOML tool would be two files.
//!
//! This is the crate's only I/O: the rest of clio-spec stays pure, and the crates above it
//! that read files (clio-models, clio-plugins, clio-cli) share this reader.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes read from one input file: 64 MiB. A 2,000-step workflow where every step
/// waits on every earlier one is about 16-30 MB of JSON; nothing a person writes by hand
/// comes near the cap, and a device or a runaway generator is stopped by it.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// What a path is when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A directory (folder).
    Directory,
    /// A named pipe (FIFO).
    Fifo,
    /// A character device, such as `/dev/zero` or a terminal.
    CharDevice,
    /// A block device, such as a disk.
    BlockDevice,
    /// A Unix domain socket.
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a named pipe (FIFO)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        })
    }
}

/// An input file that cannot be read as text; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be found or opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The path is not a regular file.
    #[error("cannot read {}: it is {kind}, not a regular file; clio reads input only from regular files", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: FileKind,
    },
    /// The file is larger than the cap.
    #[error("cannot read {}: it is {size} bytes or more, over the limit of {limit} bytes ({} MiB) for an input file", path.display(), limit / (1024 * 1024))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, or how much was read before the cap was passed.
        size: u64,
        /// The cap, [`MAX_INPUT_BYTES`] unless a caller chose another.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("{}:{line}:{column}: invalid UTF-8 at byte offset {offset} (line {line}, column {column}): input files must be UTF-8 text", path.display())]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// The 0-based byte offset of the first invalid byte.
        offset: usize,
        /// The 1-based line of that byte.
        line: usize,
        /// The 1-based column (in characters) of that byte.
        column: usize,
    },
    /// The file starts with a UTF-8 byte order mark.
    #[error("{}:1:1: the file starts with a UTF-8 byte order mark (bytes EF BB BF at byte offset 0, line 1, column 1): save it as UTF-8 without a BOM", path.display())]
    ByteOrderMark {
        /// The file.
        path: PathBuf,
    },
}

impl InputError {
    /// Returns the file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            InputError::Io { path, .. }
            | InputError::NotAFile { path, .. }
            | InputError::TooLarge { path, .. }
            | InputError::InvalidUtf8 { path, .. }
            | InputError::ByteOrderMark { path } => path,
        }
    }

    /// Returns whether the file does not exist (a caller may treat that as "no file").
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Reads the input file at `path` as UTF-8 text, within [`MAX_INPUT_BYTES`]; see the module
/// documentation for what is refused.
pub fn read_input(path: &Path) -> Result<String, InputError> {
    read_input_within(path, MAX_INPUT_BYTES)
}

/// Reads the input file at `path` as UTF-8 text, refusing one of more than `limit` bytes.
pub fn read_input_within(path: &Path, limit: u64) -> Result<String, InputError> {
    let bytes = read_input_bytes(path, limit)?;
    input_text(bytes, path)
}

/// Reads the regular file at `path`, at most `limit` bytes; the bytes are not decoded.
pub fn read_input_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io { path: path.to_path_buf(), source };
    // The kind and size from the metadata, before the file is opened: opening a FIFO for
    // reading blocks until a writer comes, and a device has no end.
    let metadata = std::fs::metadata(path).map_err(io)?;
    check_regular(path, &metadata, limit)?;
    let file = open_nonblocking(path).map_err(io)?;
    // The same checks on what was opened, in case the path changed in between.
    check_regular(path, &file.metadata().map_err(io)?, limit)?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(io)?;
    let read = bytes.len() as u64;
    if read > limit {
        return Err(InputError::TooLarge { path: path.to_path_buf(), size: read, limit });
    }
    Ok(bytes)
}

/// Decodes the bytes of the file `path` as UTF-8 text: invalid UTF-8 is refused with its
/// byte offset, line and column, and a byte order mark at the start at line 1, column 1.
pub fn input_text(bytes: Vec<u8>, path: &Path) -> Result<String, InputError> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(InputError::ByteOrderMark { path: path.to_path_buf() });
    }
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        // The bytes before the first invalid one are valid UTF-8.
        let before = std::str::from_utf8(&error.as_bytes()[..offset]).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        InputError::InvalidUtf8 { path: path.to_path_buf(), offset, line, column }
    })
}

/// Refuses what is not a regular file, by its kind, and a file larger than `limit`.
fn check_regular(path: &Path, metadata: &std::fs::Metadata, limit: u64) -> Result<(), InputError> {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        if metadata.len() > limit {
            return Err(InputError::TooLarge {
                path: path.to_path_buf(),
                size: metadata.len(),
                limit,
            });
        }
        return Ok(());
    }
    Err(InputError::NotAFile { path: path.to_path_buf(), kind: kind_of(&file_type) })
}

#[cfg(unix)]
fn kind_of(file_type: &std::fs::FileType) -> FileKind {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        FileKind::Directory
    } else if file_type.is_fifo() {
        FileKind::Fifo
    } else if file_type.is_char_device() {
        FileKind::CharDevice
    } else if file_type.is_block_device() {
        FileKind::BlockDevice
    } else if file_type.is_socket() {
        FileKind::Socket
    } else {
        FileKind::Other
    }
}

#[cfg(not(unix))]
fn kind_of(file_type: &std::fs::FileType) -> FileKind {
    if file_type.is_dir() { FileKind::Directory } else { FileKind::Other }
}

/// Opens `path` for reading without blocking on a FIFO (`O_NONBLOCK`; it changes nothing
/// for a regular file).
#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_is_placed_by_offset_line_and_column() {
        let path = Path::new("w.json");
        let error = input_text(b"ab\ncd\xffe".to_vec(), path).unwrap_err();
        assert!(
            matches!(error, InputError::InvalidUtf8 { offset: 5, line: 2, column: 3, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "w.json:2:3: invalid UTF-8 at byte offset 5 (line 2, column 3): input files must be UTF-8 text"
        );
        let error = input_text(b"\xEF\xBB\xBF{}".to_vec(), path).unwrap_err();
        assert!(error.to_string().starts_with("w.json:1:1: "), "{error}");
        assert_eq!(input_text("é\n".into(), path).unwrap(), "é\n");
    }
}
