//! Output files a root daemon writes on an operator's word (pcap `tx`, `ctl pcap start`,
//! `--stats-json`) and the input files it reads: opened without following a symlink, only as
//! regular files on a real file system (no FIFO, device, /proc or /sys), never over the config
//! or an input (compared by device and inode, not by path text), and locked against a second
//! writer; `check_outputs` verifies every output of a start before any is truncated. The
//! outputs a run holds ([`HeldOutput`]: pcap tx files, a capture, `--stats-json`, the BGP routes
//! file) are known by identity and by what they are, so no later output of the same process
//! (a `ctl pcap start`) is opened over one of them, and a second process is kept out by the
//! lock. It never decides which files a run needs: callers pass them.

use crate::error::PortError;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

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
    let id = (meta.dev(), meta.ino());
    if forbidden.contains(&id) {
        return Err(refuse(
            path,
            "it is the config file or an input of this run (another name for the same file)",
        ));
    }
    if let Some(role) = held_role(id) {
        return Err(refuse(
            path,
            format!(
                "it is {role}, which this daemon is writing; accepted: a file of its own for \
                 each output"
            ),
        ));
    }
    if !try_lock(&file) {
        return Err(refuse(
            path,
            "another writer (another process, e.g. a second vecplane) has it open and locked",
        ));
    }
    Ok(file)
}

/// Take the exclusive lock every output is held with; false when another open file (another
/// process's, or another output of this one) holds it. Closing `file` releases it.
pub fn try_lock(file: &File) -> bool {
    // SAFETY: flock on a descriptor we own; no memory is passed.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// The outputs this process holds, by identity, with what each is ("the --stats-json file").
static HELD: Mutex<Vec<(FileId, String)>> = Mutex::new(Vec::new());

fn held() -> MutexGuard<'static, Vec<(FileId, String)>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the output file `id` of this process is, if this process holds it.
pub fn held_role(id: FileId) -> Option<String> {
    held()
        .iter()
        .find(|(h, _)| *h == id)
        .map(|(_, r)| r.clone())
}

/// An output file this process writes, open and exclusively locked for as long as this value
/// lives, and known by what it is (`role`, e.g. "the --stats-json file of this run"): any later
/// `open_output` of the same file is refused naming it, and another process is refused by the
/// lock.
#[derive(Debug)]
pub struct HeldOutput {
    file: File,
    id: FileId,
}

impl HeldOutput {
    /// Hold `file` as `role`: lock it (refused when another open file holds the lock) and
    /// register it.
    pub fn hold(file: File, role: impl Into<String>) -> io::Result<HeldOutput> {
        let meta = file.metadata()?;
        if !try_lock(&file) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "another writer (another process, e.g. a second vecplane) has it open and locked",
            ));
        }
        let id = (meta.dev(), meta.ino());
        held().push((id, role.into()));
        Ok(HeldOutput { file, id })
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file's identity.
    pub fn id(&self) -> FileId {
        self.id
    }
}

impl Drop for HeldOutput {
    fn drop(&mut self) {
        let mut h = held();
        if let Some(i) = h.iter().position(|(id, _)| *id == self.id) {
            h.swap_remove(i);
        }
    }
}

impl Write for HeldOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A byte sink that can be cut back to a length: a writer that failed half-way through a
/// record cuts its output back to the last whole one.
pub trait Truncate: Write {
    /// Make the output `len` bytes long and write on from there.
    fn truncate_to(&mut self, len: u64) -> io::Result<()>;
}

impl Truncate for File {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(|_| ())
    }
}

impl Truncate for HeldOutput {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.file.truncate_to(len)
    }
}

impl Truncate for Vec<u8> {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(())
    }
}

impl<T: Truncate + ?Sized> Truncate for &mut T {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        (**self).truncate_to(len)
    }
}

/// Open, check and lock an output, then truncate it (see `open_output`).
pub fn create_output(path: &Path, forbidden: &[FileId]) -> Result<File, PortError> {
    let file = open_output(path, forbidden)?;
    file.set_len(0)
        .map_err(|e| PortError::io(&path.display().to_string(), "truncate", e))?;
    Ok(file)
}

/// `create_output`, then hold the file as `role` (see [`HeldOutput`]) until the value drops.
pub fn create_held(
    path: &Path,
    forbidden: &[FileId],
    role: impl Into<String>,
) -> Result<HeldOutput, PortError> {
    let file = create_output(path, forbidden)?;
    HeldOutput::hold(file, role).map_err(|e| PortError::io(&path.display().to_string(), "hold", e))
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
    fn a_held_output_is_refused_by_what_it_is_and_released_on_drop() {
        let d = TempDir::new("outfile");
        let p = d.path("stats.json");
        let held = create_held(&p, &[], "the --stats-json file of this run").expect("held");
        let other_spelling = d.path("./stats.json");
        let e = create_output(&other_spelling, &[]).expect_err("refused");
        assert!(
            e.to_string()
                .contains("it is the --stats-json file of this run, which this daemon is writing"),
            "{e}"
        );
        assert_eq!(
            held_role(held.id()).as_deref(),
            Some("the --stats-json file of this run")
        );
        let id = held.id();
        drop(held);
        assert_eq!(held_role(id), None);
        create_output(&p, &[]).expect("free again");
    }

    #[test]
    fn truncate_cuts_back_and_writes_on_from_there() {
        let d = TempDir::new("outfile");
        let p = d.path("cut");
        let mut f = create_output(&p, &[]).expect("create");
        f.write_all(b"whole|torn").expect("write");
        f.truncate_to(6).expect("cut");
        f.write_all(b"next").expect("write");
        assert_eq!(std::fs::read(&p).expect("read"), b"whole|next");
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
