//! Output files a root daemon writes on an operator's word (pcap `tx`, `ctl pcap start`,
//! `--stats-json`) and the input files it reads: opened without following a symlink, only as
//! regular files on a real file system (no FIFO, device, /proc or /sys), never over the config
//! or an input (compared by device and inode, not by path text), and locked against a second
//! writer; `check_outputs` verifies every output of a start before any is truncated. It never
//! decides which files a run needs: callers pass them.

use crate::error::PortError;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// A file's identity: (device, inode).
pub type FileId = (u64, u64);

/// The identity of the file at `path`, if it exists (symlinks followed: what it names).
pub fn file_id(path: &Path) -> Option<FileId> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn refuse(path: &Path, why: impl Into<String>) -> PortError {
    PortError::io(
        &path.display().to_string(),
        "use it as an output file",
        std::io::Error::new(std::io::ErrorKind::InvalidInput, why.into()),
    )
}

/// The file system magic of /proc and /sys (their files look regular but are not data).
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const SYSFS_MAGIC: i64 = 0x6265_6572;

fn on_pseudo_fs(file: &File) -> bool {
    // SAFETY: `statfs` is plain data filled by the kernel; the descriptor is open.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes into `st`, which lives across the call.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    rc == 0 && matches!(st.f_type as i64, PROC_SUPER_MAGIC | SYSFS_MAGIC)
}

/// Open `path` as an output without truncating it: created (mode 0644) when absent, the last
/// component never followed if it is a symlink, refused unless it is a regular file on a real
/// file system and none of `forbidden` (the config, the inputs), and locked exclusively
/// (another writer holding it is refused).
pub fn open_output(path: &Path, forbidden: &[FileId]) -> Result<File, PortError> {
    let name = path.display().to_string();
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        // O_NONBLOCK: opening a FIFO for writing must not wait for a reader.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                refuse(
                    path,
                    "it is a symbolic link; give the real path of a regular file",
                )
            } else {
                PortError::io(&name, "create", e)
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| PortError::io(&name, "inspect", e))?;
    if !meta.is_file() {
        return Err(refuse(
            path,
            "not a regular file (a FIFO, device or directory cannot hold a capture)",
        ));
    }
    if on_pseudo_fs(&file) {
        return Err(refuse(
            path,
            "a file of /proc or /sys is not an output file",
        ));
    }
    if forbidden.contains(&(meta.dev(), meta.ino())) {
        return Err(refuse(
            path,
            "it is the config file or an input of this run (another name for the same file)",
        ));
    }
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(refuse(path, "another writer has it open (it is locked)"));
    }
    Ok(file)
}

/// Open, check and lock an output, then truncate it (see `open_output`).
pub fn create_output(path: &Path, forbidden: &[FileId]) -> Result<File, PortError> {
    let file = open_output(path, forbidden)?;
    file.set_len(0)
        .map_err(|e| PortError::io(&path.display().to_string(), "truncate", e))?;
    Ok(file)
}

/// Check every output of a start before any is created or truncated: each must pass
/// `open_output`, and no two may be the same file. Files that did not exist are removed again.
pub fn check_outputs(outputs: &[&Path], forbidden: &[FileId]) -> Result<(), PortError> {
    let mut held: Vec<(File, FileId)> = Vec::new();
    let mut created = Vec::new();
    let result = (|| {
        for path in outputs {
            let existed = std::fs::symlink_metadata(path).is_ok();
            if file_id(path).is_some_and(|id| held.iter().any(|(_, h)| *h == id)) {
                return Err(refuse(
                    path,
                    "another output of this run names the same file",
                ));
            }
            let file = open_output(path, forbidden)?;
            if !existed {
                created.push(path.to_path_buf());
            }
            let meta = file
                .metadata()
                .map_err(|e| PortError::io(&path.display().to_string(), "inspect", e))?;
            let id = (meta.dev(), meta.ino());
            if held.iter().any(|(_, h)| *h == id) {
                return Err(refuse(
                    path,
                    "another output of this run names the same file",
                ));
            }
            held.push((file, id));
        }
        Ok(())
    })();
    drop(held);
    for p in created {
        let _ = std::fs::remove_file(p);
    }
    result
}

/// Open `path` as an input: a regular file (a FIFO could block the reader forever; a device
/// never ends).
pub fn open_input(path: &Path) -> Result<File, PortError> {
    let name = path.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| PortError::io(&name, "open for reading", e))?;
    let meta = file
        .metadata()
        .map_err(|e| PortError::io(&name, "inspect", e))?;
    if !meta.is_file() {
        return Err(PortError::io(
            &name,
            "read it",
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file (a FIFO or device is not a pcap file)",
            ),
        ));
    }
    // Reads of a regular file never block; clear O_NONBLOCK all the same.
    // SAFETY: fcntl on a descriptor we own, no pointers.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) };
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn a_symlink_is_not_followed() {
        let d = TempDir::new("outfile");
        let target = d.path("root-only");
        std::fs::write(&target, b"secret").expect("write");
        let link = d.path("capture.pcap");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let e = create_output(&link, &[]).expect_err("symlink refused");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).expect("read"), b"secret");
    }

    #[test]
    fn an_input_under_another_name_is_not_overwritten() {
        let d = TempDir::new("outfile");
        std::fs::create_dir(d.path("a")).expect("dir");
        let input = d.path("x.pcap");
        std::fs::write(&input, b"input").expect("write");
        let other_spelling = d.path("a/../x.pcap");
        let hard = d.path("hard.pcap");
        std::fs::hard_link(&input, &hard).expect("link");
        let ids = [file_id(&input).expect("id")];
        for p in [&other_spelling, &hard] {
            let e = create_output(p, &ids).expect_err("input refused");
            assert!(e.to_string().contains("input of this run"), "{e}");
        }
        assert_eq!(std::fs::read(&input).expect("read"), b"input");
    }

    #[test]
    fn fifos_devices_and_proc_are_refused() {
        let d = TempDir::new("outfile");
        let fifo = d.path("fifo");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: mkfifo with a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(create_output(&fifo, &[]).is_err());
        assert!(open_input(&fifo).is_err(), "a FIFO is no pcap input");
        assert!(create_output(Path::new("/dev/null"), &[]).is_err());
        assert!(create_output(Path::new("/proc/self/comm"), &[]).is_err());
    }

    #[test]
    fn a_second_writer_is_refused() {
        let d = TempDir::new("outfile");
        let p = d.path("out.pcap");
        let _first = create_output(&p, &[]).expect("first");
        let e = create_output(&p, &[]).expect_err("second");
        assert!(e.to_string().contains("locked"), "{e}");
    }

    #[test]
    fn a_failed_check_truncates_nothing_and_leaves_no_new_file() {
        let d = TempDir::new("outfile");
        let kept = d.path("kept.pcap");
        std::fs::write(&kept, b"old capture").expect("write");
        let fresh = d.path("fresh.pcap");
        let bad = d.path("no/such/dir.pcap");
        assert!(check_outputs(&[&kept, &fresh, &bad], &[]).is_err());
        assert_eq!(std::fs::read(&kept).expect("read"), b"old capture");
        assert!(!fresh.exists(), "a file made only for the check is removed");
        // Two outputs naming one file.
        let e = check_outputs(&[&kept, &d.path("./kept.pcap")], &[]).expect_err("same file");
        assert!(e.to_string().contains("same file"), "{e}");
        assert!(check_outputs(&[&kept, &fresh], &[]).is_ok());
    }
}
