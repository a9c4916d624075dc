//! Figures drawn with `plotters` (SVG backend): grouped bars with min-max whiskers over seeds and
//! the paper's value marked, histograms, the policy matrix as a heat map with a diverging scale,
//! and Gantt charts on a shared time axis. Every figure has numeric axes, tick labels, units and a
//! legend, and every policy keeps one colour in every figure.

use hetsched_core::policies::REGISTRY;
use hetsched_experiments::reproduce::matrix::Matrix;
use hetsched_experiments::reproduce::{Bar, BarGroup, Figure, Histogram};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fmt::Write;

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Positions along a categorical axis are integers: one category spans `SLOT` units, so bars can
/// sit at fractions of it and tick labels at its centre (plotters formats labels only on integer
/// axes when the tick positions are given).
const SLOT: i32 = 1000;

/// The Okabe-Ito palette (Okabe and Ito, "Color Universal Design", 2008), distinguishable under
/// the common forms of colour blindness, with Paul Tol's wine as a ninth colour.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x88, 0x22, 0x55), // wine
    RGBColor(0xF0, 0xE4, 0x42), // yellow
];
/// Colours for series that are not policies (variants, placements, measurements): Paul Tol's
/// "muted" scheme (colour-blind safe), none of them a policy's colour.
const OTHERS: [RGBColor; 6] = [
    RGBColor(0x33, 0x22, 0x88), // indigo
    RGBColor(0x44, 0xAA, 0x99), // teal
    RGBColor(0x99, 0x99, 0x33), // olive
    RGBColor(0xAA, 0x44, 0x99), // purple
    RGBColor(0xDD, 0xCC, 0x77), // sand
    RGBColor(0x66, 0x11, 0x00), // brown
];
/// The baseline's colour: grey, so the policies stand out against it.
const BASELINE_GREY: RGBColor = RGBColor(0x99, 0x99, 0x99);
/// Colour of paper marks, whiskers and reference lines.
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);

const FONT: &str = "sans-serif";

/// The fixed colour of a registered policy (`None` for any other series): the baseline grey, the
/// others by their place in the registry, so a policy looks the same in every figure.
pub fn policy_color(name: &str) -> Option<RGBColor> {
    let i = REGISTRY.iter().position(|p| p.name == name)?;
    Some(if i == 0 {
        BASELINE_GREY
    } else {
        PALETTE[(i - 1) % PALETTE.len()]
    })
}

/// Colours for a figure's series: each policy its own, the other series colours no policy has,
/// in order.
pub fn series_colors(series: &[String]) -> Vec<RGBColor> {
    let mut others = OTHERS.iter().copied().cycle();
    series
        .iter()
        .map(|s| policy_color(s).unwrap_or_else(|| others.next().unwrap_or(INK)))
        .collect()
}

/// CSS colour of an RGB triple, for HTML legends.
pub fn css(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// An SVG, or a note saying why it could not be drawn.
fn svg_or_note(title: &str, draw: impl FnOnce(&mut String) -> DrawResult<()>) -> String {
    let mut svg = String::new();
    match draw(&mut svg) {
        Ok(()) => svg,
        Err(e) => format!(
            "<p>figure {} could not be drawn: {}</p>",
            crate::report::esc(title),
            crate::report::esc(&e.to_string())
        ),
    }
}

/// Approximate width of a label in pixels at `size` (the SVG backend cannot measure text).
fn text_px(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.55
}

/// The series of a figure in the order they first appear.
fn series_of(groups: &[BarGroup]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for b in groups.iter().flat_map(|g| &g.bars) {
        if !out.contains(&b.series) {
            out.push(b.series.clone());
        }
    }
    out
}

/// The value range a bar figure must show (bars from 0, whiskers, paper marks, reference).
fn value_range(f: &Figure) -> (f64, f64) {
    let bars = f.groups.iter().flat_map(|g| &g.bars);
    let values: Vec<f64> = bars
        .flat_map(|b: &Bar| [b.mean, b.min, b.max, b.paper.unwrap_or(f64::NAN)])
        .chain(f.reference)
        .filter(|v| v.is_finite())
        .collect();
    if f.log_scale {
        let pos: Vec<f64> = values.into_iter().filter(|v| *v > 0.0).collect();
        let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pos.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() {
            return (0.1, 10.0);
        }
        return (lo / 2.0, hi * 2.0);
    }
    let lo = values.iter().copied().fold(0.0, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.08).max(1e-9);
    (if lo < 0.0 { lo - pad } else { 0.0 }, hi + pad)
}

/// A legend strip below a plot: a swatch and a name per entry, wrapped to the width.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, RGBColor)],
    paper_mark: bool,
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let (w, _) = area.dim_in_pixel();
    let style = TextStyle::from((FONT, 13).into_font()).color(&BLACK);
    let (mut x, mut y) = (60i32, 8i32);
    let mut place = |width: i32| {
        if x + width > w as i32 - 10 {
            x = 60;
            y += 20;
        }
        let at = (x, y);
        x += width;
        at
    };
    for (name, color) in entries {
        let (lx, ly) = place(30 + text_px(name, 13.0) as i32);
        area.draw(&Rectangle::new(
            [(lx, ly + 2), (lx + 14, ly + 14)],
            color.filled(),
        ))?;
        area.draw(&Text::new(name.clone(), (lx + 19, ly + 1), style.clone()))?;
    }
    if paper_mark {
        let label = "the paper";
        let (lx, ly) = place(30 + text_px(label, 13.0) as i32);
        let shift = |r| {
            diamond_points(r)
                .into_iter()
                .map(|(dx, dy)| (lx + 7 + dx, ly + 8 + dy))
        };
        area.draw(&Polygon::new(shift(7).collect::<Vec<_>>(), INK.filled()))?;
        area.draw(&Polygon::new(shift(4).collect::<Vec<_>>(), WHITE.filled()))?;
        area.draw(&Text::new(label, (lx + 19, ly + 1), style))?;
    }
    Ok(())
}

