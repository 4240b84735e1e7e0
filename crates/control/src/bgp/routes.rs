//! The routes file BIRD includes: two static protocols (`<protocol>4`, `<protocol>6`) with one
//! route per VIP prefix, `via "<interface>"`, carrying the configured BGP attributes; and its
//! atomic replacement (a temporary file in the same directory, then a rename), so BIRD never
//! reads half a file. It renders only validated values (names are checked at parse time,
//! numbers and addresses are printed by Rust); it never talks to BIRD.

use super::BgpConfig;
use lb::model::Prefix;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
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

/// Replace `path` with `text` atomically: write a temporary file beside it (same directory, so
/// the rename cannot cross file systems), flush it to disk, rename it over `path`. Readers see
/// the old file or the new one, never a part. The file is readable by all (mode 0644: BIRD may
/// run as another user). On error the temporary file is removed and `path` is unchanged.
pub fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
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
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .open(&tmp)?;
        // The mode above is masked by the umask; BIRD may run as another user.
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    match result {
        Ok(()) => {
            // Make the rename itself durable; a failure here leaves a correct file behind.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            ))
        }
    }
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
