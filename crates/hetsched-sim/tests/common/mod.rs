//! Workload builders the simulator's integration tests share.

use hetsched_sim::workload::{AppSpec, MissCurve, Phase, PhaseEnd, ThreadSpec, Workload};

/// A phase of `instructions` at `cpi` with a flat `mpki` over a 64 KiB working set, no FPU work.
pub fn phase(instructions: f64, cpi: f64, mpki: f64, end: PhaseEnd) -> Phase {
    Phase {
        instructions,
        cpi,
        miss: MissCurve::Knee {
            mpki_max: mpki,
            mpki_min: mpki,
            ws_bytes: 64 << 10,
        },
        fp_fraction: 0.0,
        mlp: 1.0,
        data_fragment: None,
        df_writes: false,
        alloc_bytes: 0,
        free_bytes: 0,
        once: false,
        end,
    }
}

/// One app of `threads` identical threads running `phases` `repeat` times, arriving at 0.
pub fn app(name: &str, threads: u32, phases: Vec<Phase>, repeat: u32) -> Workload {
    Workload {
        name: name.into(),
        description: String::new(),
        apps: vec![AppSpec {
            service: None,
            name: name.into(),
            copies: 1,
            arrival_ns: 0,
            restart: false,
            runs: None,
            threads: vec![ThreadSpec::new("t", threads, phases, repeat)],
            data_fragments: vec![],
            cpus: None,
        }],
    }
}