/// The paper mark, a hollow black diamond: outer and inner corners around (0, 0), pixels.
fn diamond_points(r: i32) -> Vec<(i32, i32)> {
    vec![(0, -r), (r, 0), (0, r), (-r, 0)]
}

/// Rows of legend needed for `entries` across `width` pixels.
fn legend_rows(entries: &[(String, RGBColor)], extra: Option<&str>, width: f64) -> usize {
    let mut rows = 1;
    let mut x = 60.0;
    for w in entries
        .iter()
        .map(|(n, _)| 30.0 + text_px(n, 13.0))
        .chain(extra.map(|e| 30.0 + text_px(e, 13.0)))
    {
        if x + w > width - 10.0 {
            rows += 1;
            x = 60.0;
        }
        x += w;
    }
    rows
}

/// A figure of grouped bars: one group per label, one bar per series (its colour fixed per
/// policy), whiskers from the smallest to the largest value over seeds, the paper's value as a
/// diamond over the bar it belongs to, and a dashed reference line.
pub fn bar_figure_svg(f: &Figure) -> String {
    let caption = format!("{}: {}", f.id, f.title);
    svg_or_note(&caption, |out| {
        let series = series_of(&f.groups);
        let colors = series_colors(&series);
        let n = f.groups.len().max(1);
        let k = series.len().max(1);
        let label_px = f
            .groups
            .iter()
            .map(|g| text_px(&g.label, 12.0))
            .fold(0.0, f64::max);
        let per_group = (label_px + 14.0).max(k as f64 * 18.0 + 22.0);
        // Wide enough for the bars and for the caption.
        let width = (n as f64 * per_group + 130.0)
            .max(text_px(&caption, 19.0) * 0.9 + 40.0)
            .clamp(620.0, 2400.0);
        let entries: Vec<(String, RGBColor)> =
            series.iter().cloned().zip(colors.iter().copied()).collect();
        let has_paper = f
            .groups
            .iter()
            .flat_map(|g| &g.bars)
            .any(|b| b.paper.is_some());
        let legend_h =
            22.0 * legend_rows(&entries, has_paper.then_some("the paper"), width) as f64 + 12.0;
        let height = 400.0 + legend_h;
        {
            let root =
                SVGBackend::with_string(out, (width as u32, height as u32)).into_drawing_area();
            root.fill(&WHITE)?;
            let (plot, legend) = root.split_vertically(400);
            let (lo, hi) = value_range(f);
            let centres: Vec<i32> = (0..n as i32).map(|i| i * SLOT + SLOT / 2).collect();
            let labels: Vec<String> = f.groups.iter().map(|g| g.label.clone()).collect();
            let x_of = |v: &i32| -> String {
                let i = (v / SLOT).max(0) as usize;
                labels.get(i).cloned().unwrap_or_default()
            };
            let bar_w = SLOT as f64 * 0.8 / k as f64;
            let bar_x = |gi: usize, series_name: &str| -> (i32, i32) {
                let si = series.iter().position(|s| s == series_name).unwrap_or(0);
                let x0 = gi as f64 * SLOT as f64 + SLOT as f64 * 0.1 + si as f64 * bar_w;
                (x0.round() as i32, (x0 + bar_w * 0.92).round() as i32)
            };
            let x_end = n as i32 * SLOT;
            let mut builder = ChartBuilder::on(&plot);
            builder
                .caption(&caption, (FONT, 19))
                .margin(12)
                .x_label_area_size(34)
                .y_label_area_size(72);
            macro_rules! draw_bars {
                ($chart:expr, $floor:expr) => {{
                    let chart = $chart;
                    for (gi, g) in f.groups.iter().enumerate() {
                        for b in g.bars.iter().filter(|b| b.mean.is_finite()) {
                            let (x0, x1) = bar_x(gi, &b.series);
                            let si = series.iter().position(|s| *s == b.series).unwrap_or(0);
                            chart.draw_series(std::iter::once(Rectangle::new(
                                [(x0, $floor), (x1, b.mean)],
                                colors[si].filled(),
                            )))?;
                            if b.runs > 1 && b.max > b.min {
                                chart.draw_series(std::iter::once(ErrorBar::new_vertical(
                                    (x0 + x1) / 2,
                                    b.min,
                                    b.mean,
                                    b.max,
                                    INK.stroke_width(1),
                                    6,
                                )))?;
                            }
                            if let Some(p) = b.paper.filter(|p| p.is_finite()) {
                                chart.draw_series(std::iter::once(
                                    EmptyElement::at(((x0 + x1) / 2, p))
                                        + Polygon::new(diamond_points(7), INK.filled())
                                        + Polygon::new(diamond_points(4), WHITE.filled()),
                                ))?;
                            }
                        }
                    }
                    if let Some(r) = f.reference {
                        chart.draw_series(DashedLineSeries::new(
                            vec![(0, r), (x_end, r)],
                            6,
                            4,
                            INK.stroke_width(1).into(),
                        ))?;
                    }
                }};
            }
            if f.log_scale {
                let mut chart = builder.build_cartesian_2d(
                    (0..x_end).with_key_points(centres),
                    (lo..hi).log_scale(),
                )?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .light_line_style(WHITE)
                    .x_label_formatter(&x_of)
                    .y_label_formatter(&|v| {
                        if *v >= 10.0 {
                            format!("{v:.0}")
                        } else {
                            format!("{v}")
                        }
                    })
                    .y_desc(&f.y_label)
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 15))
                    .draw()?;
                draw_bars!(&mut chart, lo);
                // A zero has no place on a log axis: say so where its bar would be.
                let zero_style = TextStyle::from((FONT, 13).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                for (gi, g) in f.groups.iter().enumerate() {
                    for b in g.bars.iter().filter(|b| b.mean == 0.0) {
                        let (x0, x1) = bar_x(gi, &b.series);
                        chart.draw_series(std::iter::once(Text::new(
                            "0",
                            ((x0 + x1) / 2, lo * 1.15),
                            zero_style.clone(),
                        )))?;
                    }
                }
            } else {
                let mut chart =
                    builder.build_cartesian_2d((0..x_end).with_key_points(centres), lo..hi)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .light_line_style(WHITE)
                    .x_label_formatter(&x_of)
                    .y_desc(&f.y_label)
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 15))
                    .draw()?;
                draw_bars!(&mut chart, 0.0f64.clamp(lo, hi));
            }
            draw_legend(&legend, &entries, has_paper)?;
            root.present()?;
        }
        Ok(())
    })
}

