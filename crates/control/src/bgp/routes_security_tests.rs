//! The routes file against a hostile local user: a second, unprivileged user created by the
//! test plants symlinks and files where a predictable writer would put its temporary file, and
//! owns or can write the directory. Root's write must never follow a link, never leave a file
//! that user owns, and refuse a directory that user could change. Needs root (skipped on a
//! developer's machine without it, a failure in CI).

use super::routes::{check_destination, write_atomically, RoutesFile};
use crate::testutil::TempDir;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// A local user made for one test and removed when dropped (also when the test fails).
struct HostileUser {
    name: String,
    uid: u32,
    gid: u32,
}

/// useradd and userdel lock /etc/passwd: one at a time within this process.
static ACCOUNTS: Mutex<()> = Mutex::new(());

fn accounts(args: &[&str]) -> Result<Output, String> {
    let _one = ACCOUNTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut last = String::new();
    // Another process (another test binary) may hold the lock for a moment.
    for _ in 0..20 {
        match Command::new(args[0]).args(&args[1..]).output() {
            Ok(o) if o.status.success() => return Ok(o),
            Ok(o) => last = String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => return Err(format!("cannot run {}: {e}", args[0])),
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!("{args:?} failed: {last}"))
}

impl HostileUser {
    /// A new user, or None (after `testenv::skip`) when this is not root or useradd fails.
    fn create() -> Option<HostileUser> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            testenv::skip("creating a second user needs root");
            return None;
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "vph{}x{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let made = accounts(&[
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            &name,
        ]);
        if let Err(why) = made {
            testenv::skip(&format!("cannot create a test user: {why}"));
            return None;
        }
        // From here on, Drop removes the user.
        let mut user = HostileUser {
            name,
            uid: 0,
            gid: 0,
        };
        let id = |flag: &str| -> u32 {
            let o = accounts(&["id", flag, &user.name]).expect("id of the new user");
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .expect("a number")
        };
        user.uid = id("-u");
        user.gid = id("-g");
        assert_ne!(user.uid, 0);
        Some(user)
    }

    /// Run `program args` as this user (no supplementary groups: std drops root's).
    fn run(&self, program: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) {
        let o = Command::new(program)
            .args(args.iter().map(|a| a.as_ref()))
            .uid(self.uid)
            .gid(self.gid)
            .output()
            .expect("run as the test user");
        assert!(
            o.status.success(),
            "{program} as {} failed: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
    }

    fn owns(&self, path: &Path) {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid)).expect("chown");
    }
}

