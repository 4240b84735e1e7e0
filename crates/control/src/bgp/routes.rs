//! The routes file BIRD includes: two static protocols (`<protocol>4`, `<protocol>6`) with one
//! route per VIP prefix, `via "<interface>"`, carrying the configured BGP attributes; and its
//! safe, atomic replacement ([`RoutesFile`]: an unpredictable temporary name created
//! exclusively in a directory nobody else can write, then a rename), so BIRD never reads half
//! a file and no other user can redirect or keep the write. It renders only validated values
//! (names are checked at parse time, numbers and addresses are printed by Rust); it never
//! talks to BIRD and never follows a link it did not make.

use super::BgpConfig;
use lb::model::Prefix;
use ports::outfile::HeldOutput;
use std::ffi::{CString, OsStr, OsString};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The routes file for `vips`: IPv4 prefixes in `<protocol>4`, IPv6 in `<protocol>6`, sorted and
/// deduplicated; both protocols are always present (an empty one announces nothing). `now` is
/// written in the header comment.
pub fn render(cfg: &BgpConfig, vips: &[Prefix], now: SystemTime) -> String {
    let mut v4: Vec<Prefix> = vips.iter().copied().filter(|p| !p.is_ipv6()).collect();
    let mut v6: Vec<Prefix> = vips.iter().copied().filter(|p| p.is_ipv6()).collect();
    for v in [&mut v4, &mut v6] {
        v.sort();
        v.dedup();
    }
    let mut out = format!(
        "# Written by vecplane at {}; do not edit: it is rewritten whenever the announced VIPs \
         change.\n",
        rfc3339(now)
    );
    let nh4 = cfg.next_hop4.map(|a| a.to_string());
    let nh6 = cfg.next_hop6.map(|a| a.to_string());
    for (name, family, prefixes, next_hop) in [
        (cfg.protocol4(), "ipv4", &v4, nh4),
        (cfg.protocol6(), "ipv6", &v6, nh6),
    ] {
        let attrs = attributes(cfg, next_hop.as_deref());
        let _ = writeln!(out, "protocol static {name} {{\n  {family};");
        for p in prefixes {
            let _ = writeln!(out, "  route {p} via \"{}\"{attrs};", cfg.interface);
        }
        out.push_str("}\n");
    }
    out
}

/// The per-route block (` { bgp_med = 10; ... }`), or "" when no attribute is configured.
fn attributes(cfg: &BgpConfig, next_hop: Option<&str>) -> String {
    let mut a = String::new();
    if let Some(med) = cfg.med {
        let _ = write!(a, " bgp_med = {med};");
    }
    for (asn, value) in &cfg.communities {
        let _ = write!(a, " bgp_community.add(({asn},{value}));");
    }
    for (g, l1, l2) in &cfg.large_communities {
        let _ = write!(a, " bgp_large_community.add(({g},{l1},{l2}));");
    }
    if let Some(nh) = next_hop {
        let _ = write!(a, " bgp_next_hop = {nh};");
    }
    if a.is_empty() {
        a
    } else {
        format!(" {{{a} }}")
    }
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (UTC; times before 1970 print as the epoch).
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What the routes file is, in the messages of other outputs refused over it.
pub const ROLE: &str = "the BGP routes file ([bgp] routes-file)";

/// The routes file: replaced whole on every write, and its current content held (open and
/// locked, see `ports::outfile::HeldOutput`) while this value lives, so that neither a capture
/// of this process nor a second vecplane writes over it.
///
/// Each write goes through a fresh temporary file of an unpredictable name beside it, created
/// with `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted symlink or file is never opened), given mode 0644
/// through its descriptor (BIRD may run as another user), flushed to disk and renamed over the
/// file; readers see the old file or the new one, never a part. Names are resolved against the
/// directory opened once per write, which must be safe (see [`check_directory`]).
#[derive(Debug)]
pub struct RoutesFile {
    path: PathBuf,
    current: Option<HeldOutput>,
}

impl RoutesFile {
    /// The routes file at `path` (nothing is opened yet).
    pub fn new(path: impl Into<PathBuf>) -> RoutesFile {
        RoutesFile {
            path: path.into(),
            current: None,
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replace the file with `text`. On error the temporary file is removed and the file is
    /// unchanged; the error names the file and says why.
    pub fn write(&mut self, text: &str) -> io::Result<()> {
        let held = self.replace(text).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", self.path.display()),
            )
        })?;
        self.current = Some(held);
        Ok(())
    }

    fn replace(&self, text: &str) -> io::Result<HeldOutput> {
        let (dir_path, name) = split(&self.path)?;
        let dir = open_directory(dir_path)?;
        check_directory(&dir, dir_path)?;
        self.check_current(&dir, name)?;
        let (file, tmp) = create_temporary(&dir, name)?;
        let result = (|| {
            // Through the descriptor: never a chmod by name.
            file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
            let mut held = HeldOutput::hold(file, ROLE)?;
            held.write_all(text.as_bytes())?;
            held.file().sync_all()?;
            rename_at(&dir, &tmp, name)?;
            Ok(held)
        })();
        match result {
            Ok(held) => {
                // Make the rename itself durable; a failure here leaves a correct file behind.
                let _ = dir.sync_all();
                Ok(held)
            }
            Err(e) => {
                let _ = unlink_at(&dir, &tmp);
                Err(e)
            }
        }
    }

    /// Refuse to replace a file at `name` that another output of this process or another
    /// process holds (a second vecplane with the same routes file, a `--stats-json` file).
    fn check_current(&self, dir: &File, name: &OsStr) -> io::Result<()> {
        let Some(meta) = stat_at(dir, name)? else {
            return Ok(());
        };
        let id = (meta.dev(), meta.ino());
        if self.current.as_ref().is_some_and(|c| c.id() == id) {
            return Ok(());
        }
        if let Some(role) = ports::outfile::held_role(id) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("it is {role}, which this daemon is writing; accepted: a file of its own"),
            ));
        }
        if meta.file_type().is_file() {
            let current = open_at(dir, name, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
            if !ports::outfile::try_lock(&current) {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "another process (a second vecplane?) holds it as its output; accepted: a \
                     routes file of this daemon's own",
                ));
            }
        }
        Ok(())
    }
}

