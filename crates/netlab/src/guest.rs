//! QEMU guests for tests and the demo: [`GuestImage`] builds or finds the guest kernel and
//! initramfs (scripts/guest/build-guest.sh, cached under the target directory), [`Guest`] runs
//! one `qemu-system-x86_64` with the NICs of a [`GuestSpec`] (vhost-user sockets, QEMU socket
//! netdevs joining guests directly, or TAP devices, optionally inside a network namespace; see
//! [`crate::guest_spec`]), waits for its ready line on the serial console and runs shell
//! commands there.
//!
//! A guest owns its QEMU process, its console connection and its scratch directory (console log,
//! QEMU log, console socket): all are stopped and deleted on drop, and the directory on
//! SIGINT/SIGTERM/SIGHUP through [`crate::cleanup`]. QEMU is started from one long-lived thread
//! with a parent-death signal, so it dies with this process even when the process is killed or
//! aborts. It never signals a process it did not start, never deletes a vhost-user socket (the
//! caller owns those), and only accepts addresses from 198.18.0.0/15 and 2001:db8::/32.

use crate::cleanup;
use crate::cmd::{describe_status, run_bounded, tool_available};
pub use crate::guest_spec::{guest_mac, qemu_args, GuestSpec, Mac, NicSpec, DEFAULT_BOOT_TIMEOUT};
use crate::names::Names;
use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant};

/// Prefix of the guests' scratch directories (`<tmp>/vng-<pid>-<seq>`).
pub const GUEST_PREFIX: &str = "vng";

/// The line the guest's /init prints on the console when it is set up.
pub const READY_LINE: &str = "VP-READY";

/// The QEMU binary.
pub const QEMU: &str = "qemu-system-x86_64";

/// Longest command [`Guest::run`] sends (the console reads lines of at most 4095 bytes).
const COMMAND_MAX: usize = 3500;

/// Grace between SIGTERM and SIGKILL when a guest is stopped.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The guest kernel and initramfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestImage {
    /// Uncompressed kernel (PVH boot).
    pub vmlinux: PathBuf,
    /// gzip'd cpio initramfs.
    pub initrd: PathBuf,
}

/// The image build script of this repository.
pub fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest/build-guest.sh")
}

/// The build script's text, for a binary running away from its source tree.
const EMBEDDED_BUILD_SCRIPT: &str = include_str!("../../../scripts/guest/build-guest.sh");

/// Where the image is cached: `$VP_GUEST_DIR`, else `$CARGO_TARGET_DIR/guest`, else
/// `<workspace>/target/guest`, else (a binary away from its source tree)
/// `$XDG_CACHE_HOME/vecplane/guest` or `$HOME/.cache/vecplane/guest`.
pub fn image_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VP_GUEST_DIR") {
        return PathBuf::from(d);
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("guest");
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if workspace.join("Cargo.toml").is_file() {
        return workspace.join("target/guest");
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("vecplane/guest")
}

static IMAGE: Mutex<Option<GuestImage>> = Mutex::new(None);

impl GuestImage {
    /// For a test: the image, or None after reporting (through `testenv`: skipped on a
    /// developer's machine, a failure in CI) why guests cannot run here.
    pub fn for_tests() -> Option<GuestImage> {
        if !testenv::can_run(missing_guest_packages_reason()) {
            return None;
        }
        match GuestImage::build_or_find() {
            Ok(i) => Some(i),
            Err(e) => {
                testenv::skip(&format!("{e:#}"));
                None
            }
        }
    }

    /// Build the image into [`image_dir`] (or find it there, up to date), once per process.
    /// The error names what is missing (a package, a tool, the script).
    pub fn build_or_find() -> Result<GuestImage> {
        let mut cached = IMAGE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = cached.as_ref() {
            return Ok(i.clone());
        }
        let image = GuestImage::build_in(&image_dir())?;
        *cached = Some(image.clone());
        Ok(image)
    }