/// A histogram (share of samples per bin, one bar per series) drawn as grouped bars over the bins.
pub fn histogram_svg(h: &Histogram) -> String {
    // Enough decimals that neighbouring bin edges differ.
    let width = h
        .edges
        .windows(2)
        .map(|e| e[1] - e[0])
        .fold(f64::INFINITY, f64::min);
    let decimals = if width >= 1.0 {
        0
    } else {
        (-width.log10()).ceil() as usize
    };
    let groups = h
        .edges
        .windows(2)
        .enumerate()
        .map(|(b, e)| {
            BarGroup::new(
                format!("{:.*}-{:.*}", decimals, e[0], decimals, e[1]),
                h.series
                    .iter()
                    .map(|(name, v)| {
                        Bar::of(name, &[100.0 * v.get(b).copied().unwrap_or(0.0)], None)
                    })
                    .collect(),
            )
        })
        .collect();
    let f = Figure::new(
        &h.title,
        &format!("share of samples per bin of {}", h.x_label),
        "share of samples, %",
        groups,
    );
    bar_figure_svg(&f)
}

/// The diverging colour of a speedup: red below 1, white at 1, blue above, saturating at ±30%
/// (ColorBrewer RdBu end points, readable under red-green colour blindness).
fn diverging(speedup: f64) -> RGBColor {
    const RED: (f64, f64, f64) = (178.0, 24.0, 43.0);
    const BLUE: (f64, f64, f64) = (33.0, 102.0, 172.0);
    let t = ((speedup - 1.0) / 0.3).clamp(-1.0, 1.0);
    let end = if t < 0.0 { RED } else { BLUE };
    let a = t.abs();
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    RGBColor(mix(end.0), mix(end.1), mix(end.2))
}

