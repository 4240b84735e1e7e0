//! Thin wrappers over the few Linux calls the bench needs: CPU affinity of the calling thread,
//! the calling thread's CPU time and involuntary context switches, the load average, and (read
//! from /proc) the CPU time of another process or of a named thread of this one.
//! It owns no state and never touches packets or another process.

use std::time::Duration;

/// CPUs the calling thread may run on, in ascending order (empty if the kernel refused).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity(0, ..) writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The last CPU the process may run on (the default worker CPU), if any.
pub fn last_cpu() -> Option<usize> {
    allowed_cpus().last().copied()
}

/// Restrict the calling thread to `cpus`; returns false if the list is empty or the kernel
/// refused.
pub fn pin_current_thread_to(cpus: &[usize]) -> bool {
    if cpus.is_empty() {
        return false;
    }
    // SAFETY: as in `allowed_cpus`; CPU_SET writes inside the set for indices < CPU_SETSIZE and
    // sched_setaffinity(0, ..) affects only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        if libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) != 0 {
            return Duration::ZERO;
        }
        Duration::new(
            ts.tv_sec.max(0) as u64,
            ts.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    }
}

/// Involuntary context switches of the calling thread so far (the kernel took the CPU away).
pub fn thread_involuntary_switches() -> u64 {
    // SAFETY: getrusage writes one rusage we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
            return 0;
        }
        ru.ru_nivcsw.max(0) as u64
    }
}

/// The share of each period the kernel lets the calling thread run when it is a real-time thread
/// (SCHED_FIFO or SCHED_RR) and real-time throttling is on: `kernel.sched_rt_runtime_us /
/// kernel.sched_rt_period_us` (Debian's default 950000 / 1000000 keeps a spinning real-time
/// worker off its CPU 5% of each second). None for other threads, or with throttling off (-1).
pub fn rt_throttle_share() -> Option<f64> {
    // SAFETY: sched_getscheduler reads the calling thread's policy; no memory is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return None;
    }
    let read = |name: &str| -> Option<i64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    rt_share(read("sched_rt_runtime_us")?, read("sched_rt_period_us")?)
}

/// `runtime / period` when throttling is on and leaves less than the whole period.
fn rt_share(runtime_us: i64, period_us: i64) -> Option<f64> {
    (runtime_us >= 0 && period_us > 0 && runtime_us < period_us)
        .then(|| runtime_us as f64 / period_us as f64)
}

/// The 1-minute load average (None if /proc/loadavg is unreadable).
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Busy and total jiffies of each CPU, from /proc/stat.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes(pub Vec<(usize, u64, u64)>);

/// Parse the per-CPU lines of /proc/stat (`cpuN user nice system idle iowait irq softirq steal`).
pub fn parse_cpu_times(text: &str) -> CpuTimes {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            continue;
        }
        let total: u64 = v.iter().sum();
        let idle = v[3] + v[4];
        out.push((cpu, total.saturating_sub(idle), total));
    }
    CpuTimes(out)
}

/// Per-CPU times now (empty if /proc/stat is unreadable).
pub fn cpu_times() -> CpuTimes {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_cpu_times(&t))
        .unwrap_or_default()
}

/// Share of time the CPUs other than `cpu` were busy between two samples (None if unknown).
pub fn others_busy(before: &CpuTimes, after: &CpuTimes, cpu: usize) -> Option<f64> {
    let (mut busy, mut total) = (0u64, 0u64);
    for (c, b1, t1) in &after.0 {
        if *c == cpu {
            continue;
        }
        if let Some((_, b0, t0)) = before.0.iter().find(|(c0, _, _)| c0 == c) {
            busy += b1.saturating_sub(*b0);
            total += t1.saturating_sub(*t0);
        }
    }
    (total > 0).then(|| busy as f64 / total as f64)
}

/// User + system seconds from the text of a `/proc/.../stat` file (fields 14 and 15, counted
/// after the parenthesised command name, which may hold spaces).
pub fn parse_stat_cpu_seconds(stat: &str, ticks_per_second: f64) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    (ticks_per_second > 0.0).then(|| (utime + stime) as f64 / ticks_per_second)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU seconds (user + system) process `pid` and all its threads used so far (None when it is
/// gone or unreadable).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_seconds(&stat, clock_ticks())
}

/// CPU seconds the threads of this process named `name` (their `comm`) used so far, summed;
/// None when no thread has that name.
pub fn threads_cpu_seconds(name: &str) -> Option<f64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = None;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        if let Some(s) = parse_stat_cpu_seconds(&stat, clock_ticks()) {
            total = Some(total.unwrap_or(0.0) + s);
        }
    }
    total
}

/// Share of time all CPUs together were busy between two samples (None if unknown).
pub fn all_busy(before: &CpuTimes, after: &CpuTimes) -> Option<f64> {
    others_busy(before, after, usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_has_cpus_and_time() {
        assert!(!allowed_cpus().is_empty());
        assert!(last_cpu().is_some());
        let t0 = thread_cpu_time();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time() > t0);
    }

    #[test]
    fn real_time_throttling_share() {
        assert_eq!(rt_share(950_000, 1_000_000), Some(0.95));
        assert_eq!(rt_share(-1, 1_000_000), None);
        assert_eq!(rt_share(1_000_000, 1_000_000), None);
        assert_eq!(rt_share(950_000, 0), None);
        // This test thread is not a real-time thread (unless run under chrt).
        // SAFETY: sched_getscheduler reads the calling thread's policy.
        if unsafe { libc::sched_getscheduler(0) } == libc::SCHED_OTHER {
            assert_eq!(rt_throttle_share(), None);
        }
    }

    #[test]
    fn busy_share_of_the_other_cpus() {
        let a = parse_cpu_times(
            "cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 10 0 10 80 0 0 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0 0 0\n",
        );
        let b = parse_cpu_times("cpu0 40 0 20 140 0 0 0 0 0 0\ncpu1 100 0 0 100 0 0 0 0 0 0\n");
        assert_eq!(a.0.len(), 2);
        // CPU 0 went from 20 busy of 100 to 60 busy of 200: 40 of 100.
        assert_eq!(others_busy(&a, &b, 1), Some(0.4));
        assert_eq!(others_busy(&a, &b, 7), Some(140.0 / 200.0));
        assert_eq!(others_busy(&CpuTimes::default(), &b, 1), None);
        assert!(!cpu_times().0.is_empty());
        assert_eq!(all_busy(&a, &b), Some(140.0 / 200.0));
    }

    #[test]
    fn cpu_seconds_of_processes_and_threads() {
        let stat = "42 (qemu (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0";
        assert_eq!(parse_stat_cpu_seconds(stat, 100.0), Some(3.0));
        assert_eq!(parse_stat_cpu_seconds("42 (x) S 1", 100.0), None);
        assert!(process_cpu_seconds(std::process::id()).is_some());
        assert_eq!(threads_cpu_seconds("no-such-thread-name"), None);
        let h = std::thread::Builder::new()
            .name("vp-sys-test".into())
            .spawn(|| {
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_millis(30) {
                    std::hint::black_box(0u64);
                }
                threads_cpu_seconds("vp-sys-test")
            })
            .expect("thread");
        assert!(h.join().expect("join").is_some());
    }
}