    /// Run the build script for `out` (it skips the work when `out` is up to date); away from
    /// the source tree, the copy built into this binary, written to `out/build-guest.sh`.
    pub fn build_in(out: &Path) -> Result<GuestImage> {
        let mut script = build_script();
        if !script.is_file() {
            std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
            script = out.join("build-guest.sh");
            std::fs::write(&script, EMBEDDED_BUILD_SCRIPT)
                .with_context(|| format!("write {}", script.display()))?;
        }
        let out_s = out.to_string_lossy().into_owned();
        let o = run_bounded(
            &[
                "bash".to_string(),
                script.to_string_lossy().into_owned(),
                out_s,
            ],
            Duration::from_secs(300),
        )?;
        if !o.status.success() {
            bail!(
                "cannot build the guest image in {} ({}): {}",
                out.display(),
                describe_status(o.status),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        let image = GuestImage {
            vmlinux: out.join("vmlinux"),
            initrd: out.join("initrd.gz"),
        };
        for p in [&image.vmlinux, &image.initrd] {
            if !p.is_file() {
                bail!("the guest build script did not produce {}", p.display());
            }
        }
        Ok(image)
    }
}

/// Why guests cannot run here (QEMU missing), if so. The image's own prerequisites are named by
/// [`GuestImage::build_or_find`]'s error.
pub fn missing_guest_prerequisite() -> Option<String> {
    if !tool_available(QEMU) {
        return Some(format!(
            "`{QEMU}` is not installed (package qemu-system-x86)"
        ));
    }
    None
}

/// The Debian packages the guests need that are not installed here: QEMU, and what
/// scripts/guest/build-guest.sh builds the image from (a kernel with its modules, a static
/// busybox, iperf3) and with (xz, cpio, file). Whether busybox is the static one is left to
/// the script, which says so.
pub fn missing_guest_packages() -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = [
        (QEMU, "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("iperf3", "iperf3"),
        ("xz", "xz-utils"),
        ("cpio", "cpio"),
        ("file", "file"),
    ]
    .into_iter()
    .filter(|(tool, _)| !tool_available(tool))
    .map(|(_, package)| package)
    .collect();
    if !kernel_with_modules_installed() {
        missing.push("linux-image-amd64");
    }
    missing
}

/// [`missing_guest_packages`] as a sentence naming the `apt-get install` command, if any.
pub fn missing_guest_packages_reason() -> Option<String> {
    let missing = missing_guest_packages();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "the QEMU guests need Debian packages that are not installed: {} (apt-get install {})",
        missing.join(", "),
        missing.join(" ")
    ))
}

/// Whether some /boot/vmlinuz-V has its modules in /lib/modules/V (what the build script takes).
fn kernel_with_modules_installed() -> bool {
    let Ok(boot) = std::fs::read_dir("/boot") else {
        return false;
    };
    boot.flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.strip_prefix("vmlinuz-").is_some_and(|v| {
            Path::new("/lib/modules")
                .join(v)
                .join("modules.dep")
                .is_file()
        })
    })
}

/// A free TCP port on 127.0.0.1 right now (for [`NicSpec::SocketListen`]).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1:0")?;
    Ok(l.local_addr().context("local address")?.port())
}

/// Whether something listens on TCP 127.0.0.1:`port` (read from /proc/net/tcp, without
/// connecting: a QEMU socket netdev accepts only one connection).
fn tcp_listening(port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let want = format!("0100007F:{port:04X}");
    let any = format!("00000000:{port:04X}");
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && (f[1] == want || f[1] == any) && f[3] == "0A"
    })
}

/// A request to the spawner thread.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

static SPAWNER: OnceLock<std::result::Result<Mutex<mpsc::Sender<SpawnRequest>>, String>> =
    OnceLock::new();

/// Spawn `cmd` from a thread that lives as long as the process, so that the parent-death signal
/// set in the child fires when the process ends, not when the calling thread does.
pub(crate) fn spawn_from_long_lived_thread(cmd: Command) -> Result<Child> {
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("netlab-guest-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .map(|_| Mutex::new(tx))
            .map_err(|e| e.to_string())
    });
    let spawner = match spawner {
        Ok(s) => s,
        Err(e) => bail!("cannot start the guest spawner thread: {e}"),
    };
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| anyhow!("the guest spawner thread is gone"))?;
    let child = reply_rx
        .recv()
        .map_err(|_| anyhow!("the guest spawner thread did not answer"))?;
    Ok(child?)
}

