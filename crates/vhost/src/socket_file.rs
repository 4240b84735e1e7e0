//! The server-mode socket file: it exists only with its final mode (0600 unless configured) and
//! group. It is bound in a fresh private (0700) directory next to its path, given its mode and
//! group there, and renamed into place, so no umask and no moment lets another user connect.
//!
//! It owns that creation and the removal of its own file. It never changes the process umask
//! (shared by every thread), never follows a path it did not create, and never replaces a file
//! that is not a socket.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// The mode of a socket file when none is configured: its owner only.
pub const DEFAULT_SOCKET_PERMISSIONS: u32 = 0o600;

/// The longest path a UNIX socket address holds.
const SUN_PATH_MAX: usize = 107;
/// The socket's name inside the private directory.
const TEMP_NAME: &CStr = c"s";

/// Who may connect to a server-mode socket: its mode and, optionally, its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits (0..=0o777) of the socket file.
    pub permissions: u32,
    /// The group the socket file gets (the process's own group when none).
    pub group: Option<SocketGroup>,
}

impl Default for SocketAccess {
    fn default() -> SocketAccess {
        SocketAccess {
            permissions: DEFAULT_SOCKET_PERMISSIONS,
            group: None,
        }
    }
}

/// A group, as configured and as resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketGroup {
    /// As written (a name or a number).
    pub name: String,
    /// Its id.
    pub gid: u32,
}

/// What `parse_permissions` and `SocketGroup::lookup` accept, for messages.
pub const PERMISSIONS_ACCEPTED: &str =
    "an octal mode of 3 or 4 digits from \"0000\" to \"0777\" (e.g. \"0600\", \"0660\")";
/// What `SocketGroup::lookup` accepts, for messages.
pub const GROUP_ACCEPTED: &str = "a group name of this host's group database, or a numeric gid";

/// An octal mode such as "0660" or "660": permission bits only (no setuid, setgid or sticky).
pub fn parse_permissions(s: &str) -> Result<u32, String> {
    let digits_ok = (3..=4).contains(&s.len()) && s.bytes().all(|b| (b'0'..=b'7').contains(&b));
    let mode = if digits_ok {
        u32::from_str_radix(s, 8).ok()
    } else {
        None
    };
    match mode {
        Some(m) if m <= 0o777 => Ok(m),
        _ => Err(format!(
            "`{s}` is not a socket mode; accepted: {PERMISSIONS_ACCEPTED}"
        )),
    }
}

impl SocketGroup {
    /// Resolve a group name (or a numeric gid) on this host.
    pub fn lookup(name: &str) -> Result<SocketGroup, String> {
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            return match name.parse::<u32>() {
                Ok(gid) if gid != u32::MAX => Ok(SocketGroup {
                    name: name.to_string(),
                    gid,
                }),
                _ => Err(format!(
                    "gid `{name}` is out of range; accepted: {GROUP_ACCEPTED}"
                )),
            };
        }
        let unknown = || format!("no group `{name}` on this host; accepted: {GROUP_ACCEPTED}");
        let c_name = CString::new(name).map_err(|_| unknown())?;
        let mut buf = vec![0u8; 4096];
        loop {
            // SAFETY: plain-old-data out-parameters, zeroed.
            let mut grp: libc::group = unsafe { std::mem::zeroed() };
            let mut found: *mut libc::group = std::ptr::null_mut();
            // SAFETY: a NUL-terminated name, out-parameters and a buffer of `buf.len()` bytes
            // that live for the duration of the call (getgrnam_r is reentrant).
            let rc = unsafe {
                libc::getgrnam_r(
                    c_name.as_ptr(),
                    &mut grp,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut found,
                )
            };
            if rc == libc::ERANGE && buf.len() < (1 << 20) {
                buf.resize(buf.len() * 4, 0);
                continue;
            }
            if rc != 0 || found.is_null() {
                return Err(unknown());
            }
            return Ok(SocketGroup {
                name: name.to_string(),
                gid: grp.gr_gid,
            });
        }
    }
}

/// A socket file this process created; removed on drop unless another took its path since.
/// (The control socket's owner too.)
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// (device, inode) of our socket.
    id: (u64, u64),
}