impl Drop for HostileUser {
    fn drop(&mut self) {
        if let Err(e) = accounts(&["userdel", &self.name]) {
            eprintln!("could not remove test user {}: {e}", self.name);
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A root-only file the hostile user would like root to overwrite.
fn victim(dir: &Path) -> std::path::PathBuf {
    let v = dir.join("victim");
    std::fs::write(&v, "root's secret\n").expect("victim");
    chmod(&v, 0o600);
    v
}

fn assert_victim_untouched(v: &Path) {
    assert_eq!(
        std::fs::read_to_string(v).expect("victim"),
        "root's secret\n"
    );
    let m = std::fs::metadata(v).expect("victim");
    assert_eq!(
        (m.mode() & 0o7777, m.uid()),
        (0o600, 0),
        "victim's mode or owner changed"
    );
}

/// The routes file is a regular file of root's, mode 0644, holding `text`.
fn assert_root_owned_routes(path: &Path, text: &str) {
    let m = std::fs::symlink_metadata(path).expect("routes file");
    assert!(
        m.file_type().is_file(),
        "{} is not a regular file",
        path.display()
    );
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (0, 0, 0o644));
    assert_eq!(std::fs::read_to_string(path).expect("read"), text);
}

/// What is left in `dir` besides `keep`.
fn others(dir: &Path, keep: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect();
    v.sort();
    v
}

#[test]
fn planted_links_and_files_in_a_sticky_directory_are_never_written_through() {
    let Some(user) = HostileUser::create() else {
        return;
    };
    let base = TempDir::new();
    let victim = victim(base.path());
    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).expect("dir");
    chmod(&shared, 0o1777);
    let routes = shared.join("vecplane.conf");
    // Where a writer using `.NAME.tmp.PID` (this process's id) or similar would write.
    let pid = std::process::id();
    let link_names = [
        format!(".vecplane.conf.tmp.{pid}"),
        ".vecplane.conf.tmp".to_string(),
        "vecplane.conf.tmp".to_string(),
    ];
    for n in &link_names {
        user.run("ln", &[&"-s", &victim, &shared.join(n)]);
    }
    // A regular file of the user's at another plausible name.
    let planted = shared.join(format!("vecplane.conf.{pid}.tmp"));
    user.run(
        "sh",
        &[&"-c", &format!("echo mine > {}", planted.display())],
    );

    write_atomically(&routes, "one\n").expect("write in a sticky root directory");
    assert_victim_untouched(&victim);
    assert_root_owned_routes(&routes, "one\n");
    for n in &link_names {
        let m = std::fs::symlink_metadata(shared.join(n)).expect("planted link");
        assert!(
            m.file_type().is_symlink() && m.uid() == user.uid,
            "{n} was replaced"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&planted).expect("planted"),
        "mine\n"
    );

    // Now a regular file of the user's at the old predictable name, and the routes file
    // itself replaced by the user's symlink while nothing holds it: the write puts a file of
    // root's in its place and leaves the user's files as they were.
    let old_name = shared.join(format!(".vecplane.conf.tmp.{pid}"));
    std::fs::remove_file(&old_name).expect("remove");
    user.run(
        "sh",
        &[&"-c", &format!("echo mine > {}", old_name.display())],
    );
    std::fs::remove_file(&routes).expect("remove");
    user.run("ln", &[&"-s", &victim, &routes]);
    let mut file = RoutesFile::new(&routes);
    file.write("two\n").expect("second write");
    assert_victim_untouched(&victim);
    assert_root_owned_routes(&routes, "two\n");
    let m = std::fs::metadata(&old_name).expect("planted file");
    assert_eq!(m.uid(), user.uid);
    assert_eq!(
        std::fs::read_to_string(&old_name).expect("planted"),
        "mine\n"
    );
    // No temporary file of ours is left behind.
    let mut expected: Vec<String> = link_names.to_vec();
    expected.push(format!("vecplane.conf.{pid}.tmp"));
    expected.sort();
    assert_eq!(others(&shared, &["vecplane.conf"]), expected);
}

#[test]
fn a_directory_another_user_owns_or_can_write_is_refused() {
    let Some(user) = HostileUser::create() else {
        return;
    };
    let base = TempDir::new();
    let victim = victim(base.path());
    let cases = [
        ("theirs", 0o755, true, "owned by uid"),
        ("theirs-sticky", 0o1777, true, "owned by uid"),
        (
            "world",
            0o777,
            false,
            "writable by others (mode 0777) without the sticky bit",
        ),
        (
            "group",
            0o775,
            false,
            "writable by others (mode 0775) without the sticky bit",
        ),
    ];
    for (name, mode, theirs, needle) in cases {
        let dir = base.path().join(name);
        std::fs::create_dir(&dir).expect("dir");
        if theirs {
            user.owns(&dir);
        } else {
            std::os::unix::fs::chown(&dir, Some(0), Some(user.gid)).expect("chown");
        }
        chmod(&dir, mode);
        let routes = dir.join("vecplane.conf");
        user.run("ln", &[&"-s", &victim, &dir.join(".vecplane.conf.tmp")]);
        let e = write_atomically(&routes, "x\n").expect_err(name);
        let msg = e.to_string();
        assert!(
            msg.contains(needle) && msg.contains(&dir.display().to_string()),
            "{name}: {msg}"
        );
        let e = check_destination(&routes).expect_err(name);
        assert!(
            e.contains("[bgp] routes-file") && e.contains(needle),
            "{name}: {e}"
        );
        assert_eq!(
            others(&dir, &[]),
            vec![".vecplane.conf.tmp".to_string()],
            "{name}"
        );
        assert_victim_untouched(&victim);
    }
    // Root's own sticky directory is accepted.
    let tmp = base.path().join("sticky");
    std::fs::create_dir(&tmp).expect("dir");
    chmod(&tmp, 0o1777);
    check_destination(&tmp.join("vecplane.conf")).expect("root's sticky dir");
}

#[test]
fn the_routes_file_is_held_against_other_outputs_and_other_writers() {
    let dir = TempDir::new();
    let routes = dir.path().join("vecplane.conf");
    let mut file = RoutesFile::new(&routes);
    file.write("one\n").expect("write");
    for round in 0..2 {
        // A capture (any output of this process) over it is refused, naming what it is.
        let e = ports::outfile::create_output(&routes, &[]).expect_err("held");
        assert!(
            e.to_string().contains("BGP routes file"),
            "round {round}: {e}"
        );
        // So is a second routes writer of this process.
        let e = write_atomically(&routes, "other\n").expect_err("held");
        assert!(e.to_string().contains("BGP routes file"), "{e}");
        // Each write holds the new file.
        file.write("two\n").expect("rewrite");
    }
    assert_eq!(std::fs::read_to_string(&routes).expect("read"), "two\n");
    drop(file);

    // Another process's lock (flock is per open file, as another process's would be).
    // A lock lives as long as its open file: a child another test of this process forks keeps
    // a just-closed file (and its lock) open until it execs, so taking a lock may wait a moment.
    let other = std::fs::File::open(&routes).expect("open");
    // SAFETY: flock on a descriptor we own.
    let lock = || unsafe { libc::flock(other.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    assert!(
        eventually(lock),
        "the file stayed locked after its writer closed it"
    );
    let e = write_atomically(&routes, "three\n").expect_err("locked by another");
    assert!(e.to_string().contains("another process"), "{e}");
    let e = check_destination(&routes).expect_err("locked by another");
    assert!(e.contains("another process"), "{e}");
    drop(other);
    let mut last = None;
    let free = || match write_atomically(&routes, "three\n") {
        Ok(()) => true,
        Err(e) => {
            last = Some(e);
            false
        }
    };
    assert!(eventually(free), "not free again: {last:?}");
}

/// Whether `f` holds within 5 s of trying (see the forked-child note above).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
