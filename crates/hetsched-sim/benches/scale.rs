//! The engine and the policies at scale, medians of several runs on this host (absolute times
//! differ between hosts, so the figures that matter are ratios):
//!
//! - **engine vs yardstick**: the engine under the default baseline on scale-1024 / scale-16k
//!   against the yardstick (`support/yardstick.rs`, the least an event simulation of the same
//!   scenario must do);
//! - **policy vs baseline**: each policy's run against the baseline's run, in the same process;
//! - **growth**: each run's wall time on scale-1024 / scale-16k over scale-512 / scale-8k (twice the
//!   cores and threads), and the yardstick's own, for scale: what twice the size costs the least
//!   simulation of the scenario on this host.
//!
//! The runs interleave, a round running every size, policy and the yardstick once, so a slow
//! spell of a shared host weighs on every figure of a round rather than on all runs of one.
//!
//! Each figure is printed with its goal and whether it holds (`--json`: `holds`, `ratio_holds`,
//! `growth_holds`, `all_goals_hold`); the bench exits 1 when some goal does not hold.
//!
//! One policy decision's cost (a rebalance of 16k threads on 1,024 cores) is the criterion
//! benchmark `cargo bench -p hetsched-core --bench policies`.
//!
//! ```text
//! cargo bench -p hetsched-sim --bench scale                       # 3 runs each, 60 simulated s
//! cargo bench -p hetsched-sim --bench scale -- --runs 1 --duration 10 --policy amps --json
//! ```

#[path = "support/yardstick.rs"]
mod yardstick;

use hetsched_core::policies::linux_default::NAME as LINUX_DEFAULT;
use hetsched_core::policies::policy_by_name;
use hetsched_core::presets::machine_preset;
use hetsched_sim::engine::NS_PER_S;
use hetsched_sim::presets::workload_preset;
use hetsched_sim::{simulate, SimConfig};
use std::time::Instant;

/// The goals these figures are held to: the engine at most this many times the yardstick, a
/// policy's run at most this many times the baseline's, and a run at twice the size at most this
/// many times the run at half.
const ENGINE_GOAL: f64 = 4.0;
const POLICY_GOAL: f64 = 1.5;
const GROWTH_GOAL: f64 = 2.2;

/// Whether `x` is within `goal`, in words.
fn verdict(x: f64, goal: f64) -> &'static str {
    if x <= goal {
        "holds"
    } else {
        "DOES NOT HOLD"
    }
}

/// The two sizes: (machine, workload), the second twice the first.
const SIZES: [(&str, &str); 2] = [("scale-512", "scale-8k"), ("scale-1024", "scale-16k")];

struct Options {
    runs: usize,
    duration_s: f64,
    policies: Vec<String>,
    json: bool,
}

