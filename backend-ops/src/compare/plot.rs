//! The ratios of a comparison as an SVG bar chart: one bar per case timed by both programs,
//! grouped and coloured by op and type, on a logarithmic axis around 1 (right of it: ours faster).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Row, distinguishing_fields, type_label};

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("no case was timed by both programs: nothing to plot")]
    Empty,
    #[error("{0}: only .svg charts are drawn")]
    Format(String),
    #[error("{0}: its folder does not exist")]
    NoFolder(String),
    #[error("ratios from {lo:e} to {hi:e} cannot be drawn on a logarithmic axis")]
    Range { lo: f64, hi: f64 },
    #[error("drawing {path}: {message}")]
    Draw { path: String, message: String },
}

/// Whether a chart can be written to `path` (an `.svg` in an existing folder), checked before a
/// comparison that may run for minutes rather than after it.
pub fn check_target(path: &Path) -> Result<(), PlotError> {
    if path.extension().and_then(|e| e.to_str()) != Some("svg") {
        return Err(PlotError::Format(path.display().to_string()));
    }
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !folder.is_dir() {
        return Err(PlotError::NoFolder(path.display().to_string()));
    }
    Ok(())
}

/// One bar: its label, group and ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// `OP type`, e.g. `MUL_MAT q4_0`.
    pub group: String,
    /// What tells the case apart within its op (`type_a=q4_0,n=512`).
    pub label: String,
    /// Upstream's time over ours.
    pub ratio: f64,
}

/// The bars for `rows`: those timed by both sides, grouped by op and type in order of first
/// appearance.
pub fn bars(rows: &[Row]) -> Vec<Bar> {
    let timed: Vec<(&Row, f64)> = rows.iter().filter_map(|r| r.ratio().map(|x| (r, x))).collect();
    let cases: Vec<&str> = timed.iter().map(|(r, _)| r.case.as_str()).collect();
    // The group names the op and types, so the bar's label leaves the type fields out.
    let labels = distinguishing_fields(&cases).into_iter().map(|fields| {
        fields
            .split(',')
            .filter(|f| !f.is_empty() && !["type_a=", "type_K=", "type_V="].iter().any(|t| f.starts_with(t)))
            .collect::<Vec<_>>()
            .join(",")
    });
    let mut bars: Vec<Bar> = timed
        .iter()
        .zip(labels)
        .map(|((r, ratio), label)| Bar {
            group: format!("{} {}", r.op, type_label(&r.case)).trim().to_owned(),
            label,
            ratio: *ratio,
        })
        .collect();
    let mut order: Vec<String> = Vec::new();
    for b in &bars {
        if !order.contains(&b.group) {
            order.push(b.group.clone());
        }
    }
    bars.sort_by_key(|b| order.iter().position(|g| *g == b.group));
    bars
}

/// Draws the ratios of `rows` into the SVG file `path`, under `title`.
pub fn plot_svg(rows: &[Row], path: &Path, title: &str) -> Result<(), PlotError> {
    check_target(path)?;
    let bars = bars(rows);
    if bars.is_empty() {
        return Err(PlotError::Empty);
    }
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let labels: Vec<String> = bars
        .iter()
        .map(|b| {
            if b.label.is_empty() {
                b.group.clone()
            } else {
                format!("{}: {}", b.group, b.label)
            }
        })
        .collect();
    let n = bars.len();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(10);
    let label_width = (longest as u32 * 7 + 20).min(900);
    let (width, height) = (label_width + 700, 110 + 24 * n as u32);
    let lo = bars.iter().map(|b| b.ratio).fold(1.0f64, f64::min) / 1.5;
    let hi = bars.iter().map(|b| b.ratio).fold(1.0f64, f64::max) * 1.5;
    // The axis steps from `lo` to `hi` by powers of ten: both must be finite and positive, or
    // the steps never end (the ratios are, by `Row::ratio`; the margins must not overflow).
    if !(lo.is_normal() && hi.is_normal() && lo > 0.0) {
        return Err(PlotError::Range { lo, hi });
    }

    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(label_width)
        // Integer ranges include their end, and the segments add one slot above it.
        .build_cartesian_2d((lo..hi).log_scale(), (0..(n as i32 - 1).max(1)).into_segmented())
        .map_err(|e| draw_err(&e))?;
    // Bar i is drawn from the top: row n-1-i of the axis.
    let row_of = |i: usize| (n - 1 - i) as i32;
    let label_of = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(y) | SegmentValue::Exact(y) if (0..n as i32).contains(y) => {
            labels[n - 1 - *y as usize].clone()
        }
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n + 1)
        .y_label_formatter(&label_of)
        .x_desc("upstream time / ours (log scale; > 1: ours faster)")
        .x_labels(12)
        .x_label_formatter(&|x| tick(*x))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|e| draw_err(&e))?;

    let mut groups: Vec<&str> = Vec::new();
    for b in &bars {
        if !groups.contains(&b.group.as_str()) {
            groups.push(&b.group);
        }
    }
    let colour = |group: &str| Palette99::pick(groups.iter().position(|g| *g == group).unwrap_or(0));
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let y = row_of(i);
            let mut rect = Rectangle::new(
                [(1.0, SegmentValue::Exact(y)), (b.ratio, SegmentValue::Exact(y + 1))],
                colour(&b.group).filled(),
            );
            rect.set_margin(3, 3, 0, 0);
            rect
        }))
        .map_err(|e| draw_err(&e))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let style = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
            Text::new(
                format!(" {:.2}", b.ratio),
                (b.ratio.max(1.0), SegmentValue::CenterOf(row_of(i))),
                style,
            )
        }))
        .map_err(|e| draw_err(&e))?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
            BLACK.stroke_width(1),
        )))
        .map_err(|e| draw_err(&e))?;
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}

/// A tick label: `0.5`, `1`, `2.5`, `10`.
fn tick(x: f64) -> String {
    let text = if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    };
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
        false => text,
    }
}