/// What the console reader collected.
#[derive(Default)]
struct ConsoleBuf {
    data: Vec<u8>,
    closed: bool,
}

/// The console output shared between the reader thread and the guest.
#[derive(Default)]
struct Console {
    buf: Mutex<ConsoleBuf>,
    grew: Condvar,
}

impl Console {
    fn lock(&self) -> MutexGuard<'_, ConsoleBuf> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until `found` finds something in the output from byte `from` on, the console
    /// closes (`Ok(None)`), or `deadline` passes (`Ok(None)`).
    fn wait_for<T>(
        &self,
        from: usize,
        deadline: Instant,
        found: impl Fn(&[u8]) -> Option<T>,
    ) -> Option<T> {
        let mut b = self.lock();
        loop {
            if let Some(t) = found(b.data.get(from..).unwrap_or_default()) {
                return Some(t);
            }
            let now = Instant::now();
            if b.closed || now >= deadline {
                return None;
            }
            b = self
                .grew
                .wait_timeout(b, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Read the console into `console` and append it to `log` until QEMU closes it.
fn read_console(mut stream: UnixStream, console: Arc<Console>, mut log: File) {
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                let _ = log.write_all(&chunk[..n]);
                console.lock().data.extend_from_slice(&chunk[..n]);
                console.grew.notify_all();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    console.lock().closed = true;
    console.grew.notify_all();
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The text of console output: lossy UTF-8 without carriage returns.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace('\r', "")
}

/// Parse `<end> <status>\n` in `hay`: the status and where the end marker starts.
fn parse_end(hay: &[u8], end: &[u8]) -> Option<(i32, usize)> {
    let at = find(hay, end)?;
    let rest = &hay[at + end.len()..];
    let nl = rest.iter().position(|&c| c == b'\n')?;
    let status = text(&rest[..nl]).trim().parse().ok()?;
    Some((status, at))
}

/// One running QEMU guest; stopped and its scratch directory deleted on drop.
pub struct Guest {
    spec: GuestSpec,
    image: GuestImage,
    dir: PathBuf,
    child: Option<Child>,
    status: Option<ExitStatus>,
    console: Arc<Console>,
    input: UnixStream,
    /// Console bytes already consumed by [`Guest::run`].
    cursor: usize,
    marker: u64,
    started: Instant,
    boot_time: Option<Duration>,
}

static LEFTOVERS: Once = Once::new();

impl Guest {
    /// Start a guest and wait for its ready line (see [`Guest::spawn`] and
    /// [`Guest::wait_ready`]).
    pub fn start(image: &GuestImage, spec: GuestSpec) -> Result<Guest> {
        let mut g = Guest::spawn(image, spec)?;
        g.wait_ready()?;
        Ok(g)
    }

    /// Start QEMU for every spec in order (a socket NIC's connecting side waits in `spawn`
    /// for its listener), then wait until all of them are ready; prints each boot time.
    pub fn boot_all(image: &GuestImage, specs: Vec<GuestSpec>) -> Result<Vec<Guest>> {
        let t = Instant::now();
        let mut guests = Vec::with_capacity(specs.len());
        for s in specs {
            guests.push(Guest::spawn(image, s)?);
        }
        for g in &mut guests {
            let b = g.wait_ready()?;
            println!("{} ready after {:.2} s", g.name(), b.as_secs_f64());
        }
        println!(
            "{} guests ready after {:.2} s",
            guests.len(),
            t.elapsed().as_secs_f64()
        );
        Ok(guests)
    }

    /// Ping `to` (IPv4 or IPv6) from this guest: one answer within 10 s (under TCG the first
    /// echo may be lost while the neighbour is resolved), then three of three; prints the time
    /// it took and returns ping's round-trip line of the three (`round-trip min/avg/max = ...`).
    pub fn pings(&mut self, to: &str, timeout: Duration) -> Result<String> {
        let t = Instant::now();
        let ping = if to.contains(':') { "ping6" } else { "ping" };
        self.run_ok(&format!("{ping} -c 1 -w 10 {to}"), timeout)?;
        let out = self.run_ok(&format!("{ping} -c 3 -i 0.2 -w 10 {to}"), timeout)?;
        if !out.contains("3 packets received") {
            bail!("{} -> {to}: not 3 of 3 answers:\n{out}", self.name());
        }
        println!(
            "{} -> {to}: ok ({:.2} s)",
            self.name(),
            t.elapsed().as_secs_f64()
        );
        let rtt = out
            .lines()
            .find(|l| l.contains("min/avg/max"))
            .unwrap_or("");
        Ok(rtt.trim().to_string())
    }

    /// Start QEMU for `spec` and connect its console, without waiting for the guest to boot
    /// (so several guests can boot at once). A [`NicSpec::SocketConnect`] first waits (up to
    /// the boot timeout) for its port to listen.
    pub fn spawn(image: &GuestImage, spec: GuestSpec) -> Result<Guest> {
        spec.validate()?;
        if let Some(why) = missing_guest_prerequisite() {
            bail!("cannot start guest {}: {why}", spec.name);
        }
        cleanup::install_cleanup_handlers()?;
        LEFTOVERS.call_once(|| {
            cleanup::delete_leftovers(GUEST_PREFIX);
        });
        let deadline = Instant::now() + spec.boot_timeout;
        for nic in &spec.nics {
            if let NicSpec::SocketConnect { port, .. } = nic {
                while !tcp_listening(*port) {
                    if Instant::now() >= deadline {
                        bail!(
                            "guest {}: nothing listens on 127.0.0.1:{port} to connect to",
                            spec.name
                        );
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let dir = Names::next(GUEST_PREFIX)?.dir;
        cleanup::create_dir(&dir)?;
        // From here the directory is deleted by the error path or by Drop.
        match Guest::launch(image, spec, &dir, deadline) {
            Ok(g) => Ok(g),
            Err(e) => {
                cleanup::release(&[], &[&dir]);
                Err(e)
            }
        }
    }

    fn launch(image: &GuestImage, spec: GuestSpec, dir: &Path, deadline: Instant) -> Result<Guest> {
        let sock = dir.join("console.sock");
        let listener =
            UnixListener::bind(&sock).with_context(|| format!("bind {}", sock.display()))?;
        listener
            .set_nonblocking(true)
            .context("non-blocking console listener")?;
        let qemu_log = dir.join("qemu.log");
        let log =
            File::create(&qemu_log).with_context(|| format!("create {}", qemu_log.display()))?;
        let log2 = log.try_clone().context("duplicate a log file handle")?;
        // QEMU starts in the spec's network namespace (where its TAP devices are): the handle
        // stays open here until QEMU is spawned, and the child enters it before exec.
        let netns = match &spec.netns {
            Some(ns) => {
                let path = Path::new("/run/netns").join(ns);
                Some(File::open(&path).with_context(|| {
                    format!(
                        "guest {}: cannot open network namespace {}",
                        spec.name,
                        path.display()
                    )
                })?)
            }
            None => None,
        };
        let netns_fd = netns.as_ref().map(|f| f.as_raw_fd());
        let mut cmd = Command::new(QEMU);
        cmd.args(qemu_args(image, &spec, &sock))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        // SAFETY: the closure only calls prctl() and setns(), which are async-signal-safe,
        // between fork and exec; the namespace's descriptor is open until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = netns_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let spawned = spawn_from_long_lived_thread(cmd);
        drop(netns);
        let mut child =
            spawned.with_context(|| format!("cannot start {QEMU} for guest {}", spec.name))?;
        let stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("guest {}: accepting its console: {e}", spec.name);
                }
            }
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "guest {}: QEMU {} before connecting its console: {}",
                    spec.name,
                    match exited {
                        Some(s) => format!("exited ({})", describe_status(s)),
                        None => "timed out".to_string(),
                    },
                    std::fs::read_to_string(&qemu_log)
                        .unwrap_or_default()
                        .trim()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let setup = || -> Result<(UnixStream, File)> {
            stream.set_nonblocking(false).context("blocking console")?;
            let input = stream.try_clone().context("clone the console stream")?;
            let path = dir.join("console.log");
            let log = File::create(&path).with_context(|| format!("create {}", path.display()))?;
            Ok((input, log))
        };
        let (input, console_log) = match setup() {
            Ok(x) => x,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let console = Arc::new(Console::default());
        let c = console.clone();
        std::thread::Builder::new()
            .name(format!("guest-console-{}", spec.name))
            .spawn(move || read_console(stream, c, console_log))
            .context("start the console reader")?;
        Ok(Guest {
            spec,
            image: image.clone(),
            dir: dir.to_path_buf(),
            child: Some(child),
            status: None,
            console,
            input,
            cursor: 0,
            marker: 0,
            started,
            boot_time: None,
        })
    }

    /// Wait (up to the spec's boot timeout from the start) for the ready line; returns the boot
    /// time. The error carries the tail of the console and QEMU's log.
    pub fn wait_ready(&mut self) -> Result<Duration> {
        if let Some(t) = self.boot_time {
            return Ok(t);
        }
        let deadline = self.started + self.spec.boot_timeout;
        let ready = self
            .console
            .wait_for(0, deadline, |b| find(b, READY_LINE.as_bytes()));
        match ready {
            Some(at) => {
                let t = self.started.elapsed();
                self.boot_time = Some(t);
                self.cursor = at + READY_LINE.len();
                Ok(t)
            }
            None => {
                let state = self.state();
                bail!(
                    "guest {} did not print {READY_LINE} within {:.0} s ({state}){}",
                    self.spec.name,
                    self.spec.boot_timeout.as_secs_f64(),
                    self.diagnostics()
                )
            }
        }
    }

    /// "running" or how QEMU ended.
    fn state(&mut self) -> String {
        match self.try_wait() {
            Some(s) => format!("QEMU exited: {}", describe_status(s)),
            None if self.child.is_none() => "QEMU was killed".to_string(),
            None => "QEMU is running".to_string(),
        }
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Some(c) = self.child.as_mut() {
                self.status = c.try_wait().ok().flatten();
            }
        }
        self.status
    }

    /// The last lines of the console and of QEMU's log, for error messages.
    pub fn diagnostics(&self) -> String {
        let qemu = std::fs::read_to_string(self.dir.join("qemu.log")).unwrap_or_default();
        let mut s = format!(
            "\n--- console of {} (last 30 lines; all in {}) ---\n{}",
            self.spec.name,
            self.dir.join("console.log").display(),
            self.console_tail(30)
        );
        if !qemu.trim().is_empty() {
            s.push_str(&format!("\n--- QEMU log ---\n{}", qemu.trim()));
        }
        s
    }

    /// Everything the console printed so far.
    pub fn console_log(&self) -> String {
        text(&self.console.lock().data)
    }

    /// The last `lines` lines of the console.
    pub fn console_tail(&self, lines: usize) -> String {
        let all = self.console_log();
        let v: Vec<&str> = all.lines().collect();
        v[v.len().saturating_sub(lines)..].join("\n")
    }

    /// Run `cmd` in the guest's shell (stdin from /dev/null, stderr into the output) and wait
    /// up to `timeout` for it: its exit status and output. On timeout the command is
    /// interrupted (Ctrl-C) and an error returned.
    pub fn run(&mut self, cmd: &str, timeout: Duration) -> Result<(i32, String)> {
        if cmd.len() > COMMAND_MAX || cmd.contains('\n') {
            bail!("guest command must be one line of at most {COMMAND_MAX} bytes: {cmd:?}");
        }
        self.wait_ready()?;
        self.marker += 1;
        let n = self.marker;
        // The quotes keep the echo of the typed line from matching the markers.
        let line = format!(
            "echo vp-''begin-{n}; eval '{}' </dev/null 2>&1; echo vp-''end-{n} $?\n",
            cmd.replace('\'', r"'\''")
        );
        self.input
            .write_all(line.as_bytes())
            .with_context(|| format!("writing to the console of guest {}", self.spec.name))?;
        let begin = format!("vp-begin-{n}");
        let end = format!("vp-end-{n} ");
        let from = self.cursor;
        let deadline = Instant::now() + timeout;
        let got = self.console.wait_for(from, deadline, |b| {
            let at = find(b, begin.as_bytes())? + begin.len();
            let start = at + b[at..].iter().position(|&c| c == b'\n')? + 1;
            let (status, len) = parse_end(&b[start..], end.as_bytes())?;
            let line = b[start + len..].iter().position(|&c| c == b'\n')? + 1;
            Some((status, text(&b[start..start + len]), start + len + line))
        });
        match got {
            Some((status, output, consumed)) => {
                self.cursor = from + consumed;
                Ok((status, output))
            }
            None => {
                let state = self.state();
                if self.console.lock().closed {
                    bail!(
                        "guest {}: the console closed while `{cmd}` ran ({state}){}",
                        self.spec.name,
                        self.diagnostics()
                    );
                }
                // Interrupt it, so the shell takes the next command.
                let _ = self.input.write_all(b"\x03");
                bail!(
                    "guest {}: `{cmd}` did not finish within {:.0} s ({state}){}",
                    self.spec.name,
                    timeout.as_secs_f64(),
                    self.diagnostics()
                )
            }
        }
    }

    /// [`Guest::run`] that must exit 0; returns the output.
    pub fn run_ok(&mut self, cmd: &str, timeout: Duration) -> Result<String> {
        let (status, out) = self.run(cmd, timeout)?;
        if status != 0 {
            bail!(
                "guest {}: `{cmd}` failed (exit status {status}):\n{}",
                self.spec.name,
                out.trim_end()
            );
        }
        Ok(out)
    }

    /// Stop QEMU now (SIGTERM, SIGKILL after a grace period); the scratch directory stays until
    /// drop. A new guest may then use the same vhost-user sockets.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            if self.status.is_none() {
                self.status = c.try_wait().ok().flatten();
            }
            if self.status.is_none() {
                let pid = libc::pid_t::try_from(c.id()).context("process id out of range")?;
                // SAFETY: kill() on the id of our own child that has not been reaped yet.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                let deadline = Instant::now() + STOP_GRACE;
                while self.status.is_none() && Instant::now() < deadline {
                    self.status = c.try_wait().ok().flatten();
                    std::thread::sleep(Duration::from_millis(10));
                }
                if self.status.is_none() {
                    let _ = c.kill();
                    self.status = Some(c.wait().context("waiting for QEMU")?);
                }
            }
        }
        let _ = self.input.shutdown(std::net::Shutdown::Both);
        Ok(())
    }

    /// Kill QEMU and boot the same spec again (a fresh QEMU, console and scratch directory),
    /// waiting for the ready line.
    pub fn restart(&mut self) -> Result<Duration> {
        self.kill()?;
        let fresh = Guest::start(&self.image, self.spec.clone())?;
        let old = std::mem::replace(self, fresh);
        drop(old);
        self.wait_ready()
    }

    /// Time from QEMU's start to the ready line, once seen.
    pub fn boot_time(&self) -> Option<Duration> {
        self.boot_time
    }

    /// The guest's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The spec it runs with.
    pub fn spec(&self) -> &GuestSpec {
        &self.spec
    }

    /// The scratch directory (console.log, qemu.log, console.sock).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// QEMU's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.kill();
        if std::thread::panicking() {
            eprintln!("{}", self.diagnostics());
        }
        cleanup::release(&[], &[&self.dir]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_markers_are_parsed() {
        assert_eq!(parse_end(b"x\nvp-end-3 17\n", b"vp-end-3 "), Some((17, 2)));
        assert_eq!(parse_end(b"vp-end-3 1", b"vp-end-3 "), None);
        assert_eq!(parse_end(b"echo vp-''end-3 $?\n", b"vp-end-3 "), None);
    }

    #[test]
    fn the_build_script_exists() {
        assert!(build_script().is_file(), "{}", build_script().display());
    }
}
