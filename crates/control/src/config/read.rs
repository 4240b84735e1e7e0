//! Reading the files a config consists of (the config itself and its route file): only regular
//! files, never more than a bound, and never blocking on a FIFO or opening a device first. It
//! interprets nothing it reads.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Largest config file read (64 MiB).
pub const CONFIG_MAX_BYTES: u64 = 64 << 20;
/// Largest route file read (1 GiB).
pub const ROUTE_FILE_MAX_BYTES: u64 = 1 << 30;

/// What kind of non-regular file `m` is, for messages ("a FIFO", "a directory", ...).
fn not_regular(m: &Metadata) -> Option<&'static str> {
    let t = m.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Human size of a bound, for messages.
pub(super) fn show_bytes(n: u64) -> String {
    if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// Open `path` for reading if it is a regular file of at most `limit` bytes; the error's text
/// completes "cannot read PATH: ..." (system errors keep their kind, refusals are `InvalidInput`). The type is checked before opening (a device is never opened) and
/// again on the open descriptor (opened non-blocking, so a FIFO swapped in cannot block); the
/// returned reader stops after `limit + 1` bytes so a file growing meanwhile is caught too.
pub(super) fn open_regular(path: &Path, limit: u64) -> io::Result<io::Take<File>> {
    let refuse = |what: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{what}; accepted: a regular file of at most {}",
                show_bytes(limit)
            ),
        )
    };
    let meta = std::fs::metadata(path)?;
    if let Some(what) = not_regular(&meta) {
        return Err(refuse(format!("it is {what}")));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(what) = not_regular(&meta) {
        return Err(refuse(format!("it is {what}")));
    }
    if meta.len() > limit {
        return Err(refuse(format!("it has {} bytes", meta.len())));
    }
    Ok(file.take(limit + 1))
}

/// A file the config names (`route-file`, `flow-file`, `[lb] file`): the path to open, relative
/// to the config file's directory, and how messages name it (as written when that directory is
/// the current one or the name is absolute, else the joined path).
pub(super) fn included_file(base_dir: &Path, name: &str) -> (std::path::PathBuf, String) {
    let path = base_dir.join(name);
    let label = if base_dir == Path::new(".") || Path::new(name).is_absolute() {
        name.to_string()
    } else {
        path.display().to_string()
    };
    (path, label)
}

/// Read all of `path` as UTF-8 text (see [`open_regular`]).
pub(super) fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let mut r = open_regular(path, limit)?;
    let mut text = String::new();
    r.read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "it grew past {} while being read; accepted: a regular file of at most {}",
                show_bytes(limit),
                show_bytes(limit)
            ),
        ));
    }
    Ok(text)
}