/// Check, before anything is started, that the routes file can be written safely: its
/// directory passes [`check_directory`] and an existing file is no other process's output.
pub fn check_destination(path: &Path) -> Result<(), String> {
    let check = || {
        let (dir_path, name) = split(path)?;
        let dir = open_directory(dir_path)?;
        check_directory(&dir, dir_path)?;
        RoutesFile::new(path).check_current(&dir, name)
    };
    check().map_err(|e| format!("[bgp] routes-file {}: {e}", path.display()))
}

/// Write `text` to the routes file at `path` once (see [`RoutesFile`]; the lock is released
/// on return).
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    RoutesFile::new(path).write(text)
}

fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} does not name a file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

fn open_directory(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("directory {}: {e}", dir.display())))
}

/// A directory the routes file may live in: nobody but root and this daemon's user can replace
/// a file in it. Refused: a directory owned by another user (its owner may rename or remove
/// any file in it, sticky bit or not, and put its own in the place of the file BIRD includes),
/// and one others (group or world) can write without the sticky bit (they could do the same).
/// A sticky directory of root's (like /tmp) is safe: the file in it is ours.
pub fn check_directory(dir: &File, shown: &Path) -> io::Result<()> {
    let meta = dir.metadata()?;
    let mode = meta.mode() & 0o7777;
    let others_write = mode & 0o022 != 0;
    let sticky = mode & libc::S_ISVTX != 0;
    // SAFETY: geteuid has no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    let why = if meta.uid() != 0 && meta.uid() != me {
        Some(format!(
            "it is owned by uid {}, neither root nor this daemon's uid {me}, so its owner could \
             replace the file BIRD includes",
            meta.uid()
        ))
    } else if others_write && !sticky {
        Some(format!(
            "it is writable by others (mode {mode:04o}) without the sticky bit, so they could \
             replace the file BIRD includes"
        ))
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "unsafe directory {} for the routes file: {why}; accepted: a directory owned by \
                 root or this daemon's user that only its owner can write (e.g. /etc/bird), or a \
                 sticky one of theirs",
                shown.display()
            ),
        )),
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a file name with a NUL byte"))
}

/// Open `name` in `dir` (never following a symlink at `name`).
fn open_at(dir: &File, name: &OsStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    let c = c_name(name)?;
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid directory descriptor and a NUL-terminated name alive across the call.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, libc::c_uint::from(mode)) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The metadata of `name` in `dir` itself (a symlink is not followed), or None if absent.
fn stat_at(dir: &File, name: &OsStr) -> io::Result<Option<std::fs::Metadata>> {
    match open_at(dir, name, libc::O_PATH, 0) {
        Ok(f) => f.metadata().map(Some),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        // O_PATH|O_NOFOLLOW opens a symlink itself; any other error is real.
        Err(e) => Err(e),
    }
}

