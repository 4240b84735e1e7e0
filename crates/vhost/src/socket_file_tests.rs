//! The socket file's mode and group whatever the umask, checked by a second, unprivileged user
//! the test creates (root needed: skipped on a developer's machine without it, failed in CI).

use super::*;
use crate::{SocketMode, VhostUserDevice};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

static SEQ: AtomicU32 = AtomicU32::new(0);
/// The umask is the process's: tests that change it take turns.
static UMASK: Mutex<()> = Mutex::new(());

/// A fresh directory anyone may enter (so only the socket's own mode decides), removed on drop.
struct TestDir(PathBuf);

impl TestDir {
    fn new() -> TestDir {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("vp-vu-sock-{}-{n}", std::process::id()));
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        TestDir(p)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Run `f` with the process umask at `mask`, restored after.
fn under_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
    let _turn = UMASK.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: umask has no preconditions.
    let old = unsafe { libc::umask(mask) };
    let r = f();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    r
}

#[test]
fn a_server_socket_is_0600_under_umask_000() {
    let dir = TestDir::new();
    let path = dir.0.join("vm.sock");
    let device = under_umask(0, || VhostUserDevice::open(&path, SocketMode::Server, 1)).unwrap();
    assert_eq!(mode_of(&path), 0o600);
    // Nothing else was left in the directory (the private one is gone).
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("vm.sock")]);
    drop(device);
    assert!(!path.exists(), "the port removes its socket when it closes");
}

#[test]
fn a_configured_mode_is_the_sockets_mode_whatever_the_umask() {
    let dir = TestDir::new();
    let path = dir.0.join("vm.sock");
    let access = SocketAccess {
        permissions: 0o660,
        group: None,
    };
    let _d = under_umask(0o077, || {
        VhostUserDevice::open_with(&path, SocketMode::Server, 1, 1, &access)
    })
    .unwrap();
    assert_eq!(mode_of(&path), 0o660);
}

