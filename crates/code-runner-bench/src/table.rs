//! Rows of the result table: a figure, its target, and whether it is met.

use serde::Serialize;

use super::Outcome;
use super::stats::Stats;

/// A goal for a figure (printed beside it; never an assertion).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// The figure should be at most this.
    AtMost(f64),
    /// The figure should be at least this.
    AtLeast(f64),
}

/// A goal with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Target {
    /// The bound.
    pub goal: Goal,
    /// The figure's unit, e.g. `ms`.
    pub unit: &'static str,
}

impl Target {
    /// At most `bound` `unit`.
    pub const fn at_most(bound: f64, unit: &'static str) -> Target {
        Target {
            goal: Goal::AtMost(bound),
            unit,
        }
    }

    /// At least `bound` `unit`.
    pub const fn at_least(bound: f64, unit: &'static str) -> Target {
        Target {
            goal: Goal::AtLeast(bound),
            unit,
        }
    }

    /// Whether `value` meets the goal.
    pub fn met(&self, value: f64) -> bool {
        match self.goal {
            Goal::AtMost(bound) => value <= bound,
            Goal::AtLeast(bound) => value >= bound,
        }
    }

    /// e.g. `≤ 5 ms`.
    pub fn label(&self) -> String {
        let (sign, bound) = match self.goal {
            Goal::AtMost(bound) => ("≤", bound),
            Goal::AtLeast(bound) => ("≥", bound),
        };
        let space = if self.unit == "×" { "" } else { " " };
        format!("{sign} {}{space}{}", num(bound), self.unit)
    }
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// A stable key, e.g. `python.one_shot.in_process`.
    pub key: String,
    /// What is measured.
    pub measure: String,
    /// The figure judged against the target (a latency's p50); absent when not measured.
    pub value: Option<f64>,
    /// Its unit.
    pub unit: &'static str,
    /// The figure as printed, or why there is none.
    pub shown: String,
    /// The target, as printed.
    pub target: Option<String>,
    /// Whether the target is met; absent without a target or a figure.
    pub met: Option<bool>,
}

impl Row {
    /// A latency row: p50 and p99, judged on p50.
    pub fn latency(
        key: String,
        measure: String,
        stats: &Outcome<Stats>,
        target: Option<Target>,
    ) -> Row {
        let shown = stats
            .as_ref()
            .map(|s| format!("p50 {} ms · p99 {} ms", num(s.p50_ms), num(s.p99_ms)));
        Row::build(
            key,
            measure,
            stats.as_ref().map(|s| s.p50_ms),
            "ms",
            shown,
            target,
        )
    }

    /// A single-figure row.
    pub fn figure(
        key: String,
        measure: String,
        value: Outcome<f64>,
        unit: &'static str,
        target: Option<Target>,
    ) -> Row {
        let space = if unit == "×" { "" } else { " " };
        let shown = value.as_ref().map(|v| format!("{}{space}{unit}", num(*v)));
        Row::build(key, measure, value.as_ref().copied(), unit, shown, target)
    }

    fn build(
        key: String,
        measure: String,
        value: Result<f64, &String>,
        unit: &'static str,
        shown: Result<String, &String>,
        target: Option<Target>,
    ) -> Row {
        let value = value.ok();
        Row {
            key,
            measure,
            value,
            unit,
            shown: shown.unwrap_or_else(|why| why.clone()),
            target: target.map(|t| t.label()),
            met: target.zip(value).map(|(t, v)| t.met(v)),
        }
    }
}

/// A number with sensible precision: 3 significant-ish digits, never scientific.
pub fn num(value: f64) -> String {
    let abs = value.abs();
    let decimals = if abs >= 100.0 || abs == abs.trunc() && abs >= 1.0 {
        0
    } else if abs >= 10.0 {
        1
    } else if abs >= 1.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$}")
}

/// The table, as text: measure, value, target, met?
pub fn table(rows: &[Row]) -> String {
    let header = ["measure", "value", "target", "met?"];
    let cells: Vec<[String; 4]> = rows
        .iter()
        .map(|row| {
            [
                row.measure.clone(),
                row.shown.clone(),
                row.target.clone().unwrap_or_else(|| "—".into()),
                match row.met {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "—".into(),
                },
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for cell in &cells {
        for (width, text) in widths.iter_mut().zip(cell) {
            *width = (*width).max(text.chars().count());
        }
    }
    let line = |cols: [&str; 4]| {
        let mut out = String::new();
        for (i, (text, width)) in cols.iter().zip(widths).enumerate() {
            out.push_str(text);
            if i < 3 {
                out.extend(std::iter::repeat_n(' ', width - text.chars().count() + 2));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    out.push_str(&line(
        widths.map(|w| "─".repeat(w)).each_ref().map(String::as_str),
    ));
    for cell in &cells {
        out.push_str(&line(cell.each_ref().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goals judge both ways; missing figures are neither met nor failed; the table aligns.
    #[test]
    fn rows_judge_and_align() {
        let fast = Row::figure(
            "a".into(),
            "a".into(),
            Ok(0.8),
            "ms",
            Some(Target::at_most(1.0, "ms")),
        );
        assert_eq!(fast.met, Some(true));
        assert_eq!(fast.shown, "0.800 ms");
        let slow = Row::figure(
            "b".into(),
            "b".into(),
            Ok(150.0),
            "runs/s",
            Some(Target::at_least(200.0, "runs/s")),
        );
        assert_eq!(slow.met, Some(false));
        let na = Row::figure(
            "c".into(),
            "c".into(),
            Err("n/a (x)".into()),
            "×",
            Some(Target::at_most(1.1, "×")),
        );
        assert_eq!(
            (na.met, na.shown.as_str(), na.target.as_deref()),
            (None, "n/a (x)", Some("≤ 1.10×"))
        );
        let text = table(&[fast, slow, na]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        let column = |line: &str, needle: &str| {
            let byte = line.find(needle).unwrap();
            line[..byte].chars().count()
        };
        assert_eq!(column(lines[0], "target"), column(lines[2], "≤ 1 ms"));
        assert_eq!(column(lines[0], "target"), column(lines[3], "≥ 200"));
        assert_eq!(Target::at_most(16.0, "MiB").label(), "≤ 16 MiB");
    }
}