/// The options from the command line, or a one-line message naming the bad one.
fn options() -> Result<Options, String> {
    let mut o = Options {
        runs: 3,
        duration_s: 60.0,
        policies: vec!["amps".into(), "hetsched".into()],
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        // cargo bench appends --bench to the arguments, so an option given last without its
        // value would take it.
        let mut value = |what: &str| {
            args.next()
                .filter(|v| v != "--bench")
                .ok_or(format!("{a} needs {what}"))
        };
        match a.as_str() {
            "--runs" => {
                let v = value("a number of runs")?;
                o.runs = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("--runs {v:?}: a whole number above 0"))?;
            }
            "--duration" => {
                let v = value("simulated seconds")?;
                let quantum_s = SimConfig::default().quantum_ns as f64 / NS_PER_S as f64;
                o.duration_s = v
                    .parse()
                    .ok()
                    .filter(|&s: &f64| s.is_finite() && s >= quantum_s)
                    .ok_or(format!(
                        "--duration {v:?}: simulated seconds, at least one quantum ({quantum_s} s)"
                    ))?;
            }
            "--policy" => {
                let v = value("policy names, comma-separated")?;
                o.policies = v.split(',').map(str::to_string).collect();
                if let Some(bad) = o.policies.iter().find(|p| policy_by_name(p).is_none()) {
                    return Err(format!("--policy {bad:?}: no such policy"));
                }
                if o.policies.iter().any(|p| p == LINUX_DEFAULT) {
                    return Err(format!(
                        "--policy {LINUX_DEFAULT:?}: the baseline runs always; name the others"
                    ));
                }
            }
            "--json" => o.json = true,
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Wall seconds of one run of `f`.
fn timed(f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    f();
    t0.elapsed().as_secs_f64()
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("scale: {e}");
            std::process::exit(2);
        }
    };
    let duration_ns = (o.duration_s * NS_PER_S as f64) as u64;
    let cfg = SimConfig {
        duration_ns,
        ..Default::default()
    };
    let mut names = vec![LINUX_DEFAULT.to_string()];
    names.extend(o.policies.iter().cloned());
    // Runs interleave (each round runs every size, policy and the yardstick once), so that a
    // slow spell of a shared host falls on every figure of a round alike rather than on one
    // figure's every run: the ratios are what the goals are about.
    // samples[size][policy][run]
    let mut samples = vec![vec![Vec::new(); names.len()]; SIZES.len()];
    let mut yard_samples = vec![Vec::new(); SIZES.len()];
    let mut events = 0;
    let mut yard_events = 0;
    let mut yard_instructions = 0.0;
    let setups: Vec<_> = SIZES
        .iter()
        .map(|(machine, workload)| {
            let topo = machine_preset(machine).unwrap().unwrap();
            let w = workload_preset(workload, &topo).unwrap().unwrap();
            (topo, w)
        })
        .collect();
    for run in 0..o.runs {
        for (si, (topo, w)) in setups.iter().enumerate() {
            let (machine, workload) = SIZES[si];
            for (pi, name) in names.iter().enumerate() {
                let s = timed(|| {
                    let r = simulate(topo, w, policy_by_name(name).unwrap(), cfg.clone());
                    if pi == 0 {
                        events = r.engine.events;
                    }
                });
                eprintln!("run {}: {machine}/{workload} {name}: {s:.3} s", run + 1);
                samples[si][pi].push(s);
            }
            let s = timed(|| {
                let y = yardstick::run(topo, w, cfg.quantum_ns, duration_ns);
                if si == SIZES.len() - 1 {
                    yard_events = y.events;
                    yard_instructions = y.instructions;
                }
            });
            eprintln!("run {}: {machine}/{workload} yardstick: {s:.3} s", run + 1);
            yard_samples[si].push(s);
        }
    }
    let wall: Vec<Vec<f64>> = samples
        .into_iter()
        .map(|per_policy| per_policy.into_iter().map(median).collect())
        .collect();
    let yard_by_size: Vec<f64> = yard_samples.into_iter().map(median).collect();
    let big = SIZES.len() - 1;
    let yard = yard_by_size[big];
    // The yardstick's own growth: what twice the size costs the least simulation on this host
    // (its heap of one event a core gains a level at twice the cores).
    let yard_growth = yard / yard_by_size[0];
    let engine_ratio = wall[big][0] / yard;
    let policy_ratio: Vec<f64> = (1..names.len())
        .map(|p| wall[big][p] / wall[big][0])
        .collect();
    let growth: Vec<f64> = (0..names.len())
        .map(|p| wall[big][p] / wall[0][p])
        .collect();
    // Every goal, as (what, figure, goal).
    let mut goals = vec![("engine vs yardstick".to_string(), engine_ratio, ENGINE_GOAL)];
    for (p, n) in names.iter().enumerate() {
        if p > 0 {
            goals.push((format!("{n} vs baseline"), policy_ratio[p - 1], POLICY_GOAL));
        }
        goals.push((format!("{n} growth"), growth[p], GROWTH_GOAL));
    }
    let missed: Vec<&str> = goals
        .iter()
        .filter(|(_, x, goal)| x > goal)
        .map(|(what, _, _)| what.as_str())
        .collect();
    if o.json {
        let doc = serde_json::json!({
            "goals": {
                "engine_vs_yardstick_at_most": ENGINE_GOAL,
                "policy_vs_baseline_at_most": POLICY_GOAL,
                "growth_for_twice_the_size_at_most": GROWTH_GOAL,
            },
            "all_goals_hold": missed.is_empty(),
            "goals_not_holding": missed,
            "runs": o.runs,
            "duration_s": o.duration_s,
            "scenario": format!("{}/{}", SIZES[big].0, SIZES[big].1),
            "yardstick": {
                "wall_s": yard,
                "wall_s_half_size": yard_by_size[0],
                "growth_for_twice_the_size": yard_growth,
                "events": yard_events,
                "instructions": yard_instructions,
            },
            "engine": {
                "wall_s": wall[big][0],
                "events": events,
                "ratio_to_yardstick": engine_ratio,
                "holds": engine_ratio <= ENGINE_GOAL,
            },
            "policies": names.iter().enumerate().map(|(p, n)| serde_json::json!({
                "policy": n,
                "wall_s": wall[big][p],
                "wall_s_half_size": wall[0][p],
                "ratio_to_baseline": wall[big][p] / wall[big][0],
                "ratio_holds": p == 0 || policy_ratio[p - 1] <= POLICY_GOAL,
                "growth_for_twice_the_size": growth[p],
                "growth_holds": growth[p] <= GROWTH_GOAL,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap());
        std::process::exit(i32::from(!missed.is_empty()));
    }
    println!(
        "medians of {} runs, {} simulated s, {}/{}",
        o.runs, o.duration_s, SIZES[big].0, SIZES[big].1
    );
    println!(
        "engine ({LINUX_DEFAULT}) {:.3} s, {} events; yardstick {:.3} s, {} events: {:.2}x (goal <= {ENGINE_GOAL}x: {})",
        wall[big][0], events, yard, yard_events, engine_ratio, verdict(engine_ratio, ENGINE_GOAL)
    );
    println!(
        "yardstick: {yard:.3} s; {}/{} {:.3} s, growth {yard_growth:.2}x for 2x (no goal: the host's own)",
        SIZES[0].0, SIZES[0].1, yard_by_size[0]
    );
    for (p, n) in names.iter().enumerate() {
        let vs = if p == 0 {
            String::new()
        } else {
            let r = policy_ratio[p - 1];
            format!(
                ", {r:.2}x the baseline (goal <= {POLICY_GOAL}x: {})",
                verdict(r, POLICY_GOAL)
            )
        };
        println!(
            "{n}: {:.3} s{vs}; {}/{} {:.3} s, growth {:.2}x for 2x (goal <= {GROWTH_GOAL}x: {})",
            wall[big][p],
            SIZES[0].0,
            SIZES[0].1,
            wall[0][p],
            growth[p],
            verdict(growth[p], GROWTH_GOAL)
        );
    }
    if missed.is_empty() {
        println!("every goal holds");
    } else {
        println!("goals that do not hold: {}", missed.join(", "));
        std::process::exit(1);
    }
}
