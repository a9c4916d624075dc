use hetsched_core::policies::policy_by_name;
use hetsched_core::presets::machine_preset;
use hetsched_sim::presets::workload_preset;
use hetsched_sim::{simulate, SimConfig};

#[test]
fn default_scenario_runs() {
    let topo = machine_preset("amps-smp").unwrap().unwrap();
    let w = workload_preset("mixed-default", &topo).unwrap().unwrap();
    let cfg = SimConfig { check_invariants: true, ..Default::default() };
    let r = simulate(&topo, &w, policy_by_name("linux-default").unwrap(), cfg);
    println!("{}", serde_json::to_string_pretty(&r).unwrap());
    assert!(r.finished);
}