/// The policy matrix as a heat map: scenarios down, policies across, each cell the mean speedup
/// over the baseline on a diverging scale (legend on the right), labelled with its value;
/// static-best grey where it is not computable.
pub fn heat_map_svg(m: &Matrix) -> String {
    svg_or_note("policy matrix", |out| {
        let columns: Vec<&str> = m
            .policies
            .iter()
            .map(String::as_str)
            .chain([hetsched_core::policies::STATIC_BEST])
            .collect();
        let (cols, rows) = (columns.len(), m.scenarios.len().max(1));
        let left = m
            .scenarios
            .iter()
            .map(|s| text_px(s, 12.0))
            .fold(60.0, f64::max)
            + 16.0;
        let (cw, ch) = (92.0, 26.0);
        let width = left + cw * cols as f64 + 150.0;
        let height = ch * rows as f64 + 110.0;
        {
            let root =
                SVGBackend::with_string(out, (width as u32, height as u32)).into_drawing_area();
            root.fill(&WHITE)?;
            let (grid, scale) = root.split_horizontally((width - 130.0) as u32);
            let x_keys: Vec<i32> = (0..cols as i32).map(|j| j * SLOT + SLOT / 2).collect();
            let y_keys: Vec<i32> = (0..rows as i32).map(|i| i * SLOT + SLOT / 2).collect();
            let col_name = |v: &i32| {
                columns
                    .get((v / SLOT).max(0) as usize)
                    .map(ToString::to_string)
                    .unwrap_or_default()
            };
            // Row 0 at the top: y runs from the last scenario (bottom) to the first.
            let row_name = |v: &i32| {
                let i = rows - 1 - ((v / SLOT).max(0) as usize).min(rows - 1);
                m.scenarios.get(i).cloned().unwrap_or_default()
            };
            let mut chart = ChartBuilder::on(&grid)
                .caption(
                    "Mean speedup over the baseline, every policy on every scenario",
                    (FONT, 16),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(left as u32)
                .build_cartesian_2d(
                    (0..cols as i32 * SLOT).with_key_points(x_keys),
                    (0..rows as i32 * SLOT).with_key_points(y_keys),
                )?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_label_formatter(&col_name)
                .y_label_formatter(&row_name)
                .label_style((FONT, 14))
                .draw()?;
            let value_style =
                TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
            for (i, _) in m.scenarios.iter().enumerate() {
                let y = (rows - 1 - i) as i32 * SLOT;
                let cells = m.cells[i]
                    .iter()
                    .map(Some)
                    .chain([m.static_best[i].as_ref()]);
                for (j, c) in cells.enumerate() {
                    let x = j as i32 * SLOT;
                    let (fill, text) = match c {
                        Some(c) => (diverging(c.mean), format!("{:.3}", c.mean)),
                        None => (RGBColor(225, 225, 225), "n/a".to_string()),
                    };
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [
                            (x + SLOT / 50, y + SLOT / 25),
                            (x + SLOT - SLOT / 50, y + SLOT - SLOT / 25),
                        ],
                        fill.filled(),
                    )))?;
                    let ink = if c.is_some_and(|c| (c.mean - 1.0).abs() > 0.2) {
                        WHITE
                    } else {
                        BLACK
                    };
                    chart.draw_series(std::iter::once(Text::new(
                        text,
                        (x + SLOT / 2, y + SLOT / 2),
                        value_style.clone().color(&ink),
                    )))?;
                }
            }
            // The colour scale: 0.70 (red) to 1.30 (blue).
            let mut bar = ChartBuilder::on(&scale)
                .margin_top(40)
                .margin_bottom(40)
                .margin_right(60)
                .y_label_area_size(0)
                .right_y_label_area_size(44)
                .build_cartesian_2d(0.0..1.0, 0.7..1.3)?;
            bar.configure_mesh()
                .disable_mesh()
                .disable_x_axis()
                .y_labels(7)
                .y_label_formatter(&|v| format!("{v:.2}"))
                .y_desc("speedup, x")
                .label_style((FONT, 13))
                .draw()?;
            bar.draw_series((0..60).map(|s| {
                let v0 = 0.7 + s as f64 * 0.01;
                Rectangle::new(
                    [(0.0, v0), (1.0, v0 + 0.01)],
                    diverging(v0 + 0.005).filled(),
                )
            }))?;
            root.present()?;
        }
        Ok(())
    })
}

