//! Pinter section 5 on the simulator: the directions the experiment checks, asserted.
//! Rows that do not hold are reported by `hetsched reproduce`, not hidden here.

mod common;

use common::{row, run};

#[test]
fn grouping_by_data_fragment_cuts_misses_and_time() {
    let e = run("data-sharing");
    let faster = row(&e, "custom benchmark: cells where data-sharing runs faster");
    assert_eq!(faster.holds, Some(true), "{}", faster.our_value);
    let misses = row(
        &e,
        "custom benchmark: fewest times fewer cache misses over the 27 cells",
    );
    assert!(misses.our_value >= 5.0, "{}", misses.our_value);
    let chat = row(&e, "chat: cells where data-sharing takes less time");
    assert_eq!(chat.our_value, 9.0);
    for r in e
        .rows
        .iter()
        .filter(|r| r.label.starts_with("chat ") && r.label.contains("rooms"))
    {
        assert!(r.our_value > 20.0, "{}: {}", r.label, r.our_value);
    }
    assert_eq!(
        row(
            &e,
            "chat: cells where data-sharing's spread over runs is smaller"
        )
        .holds,
        Some(true)
    );
}
