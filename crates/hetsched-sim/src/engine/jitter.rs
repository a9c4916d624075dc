//! What varies from one run to the next in reality, drawn from the run's seed: when each process
//! starts and how late a sleeping thread wakes. Everything else in the engine is deterministic,
//! so two seeds differ by these draws and by the baseline's seeded tie-breaks, and spreads over
//! seeds measure how a policy copes with them.

use hetsched_core::rng::SeededRng;

/// Processes of a workload that "start together" start within this window, in an order the seed
/// decides: creating a process (fork + exec) takes hundreds of microseconds on Linux (lmbench's
/// `lat_proc exec`, McVoy and Staelin, USENIX 1996), so a launcher starting several programs
/// spreads their starts over about a millisecond.
pub const LAUNCH_WINDOW_NS: u64 = 1_000_000;

/// A sleep ends up to this much late: Linux's default timer slack for normal threads
/// (`init_task.timer_slack_ns = 50000`, include/linux/init_task.h; prctl PR_SET_TIMERSLACK),
/// within which the kernel coalesces timer expiries.
pub const TIMER_SLACK_NS: u64 = 50_000;

/// The seeded source of start and wake-up delays.
#[derive(Clone, Debug)]
pub struct Jitter {
    rng: SeededRng,
}

impl Jitter {
    /// A source for the run with `seed`, on a stream apart from the baseline's tie-breaks.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SeededRng::new(seed ^ 0x6A09_E667_F3BC_C908),
        }
    }

    /// Delay of a process's start after its nominal arrival, ns.
    pub fn launch_delay_ns(&mut self) -> u64 {
        (self.rng.unit() * LAUNCH_WINDOW_NS as f64) as u64
    }

    /// Delay of a wake-up after a sleep of `sleep_ns` ends (none for a zero-length sleep, which
    /// arms no timer), ns.
    pub fn wake_delay_ns(&mut self, sleep_ns: u64) -> u64 {
        if sleep_ns == 0 {
            0
        } else {
            (self.rng.unit() * TIMER_SLACK_NS as f64) as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_stay_in_their_windows_and_follow_the_seed() {
        let (mut a, mut b, mut c) = (Jitter::new(1), Jitter::new(1), Jitter::new(2));
        let da: Vec<u64> = (0..100).map(|_| a.launch_delay_ns()).collect();
        let db: Vec<u64> = (0..100).map(|_| b.launch_delay_ns()).collect();
        let dc: Vec<u64> = (0..100).map(|_| c.launch_delay_ns()).collect();
        assert_eq!(da, db);
        assert_ne!(da, dc);
        assert!(da.iter().all(|&d| d < LAUNCH_WINDOW_NS));
        // Spread over the window, not bunched at one end.
        assert!(da.iter().any(|&d| d < LAUNCH_WINDOW_NS / 4));
        assert!(da.iter().any(|&d| d > 3 * LAUNCH_WINDOW_NS / 4));
        assert_eq!(a.wake_delay_ns(0), 0);
        assert!((0..100).all(|_| a.wake_delay_ns(1_000) < TIMER_SLACK_NS));
    }
}
