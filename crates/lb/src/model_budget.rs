//! The load balancer's memory budget: what a state's large tables cost (every VIP's Maglev
//! table, every worker's flow and NAT tables, at the sizes they are really allocated), checked
//! by `LbState::apply` against the configured cap (`[lb] memory-limit`) so that a change that
//! would pass it is refused before anything is built. Arithmetic only: it allocates nothing
//! and never looks at a table.

use super::{LbErrorKind, LbState, MAX_NEW_LEN};
use crate::flowtable::worker_tables_bytes;
use crate::maglev::next_prime;

/// The default cap on the LB's tables: 2 GiB (the default flow tables of 16 workers and
/// 4,096 VIPs of the default Maglev size fit with room to spare).
pub const DEFAULT_MEMORY_LIMIT: u64 = 2 << 30;
/// The smallest cap accepted: one worker's default flow tables and a few VIPs fit.
pub const MIN_MEMORY_LIMIT: u64 = 64 << 20;

/// The cap and what it is measured against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryBudget {
    /// Bytes the LB's tables may take in all.
    pub limit: u64,
    /// Workers (each has its own flow tables).
    pub workers: u32,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget {
            limit: DEFAULT_MEMORY_LIMIT,
            workers: 1,
        }
    }
}

/// What a state's tables take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemoryUse {
    /// Every VIP's Maglev table (4 bytes an entry, the prime size in use).
    pub maglev_bytes: u64,
    /// VIPs counted.
    pub vips: u32,
    /// One worker's flow and NAT tables (`lb conf buckets`).
    pub flow_bytes_per_worker: u64,
    /// Workers counted.
    pub workers: u32,
}

impl MemoryUse {
    /// All of it.
    pub fn total(&self) -> u64 {
        self.maglev_bytes.saturating_add(
            self.flow_bytes_per_worker
                .saturating_mul(self.workers as u64),
        )
    }
}

/// Bytes of the Maglev table a VIP with `new_len` has (its entries are `u32` AS slots).
pub fn maglev_bytes(new_len: u32) -> u64 {
    next_prime(new_len.clamp(2, MAX_NEW_LEN)) as u64 * 4
}

/// `n` bytes for a message: GiB, MiB or KiB with one decimal, else bytes.
pub fn show_bytes(n: u64) -> String {
    let units = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in units {
        if n >= 1 << shift {
            let whole = n >> shift;
            let tenth = ((n & ((1 << shift) - 1)) * 10) >> shift;
            return if tenth == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenth} {unit}")
            };
        }
    }
    format!("{n} bytes")
}

impl LbState {
    /// The cap this state is checked against.
    pub fn memory_budget(&self) -> MemoryBudget {
        self.budget
    }

    /// This state with the cap `budget` (checked by the next `apply`; the config sets it on an
    /// empty state before applying its lines).
    pub fn with_memory_budget(mut self, budget: MemoryBudget) -> LbState {
        self.budget = budget;
        self
    }

    /// What this state's tables take.
    pub fn memory_use(&self) -> MemoryUse {
        MemoryUse {
            maglev_bytes: self.maglev_bytes,
            vips: self.by_key.len() as u32,
            flow_bytes_per_worker: worker_tables_bytes(self.conf.buckets as usize),
            workers: self.budget.workers.max(1),
        }
    }

    /// Refuses `self` (the state after a change) when its tables pass the cap and take more
    /// than `before` did (a change that frees memory is never refused, even over the cap).
    pub(super) fn check_budget(&self, before: &LbState) -> Result<(), LbErrorKind> {
        let need = self.memory_use();
        let (total, limit) = (need.total(), self.budget.limit);
        if total <= limit || total <= before.memory_use().total() {
            return Ok(());
        }
        Err(LbErrorKind::MemoryLimit {
            need: format!(
                "{} = {total} bytes (Maglev tables {} for {} VIPs, flow tables {} x {} workers)",
                show_bytes(total),
                show_bytes(need.maglev_bytes),
                need.vips,
                show_bytes(need.flow_bytes_per_worker),
                need.workers
            ),
            limit: format!("{} = {limit} bytes", show_bytes(limit)),
        })
    }
}
