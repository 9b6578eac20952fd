//! What the whole process has spent so far, for the benchmarks that report
//! CPU per run: the total exact (`CLOCK_PROCESS_CPUTIME_ID`, nanoseconds),
//! its split between user and kernel from `/proc/self/stat`, which counts
//! 10 ms ticks (exact enough as a share over many runs, too coarse as a
//! total: a kept turn of 0.1 ms over 1 000 turns is ten ticks).

/// One reading of the process's CPU use and minor faults.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCpu {
    exact_ns: u64,
    user_ticks: u64,
    kernel_ticks: u64,
    minor_faults: u64,
}

/// What was spent between two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuSpent {
    /// User CPU, ms (the exact total times the ticks' user share).
    pub user_ms: f64,
    /// Kernel CPU, ms (the exact total times the ticks' kernel share).
    pub kernel_ms: f64,
    /// Minor page faults.
    pub minor_faults: u64,
}

impl CpuSpent {
    /// User and kernel CPU together, ms: exact.
    pub fn cpu_ms(&self) -> f64 {
        self.user_ms + self.kernel_ms
    }

    /// The kernel's share of the CPU, in percent.
    pub fn kernel_percent(&self) -> f64 {
        // The share first: `kernel / (user + kernel)` is at most 1 in floating
        // point too, where `100 * kernel / total` can round past 100 when
        // every tick was the kernel's.
        100.0 * (self.kernel_ms / self.cpu_ms().max(1e-12))
    }

    /// Each figure divided by `runs`.
    pub fn per(&self, runs: usize) -> (f64, f64, f64) {
        let n = runs.max(1) as f64;
        (
            self.user_ms / n,
            self.kernel_ms / n,
            self.minor_faults as f64 / n,
        )
    }
}

/// The process's CPU so far in ms, exact and not split: one clock read,
/// cheap enough to take around each step of a run (where [`ProcessCpu::now`]
/// also reads and parses `/proc/self/stat`).
pub fn process_cpu_ms() -> f64 {
    crate::engine::clock_ns(rustix::time::ClockId::ProcessCPUTime) as f64 / 1e6
}

impl ProcessCpu {
    /// The process's use so far.
    pub fn now() -> ProcessCpu {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        // After the command's ") ": state is stat(5)'s field 3, so minflt
        // (10) is at 7, utime (14) at 11 and stime (15) at 12.
        let rest = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
        ProcessCpu {
            exact_ns: crate::engine::clock_ns(rustix::time::ClockId::ProcessCPUTime),
            user_ticks: field(11),
            kernel_ticks: field(12),
            minor_faults: field(7),
        }
    }

    /// What was spent from `earlier` to this reading. With no tick in
    /// between, all of it counts as user time.
    pub fn since(&self, earlier: &ProcessCpu) -> CpuSpent {
        let exact_ms = self.exact_ns.saturating_sub(earlier.exact_ns) as f64 / 1e6;
        let user = self.user_ticks.saturating_sub(earlier.user_ticks) as f64;
        let kernel = self.kernel_ticks.saturating_sub(earlier.kernel_ticks) as f64;
        let kernel_share = if user + kernel > 0.0 {
            kernel / (user + kernel)
        } else {
            0.0
        };
        CpuSpent {
            user_ms: exact_ms * (1.0 - kernel_share),
            kernel_ms: exact_ms * kernel_share,
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 30 ms of this thread's CPU reads as at least 30 ms of the
    /// process's (ticks alone could say 20), split into two non-negative parts.
    #[test]
    fn spent_cpu_is_exact_and_split() {
        let before = ProcessCpu::now();
        let thread_start = crate::thread_cpu_ns();
        let mut x = 0u64;
        while crate::thread_cpu_ns() - thread_start < 30_000_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = ProcessCpu::now().since(&before);
        assert!(spent.cpu_ms() >= 30.0, "{spent:?}");
        assert!(spent.user_ms >= 0.0 && spent.kernel_ms >= 0.0, "{spent:?}");
        assert!(
            (0.0..=100.0).contains(&spent.kernel_percent()),
            "{spent:?}: {} %",
            spent.kernel_percent()
        );
    }
}
