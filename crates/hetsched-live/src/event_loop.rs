//! The poll loop `run` and the daemon share: named event sources (signals, process events, the hint
//! socket, statistics and metrics listeners) and an interval clock. Each wait returns which sources
//! are readable; the caller handles them, then asks whether the interval's tick is due.

use crate::signals;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// The shortest interval a loop ticks at.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);
/// The longest interval a loop ticks at.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// An interval given in ms, checked to lie in [`MIN_INTERVAL`, `MAX_INTERVAL`]; the error says
/// the range.
pub fn interval_from_ms(ms: f64) -> Result<Duration, String> {
    let (lo, hi) = (
        MIN_INTERVAL.as_secs_f64() * 1e3,
        MAX_INTERVAL.as_secs_f64() * 1e3,
    );
    if !(ms.is_finite() && (lo..=hi).contains(&ms)) {
        return Err(format!(
            "{ms} ms is outside {lo} ms .. {hi} ms (1 ms .. 1 h)"
        ));
    }
    Ok(Duration::from_secs_f64(ms / 1e3))
}

/// An event source a loop waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The signal descriptor (SIGCHLD, SIGTERM...).
    Signals,
    /// The kernel's process events connector (thread starts and exits).
    ProcessEvents,
    /// The hint socket.
    Hints,
    /// The local statistics socket.
    Stats,
}

/// The sources that are readable after one wait.
#[derive(Clone, Debug, Default)]
pub struct Ready {
    readable: Vec<Source>,
}

impl Ready {
    /// `source` has something to read.
    pub fn has(&self, source: Source) -> bool {
        self.readable.contains(&source)
    }
}

/// Named sources and the interval clock.
#[derive(Debug)]
pub struct EventLoop {
    sources: Vec<(Source, RawFd)>,
    start: Instant,
    interval: Duration,
    next_tick: Instant,
}

impl EventLoop {
    /// A loop whose first tick is due at once and then every `interval`.
    pub fn new(interval: Duration) -> Self {
        let start = Instant::now();
        Self {
            sources: Vec::new(),
            start,
            interval,
            next_tick: start,
        }
    }

    /// Wait on `fd` as `source` (replacing what was registered under that name); `None` stops
    /// waiting on it.
    pub fn set(&mut self, source: Source, fd: Option<RawFd>) {
        self.sources.retain(|(s, _)| *s != source);
        if let Some(fd) = fd {
            self.sources.push((source, fd));
        }
    }

    /// Block until a source is readable or the next tick is due.
    pub fn wait(&self) -> Ready {
        let timeout = self.next_tick.saturating_duration_since(Instant::now());
        let fds: Vec<RawFd> = self.sources.iter().map(|&(_, fd)| fd).collect();
        let ready = signals::wait_readable(&fds, timeout);
        Ready {
            readable: self
                .sources
                .iter()
                .zip(ready)
                .filter(|&(_, r)| r)
                .map(|(&(s, _), _)| s)
                .collect(),
        }
    }

    /// The interval's tick is due now.
    pub fn tick_due(&self) -> bool {
        Instant::now() >= self.next_tick
    }

    /// The tick was taken: the next one is an interval later, or an interval from now if the loop
    /// fell behind (no burst of catch-up ticks).
    pub fn ticked(&mut self) {
        self.next_tick += self.interval;
        if self.next_tick < Instant::now() {
            self.next_tick = Instant::now() + self.interval;
        }
    }

    /// No more interval ticks: the loop waits for its sources until `deadline`, when
    /// [`EventLoop::tick_due`] turns true once more.
    pub fn wake_at(&mut self, deadline: Instant) {
        self.next_tick = deadline;
    }

    /// The instant the loop started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Time since the start, ns (the engine's clock).
    pub fn elapsed_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The tick interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn a_readable_source_is_reported_by_its_name_and_others_are_not() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let (c, _d) = UnixDatagram::pair().unwrap();
        let mut l = EventLoop::new(Duration::from_secs(5));
        l.ticked(); // the first tick is due at once; move past it
        l.set(Source::Hints, Some(a.as_raw_fd()));
        l.set(Source::Stats, Some(c.as_raw_fd()));
        b.send(b"x").unwrap();
        let r = l.wait();
        assert!(r.has(Source::Hints));
        assert!(!r.has(Source::Stats));
        assert!(!r.has(Source::Signals));
        assert!(!l.tick_due());
        // Unregistered, it is no longer waited on (a zero-interval loop returns at once).
        let mut m = EventLoop::new(Duration::ZERO);
        m.set(Source::Hints, Some(a.as_raw_fd()));
        m.set(Source::Hints, None);
        assert!(!m.wait().has(Source::Hints));
        assert!(m.tick_due());
    }

    #[test]
    fn intervals_outside_a_millisecond_to_an_hour_are_refused() {
        assert_eq!(interval_from_ms(100.0), Ok(Duration::from_millis(100)));
        assert_eq!(interval_from_ms(1.0), Ok(MIN_INTERVAL));
        assert_eq!(interval_from_ms(3_600_000.0), Ok(MAX_INTERVAL));
        for bad in [0.0, 0.5, -1.0, 1e12, f64::NAN, f64::INFINITY] {
            let e = interval_from_ms(bad).unwrap_err();
            assert!(e.contains("1 ms .. 1 h"), "{e}");
        }
    }

    #[test]
    fn ticks_come_every_interval_without_catch_up_bursts() {
        let mut l = EventLoop::new(Duration::from_millis(20));
        assert!(l.tick_due());
        l.ticked();
        assert!(!l.tick_due());
        let t0 = Instant::now();
        let r = l.wait();
        assert!(!r.has(Source::Signals));
        assert!(l.tick_due());
        assert!(t0.elapsed() >= Duration::from_millis(15));
        // Far behind: one tick, then the next an interval from now.
        std::thread::sleep(Duration::from_millis(70));
        l.ticked();
        assert!(!l.tick_due());
    }
}