/// A new file `.<name>.<random>.tmp` in `dir`, created exclusively (mode 0600 until it is
/// written), and its name.
fn create_temporary(dir: &File, name: &OsStr) -> io::Result<(File, OsString)> {
    for _ in 0..16 {
        let mut random = [0u8; 12];
        // SAFETY: getrandom writes at most `random.len()` bytes into `random`.
        let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
        if got != random.len() as isize {
            return Err(io::Error::last_os_error());
        }
        let mut tmp = OsString::from(".");
        tmp.push(name);
        tmp.push(".");
        for b in random {
            tmp.push(format!("{b:02x}"));
        }
        tmp.push(".tmp");
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        match open_at(dir, &tmp, flags, 0o600) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name after 16 tries",
    ))
}

fn rename_at(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (f, t) = (c_name(from)?, c_name(to)?);
    let fd = dir.as_raw_fd();
    // SAFETY: a valid directory descriptor and two NUL-terminated names alive across the call.
    if unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn unlink_at(dir: &File, name: &OsStr) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name alive across the call.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use std::net::IpAddr;
    use std::time::Duration;

    fn p(s: &str) -> Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Prefix::new(a.parse::<IpAddr>().unwrap(), l.parse().unwrap()).unwrap()
    }

    fn at() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn render_both_families_with_attributes() {
        let mut cfg = BgpConfig::new("/run/bird/bird.ctl", "/etc/bird/vecplane.conf");
        cfg.med = Some(10);
        cfg.communities = vec![(65000, 100)];
        cfg.large_communities = vec![(65000, 1, 2)];
        cfg.next_hop4 = Some("198.18.11.2".parse().unwrap());
        let vips = [
            p("2001:db8:100::2/128"),
            p("198.18.100.2/32"),
            p("198.18.100.1/32"),
            p("198.18.100.2/32"),
        ];
        let text = render(&cfg, &vips, at());
        let expected = "# Written by vecplane at 2023-11-14T22:13:20Z; do not edit: it is \
rewritten whenever the announced VIPs change.
protocol static vecplane4 {
  ipv4;
  route 198.18.100.1/32 via \"vplbgp0\" { bgp_med = 10; bgp_community.add((65000,100)); \
bgp_large_community.add((65000,1,2)); bgp_next_hop = 198.18.11.2; };
  route 198.18.100.2/32 via \"vplbgp0\" { bgp_med = 10; bgp_community.add((65000,100)); \
bgp_large_community.add((65000,1,2)); bgp_next_hop = 198.18.11.2; };
}
protocol static vecplane6 {
  ipv6;
  route 2001:db8:100::2/128 via \"vplbgp0\" { bgp_med = 10; bgp_community.add((65000,100)); \
bgp_large_community.add((65000,1,2)); };
}
";
        assert_eq!(text, expected);
    }

    #[test]
    fn render_without_attributes_and_empty() {
        let mut cfg = BgpConfig::new("s", "r");
        cfg.protocol = "lb_a".into();
        cfg.interface = "lbdev".into();
        cfg.next_hop6 = Some("2001:db8:11::2".parse().unwrap());
        let text = render(&cfg, &[p("198.18.100.0/24"), p("2001:db8:1::/64")], at());
        assert!(
            text.contains(
                "protocol static lb_a4 {\n  ipv4;\n  route 198.18.100.0/24 via \"lbdev\";\n}\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  route 2001:db8:1::/64 via \"lbdev\" { bgp_next_hop = 2001:db8:11::2; };\n"
            ),
            "{text}"
        );
        let empty = render(&cfg, &[], at());
        assert!(
            empty.ends_with(
                "protocol static lb_a4 {\n  ipv4;\n}\nprotocol static lb_a6 {\n  ipv6;\n}\n"
            ),
            "{empty}"
        );
        assert_eq!(empty.lines().filter(|l| l.contains("route")).count(), 0);
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400 + 86_399);
        assert_eq!(rfc3339(leap), "2000-02-29T23:59:59Z");
        let before = UNIX_EPOCH - Duration::from_secs(5);
        assert_eq!(rfc3339(before), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn write_atomically_replaces_and_leaves_no_temporary() {
        let dir = TempDir::new();
        let path = dir.path().join("vecplane.conf");
        write_atomically(&path, "one\n").unwrap();
        write_atomically(&path, "two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        // A missing directory: an error naming the file, nothing created.
        let bad = dir.path().join("no/such/dir/r.conf");
        let e = write_atomically(&bad, "x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir/r.conf"), "{e}");
    }
}