impl SocketFile {
    /// The socket file at `path` whose (device, inode) is `id`, as this process bound it.
    pub fn bound(path: PathBuf, id: (u64, u64)) -> SocketFile {
        SocketFile { path, id }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.id {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// A fresh private directory; removed (with what is left in it) on drop.
struct PrivateDir {
    path: PathBuf,
    dir: File,
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // SAFETY: a valid directory descriptor and a NUL-terminated name; unlinkat never
        // follows a symlink.
        unsafe { libc::unlinkat(self.dir.as_raw_fd(), TEMP_NAME.as_ptr(), 0) };
        let _ = std::fs::remove_dir(&self.path);
    }
}

fn last_error(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

/// Create a directory of a fresh, unguessed name in `parent`, mode 0700, and open it.
fn private_dir(parent: &Path) -> Result<PrivateDir, String> {
    let seed = std::collections::hash_map::RandomState::new();
    for attempt in 0u32..16 {
        let mut h = seed.build_hasher();
        h.write_u32(std::process::id());
        h.write_u32(attempt);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let path = parent.join(format!(".vu-{:012x}", h.finish() & 0xffff_ffff_ffff));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot create a private directory in {}: {e}",
                    parent.display()
                ))
            }
        }
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| "the path holds a NUL byte".to_string())?;
        // SAFETY: a NUL-terminated path; the descriptor returned is owned below.
        let fd = unsafe {
            libc::open(
                c_path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let why = last_error("cannot open the private directory");
            let _ = std::fs::remove_dir(&path);
            return Err(why);
        }
        // SAFETY: `fd` was just opened and nothing else owns it.
        let dir_file = unsafe { File::from_raw_fd(fd) };
        let dir = PrivateDir {
            path,
            dir: dir_file,
        };
        // Our own directory (not one planted between mkdir and open), owner-only whatever
        // the umask made of it.
        let m = dir.dir.metadata().map_err(|e| e.to_string())?;
        // SAFETY: geteuid has no preconditions.
        if m.uid() != unsafe { libc::geteuid() } {
            return Err(format!(
                "the private directory {} is not ours",
                dir.path.display()
            ));
        }
        // SAFETY: a valid descriptor.
        if unsafe { libc::fchmod(dir.dir.as_raw_fd(), 0o700) } != 0 {
            return Err(last_error("cannot make the private directory 0700"));
        }
        return Ok(dir);
    }
    Err(format!(
        "cannot create a private directory in {}: every name tried exists",
        parent.display()
    ))
}

/// Listen on `target` with `access`: a stale socket there is replaced, anything else refused.
/// The socket file never exists at `target` with another mode or group.
pub(crate) fn bind(
    target: &Path,
    access: &SocketAccess,
) -> Result<(UnixListener, SocketFile), String> {
    let Some(name) = target.file_name() else {
        return Err("the path names no file".into());
    };
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.file_type().is_socket() => {}
        Ok(_) => {
            return Err(
                "the path exists and is not a socket; refusing to replace it (accepted: a \
                 missing path or a stale socket)"
                    .into(),
            )
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot inspect the path: {e}")),
    }
    let dir = private_dir(parent)?;
    let dir_fd = dir.dir.as_raw_fd();
    // Bind through the directory's own path when it fits a socket address, else through the
    // descriptor (/proc/self/fd/N names the directory we opened, whatever its path).
    let direct = dir
        .path
        .join(Path::new(std::ffi::OsStr::from_bytes(TEMP_NAME.to_bytes())));
    let bind_at = if direct.as_os_str().len() <= SUN_PATH_MAX {
        direct
    } else {
        PathBuf::from(format!("/proc/self/fd/{dir_fd}/s"))
    };
    let listener = UnixListener::bind(&bind_at).map_err(|e| format!("cannot listen: {e}"))?;
    if let Some(g) = &access.group {
        // SAFETY: a valid directory descriptor and a NUL-terminated name of our own file in a
        // directory only we can enter.
        let rc = unsafe {
            libc::fchownat(
                dir_fd,
                TEMP_NAME.as_ptr(),
                u32::MAX,
                g.gid,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            return Err(last_error(&format!(
                "cannot give the socket to group `{}` (gid {})",
                g.name, g.gid
            )));
        }
    }
    // SAFETY: as above (our own socket file, not a symlink).
    if unsafe { libc::fchmodat(dir_fd, TEMP_NAME.as_ptr(), access.permissions, 0) } != 0 {
        return Err(last_error(&format!(
            "cannot set the socket's mode {:04o}",
            access.permissions
        )));
    }
    // SAFETY: a zeroed plain-old-data out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor, a NUL-terminated name and an out-parameter that outlives it.
    let rc = unsafe {
        libc::fstatat(
            dir_fd,
            TEMP_NAME.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(last_error("cannot inspect the new socket"));
    }
    let c_target = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| "the path holds a NUL byte".to_string())?;
    // rename replaces a stale socket atomically and never follows a symlink at `target`.
    // SAFETY: a valid directory descriptor and NUL-terminated names.
    let rc = unsafe {
        libc::renameat(
            dir_fd,
            TEMP_NAME.as_ptr(),
            libc::AT_FDCWD,
            c_target.as_ptr(),
        )
    };
    if rc != 0 {
        return Err(last_error(&format!(
            "cannot move the socket into place as {}",
            Path::new(name).display()
        )));
    }
    drop(dir);
    let file = SocketFile {
        path: target.to_path_buf(),
        id: (st.st_dev, st.st_ino),
    };
    Ok((listener, file))
}

#[cfg(test)]
#[path = "socket_file_tests.rs"]
mod tests;