/// One run's Gantt chart input: segments of (core, app index, start s, end s).
pub struct GanttRun<'a> {
    pub title: String,
    pub segments: Vec<(usize, usize, f64, f64)>,
    pub dropped: u64,
    pub core_labels: &'a [String],
}

/// A Gantt chart of which app ran on which core: rows labelled by core and class, the time axis
/// shared by every chart of a report (`end_s`), one colour per app (legend in the page).
pub fn gantt_svg(run: &GanttRun<'_>, app_colors: &[RGBColor], end_s: f64) -> String {
    svg_or_note(&run.title, |out| {
        let cores = run.core_labels.len().max(1);
        let left = run
            .core_labels
            .iter()
            .map(|s| text_px(s, 11.0))
            .fold(50.0, f64::max)
            + 12.0;
        let height = 14.0 * cores as f64 + 90.0;
        {
            let root = SVGBackend::with_string(out, (960, height as u32)).into_drawing_area();
            root.fill(&WHITE)?;
            let y_keys: Vec<i32> = (0..cores as i32).map(|c| c * SLOT + SLOT / 2).collect();
            let core_name = |v: &i32| {
                let c = cores - 1 - ((v / SLOT).max(0) as usize).min(cores - 1);
                run.core_labels.get(c).cloned().unwrap_or_default()
            };
            let mut chart = ChartBuilder::on(&root)
                .caption(&run.title, (FONT, 14))
                .margin(8)
                .x_label_area_size(34)
                .y_label_area_size(left as u32)
                .build_cartesian_2d(
                    0.0..end_s.max(1e-9),
                    (0..cores as i32 * SLOT).with_key_points(y_keys),
                )?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(WHITE)
                .x_desc("simulated time, s")
                .y_label_formatter(&core_name)
                .label_style((FONT, 13))
                .axis_desc_style((FONT, 14))
                .draw()?;
            chart.draw_series(run.segments.iter().map(|&(core, app, start, end)| {
                let y = (cores - 1 - core.min(cores - 1)) as i32 * SLOT;
                let color = app_colors.get(app).copied().unwrap_or(INK);
                Rectangle::new(
                    [(start, y + SLOT / 10), (end, y + SLOT - SLOT / 10)],
                    color.filled(),
                )
            }))?;
            root.present()?;
        }
        if run.dropped > 0 {
            let _ = write!(out, "<p>{} later segments not drawn.</p>", run.dropped);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure() -> Figure {
        Figure::new(
            "T Figure 1",
            "test",
            "speedup, x",
            vec![
                BarGroup::new(
                    "w1",
                    vec![
                        Bar::of("amps", &[1.1, 1.2, 1.3], Some(1.16)),
                        Bar::of("hass", &[0.9], None),
                    ],
                ),
                BarGroup::new("w2", vec![Bar::of("amps", &[2.0, 2.5], None)]),
            ],
        )
        .with_reference(1.0)
    }

    #[test]
    fn a_bar_figure_has_axes_labels_whiskers_and_paper_marks() {
        let svg = bar_figure_svg(&figure());
        assert!(svg.starts_with("<svg"), "{svg}");
        for text in [
            "T Figure 1: test",
            "speedup, x",
            "w1",
            "w2",
            "amps",
            "hass",
            "the paper",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
        // Numeric ticks on the value axis.
        assert!(svg.contains("\n2.0\n"), "{svg}");
        // amps is the registry's first policy after the baseline: the palette's first colour.
        assert!(
            svg.to_lowercase().contains("#0072b2"),
            "amps's colour missing"
        );
    }

    #[test]
    fn policies_keep_their_colour_and_other_series_avoid_it() {
        let c = series_colors(&[
            "numa-amp".into(),
            "w/o NUMA-aware".into(),
            "static best".into(),
        ]);
        assert_eq!(Some(c[0]), policy_color("numa-amp"));
        assert_ne!(c[1], c[2]);
        // A series that is not a policy never takes a policy's colour.
        for other in &c[1..] {
            assert!(REGISTRY
                .iter()
                .all(|p| policy_color(p.name) != Some(*other)));
        }
        assert_eq!(policy_color("linux-default"), Some(BASELINE_GREY));
    }

    #[test]
    fn the_diverging_scale_is_white_at_one_and_saturates() {
        assert_eq!(diverging(1.0), RGBColor(255, 255, 255));
        assert_eq!(diverging(0.5), diverging(0.7));
        assert_eq!(diverging(2.0), RGBColor(33, 102, 172));
    }
}