#[test]
fn a_stale_socket_is_replaced_and_anything_else_refused() {
    let dir = TestDir::new();
    let path = dir.0.join("vm.sock");
    // A stale socket (its listener gone).
    drop(UnixListener::bind(&path).unwrap());
    let d = VhostUserDevice::open(&path, SocketMode::Server, 1).unwrap();
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
    drop(d);
    std::fs::write(&path, b"not a socket").unwrap();
    let e = VhostUserDevice::open(&path, SocketMode::Server, 1)
        .err()
        .unwrap();
    assert!(e.why.contains("is not a socket"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
    std::fs::remove_file(&path).unwrap();
    let target = dir.0.join("target");
    std::fs::write(&target, b"x").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let e = VhostUserDevice::open(&path, SocketMode::Server, 1)
        .err()
        .unwrap();
    assert!(e.why.contains("is not a socket"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"x");
}

#[test]
fn a_closing_port_leaves_a_newer_socket_on_its_path_alone() {
    let dir = TestDir::new();
    let path = dir.0.join("vm.sock");
    let old = VhostUserDevice::open(&path, SocketMode::Server, 1).unwrap();
    let new = VhostUserDevice::open(&path, SocketMode::Server, 1).unwrap();
    drop(old);
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
    drop(new);
    assert!(!path.exists());
}

#[test]
fn a_path_near_the_address_limit_binds_through_the_directory_descriptor() {
    let dir = TestDir::new();
    let room = SUN_PATH_MAX - dir.0.as_os_str().len() - 1;
    let path = dir.0.join("v".repeat(room));
    assert_eq!(path.as_os_str().len(), SUN_PATH_MAX);
    let _d = under_umask(0, || VhostUserDevice::open(&path, SocketMode::Server, 1)).unwrap();
    assert_eq!(mode_of(&path), 0o600);
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
}

#[test]
fn permissions_are_octal_permission_bits_only() {
    assert_eq!(parse_permissions("0600"), Ok(0o600));
    assert_eq!(parse_permissions("660"), Ok(0o660));
    assert_eq!(parse_permissions("0000"), Ok(0));
    for bad in [
        "",
        "6",
        "60",
        "0x660",
        "0690",
        "4755",
        "1777",
        "00600",
        "rw-rw----",
        "+660",
    ] {
        let e = parse_permissions(bad).unwrap_err();
        assert!(e.contains("accepted: an octal mode"), "{bad}: {e}");
    }
}

#[test]
fn groups_resolve_by_name_or_number() {
    assert_eq!(SocketGroup::lookup("root").unwrap().gid, 0);
    assert_eq!(SocketGroup::lookup("1234").unwrap().gid, 1234);
    for bad in ["no-such-group-vp", "", "a\0b", "99999999999"] {
        let e = SocketGroup::lookup(bad).unwrap_err();
        assert!(e.contains("accepted: a group name"), "{bad:?}: {e}");
    }
}

/// A user (and a group it belongs to) created for the test; both removed on drop.
struct TestUser {
    name: String,
    group: String,
    uid: u32,
    gid: u32,
    extra_gid: u32,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl TestUser {
    fn create() -> Result<TestUser, String> {
        let tag = format!(
            "{}x{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let (name, group) = (format!("vpvu{tag}"), format!("vpvg{tag}"));
        run("groupadd", &[&group])?;
        let mut user = TestUser {
            name: name.clone(),
            group: group.clone(),
            uid: 0,
            gid: 0,
            extra_gid: 0,
        };
        run(
            "useradd",
            &[
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "--user-group",
                "--groups",
                &group,
                &name,
            ],
        )?;
        let id = |flag: &str| -> Result<u32, String> {
            run("id", &[flag, &name])?
                .parse()
                .map_err(|e| format!("id {flag}: {e}"))
        };
        user.uid = id("-u")?;
        user.gid = id("-g")?;
        user.extra_gid = SocketGroup::lookup(&group)?.gid;
        Ok(user)
    }

    /// Whether a process of this user (with `groups` as its supplementary groups) may connect
    /// to `path`: Ok, or the connect's error.
    fn connect(&self, groups: &[u32], path: &Path) -> io::Result<()> {
        // SAFETY: a zeroed sockaddr_un is valid; the path fits (checked).
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.as_os_str().as_bytes();
        assert!(bytes.len() < addr.sun_path.len());
        for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
            *d = *s as libc::c_char;
        }
        let (uid, gid, groups) = (self.uid, self.gid, groups.to_vec());
        let mut cmd = Command::new("/bin/true");
        // SAFETY: the closure makes only async-signal-safe system calls (no allocation: the
        // address and groups were prepared before the fork).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let rc = libc::connect(
                    fd,
                    (&addr as *const libc::sockaddr_un).cast(),
                    std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
                );
                if rc != 0 {
                    return Err(io::Error::last_os_error());
                }
                libc::close(fd);
                Ok(())
            })
        };
        cmd.status().map(|_| ())
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = run("userdel", &[&self.name]);
        let _ = run("groupdel", &[&self.group]);
    }
}

fn missing_for_users() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root to create a second user".into());
    }
    ["useradd", "groupadd", "userdel", "groupdel"]
        .into_iter()
        .find(|t| Command::new(t).arg("--help").output().is_err())
        .map(|t| format!("needs `{t}`"))
}

#[test]
fn another_user_cannot_connect_and_a_member_of_the_configured_group_can() {
    if !testenv::can_run(missing_for_users()) {
        return;
    }
    let user = TestUser::create().unwrap();
    let dir = TestDir::new();
    let private = dir.0.join("private.sock");
    let _p = under_umask(0, || VhostUserDevice::open(&private, SocketMode::Server, 1)).unwrap();
    let refused = user.connect(&[user.gid], &private).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");

    let shared = dir.0.join("shared.sock");
    let access = SocketAccess {
        permissions: 0o660,
        group: Some(SocketGroup::lookup(&user.group).unwrap()),
    };
    let _s = under_umask(0, || {
        VhostUserDevice::open_with(&shared, SocketMode::Server, 1, 1, &access)
    })
    .unwrap();
    let m = std::fs::symlink_metadata(&shared).unwrap();
    assert_eq!((m.mode() & 0o7777, m.gid()), (0o660, user.extra_gid));
    user.connect(&[user.gid, user.extra_gid], &shared).unwrap();
    // Membership is what grants it: without the group the same user is refused.
    let refused = user.connect(&[user.gid], &shared).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");
}
