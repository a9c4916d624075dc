//! The data of a paper-style figure: groups of bars, one bar per series (a policy, a placement,
//! a variant), each the mean over seeds with its minimum and maximum, and the paper's value where
//! the paper gives one. The CLI draws them; the experiments only say what to draw.

use serde::Serialize;

/// One figure, in the style of a figure or table of the paper it reproduces.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    /// The paper's figure or table this stands for, e.g. "AMPS Figure 5".
    pub id: String,
    pub title: String,
    /// What the bars measure, with its unit.
    pub y_label: String,
    /// A value drawn across the plot as a dashed line (1.0 for speedups, 0 for gains).
    pub reference: Option<f64>,
    /// Draw the value axis on a log scale (counts spanning orders of magnitude).
    pub log_scale: bool,
    pub groups: Vec<BarGroup>,
}

/// Bars side by side under one label (a workload, a machine, a cell of a table).
#[derive(Clone, Debug, Serialize)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// One bar: a series' value over the seeds of one group.
#[derive(Clone, Debug, Serialize)]
pub struct Bar {
    /// The series (a policy's name where the bar is a policy's, so its colour is the policy's).
    pub series: String,
    pub mean: f64,
    /// The smallest and largest value over seeds (equal to `mean` for a single run).
    pub min: f64,
    pub max: f64,
    /// Number of seeds behind the bar.
    pub runs: usize,
    /// The paper's value for this bar, when it gives one.
    pub paper: Option<f64>,
}

impl Bar {
    /// A bar of the mean of `values` (one per seed) with their range. Non-finite values (a run
    /// with nothing to measure) are left out; a bar with none left has a NaN mean and is not drawn.
    pub fn of(series: impl Into<String>, values: &[f64], paper: Option<f64>) -> Bar {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let (min, max) = finite
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        // The sum's rounding can put the mean of equal values an ulp outside their range.
        let mean = super::mean(&finite);
        Bar {
            series: series.into(),
            mean: if finite.is_empty() {
                mean
            } else {
                mean.clamp(min, max)
            },
            min,
            max,
            runs: finite.len(),
            paper,
        }
    }
}

impl BarGroup {
    pub fn new(label: impl Into<String>, bars: Vec<Bar>) -> BarGroup {
        BarGroup {
            label: label.into(),
            bars,
        }
    }
}

impl Figure {
    pub fn new(id: &str, title: &str, y_label: &str, groups: Vec<BarGroup>) -> Figure {
        Figure {
            id: id.into(),
            title: title.into(),
            y_label: y_label.into(),
            reference: None,
            log_scale: false,
            groups,
        }
    }

    /// With a dashed line across at `value`.
    pub fn with_reference(mut self, value: f64) -> Figure {
        self.reference = Some(value);
        self
    }

    /// With a log-scaled value axis.
    pub fn log(mut self) -> Figure {
        self.log_scale = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_is_the_mean_and_range_of_its_finite_values() {
        let b = Bar::of("amps", &[1.0, 3.0, f64::NAN, 2.0], Some(2.5));
        assert_eq!((b.mean, b.min, b.max, b.runs), (2.0, 1.0, 3.0, 3));
        assert_eq!(b.paper, Some(2.5));
        let empty = Bar::of("x", &[f64::NAN], None);
        assert!(empty.mean.is_nan());
        assert_eq!(empty.runs, 0);
    }
}
