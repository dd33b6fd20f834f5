//! Figures and ratios: printed as tables, written as CSV and Markdown under
//! the output folder (`target/bench` unless `RWLOCK_BENCH_OUT` says otherwise).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long each measurement runs; `--quick` shortens everything.
pub struct Settings {
    pub rounds: usize,
    pub warmup: Duration,
    pub measure: Duration,
    /// Scales the sample counts of the latency and per-call sections.
    pub samples: f64,
}

impl Settings {
    pub fn new(quick: bool) -> Settings {
        if quick {
            Settings {
                rounds: 1,
                warmup: Duration::from_millis(100),
                measure: Duration::from_millis(300),
                samples: 0.2,
            }
        } else {
            Settings {
                rounds: 5,
                warmup: Duration::from_millis(200),
                measure: Duration::from_millis(800),
                samples: 1.0,
            }
        }
    }

    pub fn scaled(&self, n: usize) -> usize {
        ((n as f64 * self.samples).round() as usize).max(1)
    }
}

/// Median of the samples (sorted in place).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    assert!(n > 0, "median of nothing");
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

#[derive(Clone, Copy)]
pub enum Target {
    AtLeast(f64),
    AtMost(f64),
    /// Equal within 2 %.
    About(f64),
    /// At least this much wished for, not required of the case: shown with
    /// its verdict, never counted as missed.
    Wished(f64),
}

impl Target {
    fn met(self, value: f64) -> bool {
        match self {
            Target::AtLeast(t) | Target::Wished(t) => value >= t,
            Target::AtMost(t) => value <= t,
            Target::About(t) => (value - t).abs() <= 0.02 * t.abs(),
        }
    }

    fn text(self) -> String {
        match self {
            Target::AtLeast(t) => format!(">= {t}"),
            Target::AtMost(t) => format!("<= {t}"),
            Target::About(t) => format!("= {t} (2 %)"),
            Target::Wished(t) => format!(">= {t} (not required)"),
        }
    }

    fn required(self) -> bool {
        !matches!(self, Target::Wished(_))
    }

    fn verdict(self, value: f64) -> &'static str {
        match (self.met(value), self.required()) {
            (true, _) => "PASS",
            (false, true) => "FAIL",
            (false, false) => "short",
        }
    }
}

struct Value {
    section: String,
    case: String,
    variant: String,
    value: f64,
    unit: String,
}

struct Ratio {
    section: String,
    case: String,
    name: String,
    value: f64,
    target: Option<Target>,
}

#[derive(Default)]
pub struct Report {
    values: Vec<Value>,
    ratios: Vec<Ratio>,
}

fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Appends one CSV line of `fields`.
fn csv_line<'a>(out: &mut String, fields: impl IntoIterator<Item = &'a String>) {
    let fields: Vec<String> = fields.into_iter().map(|f| csv_field(f)).collect();
    let _ = writeln!(out, "{}", fields.join(","));
}

impl Report {
    pub fn value(&mut self, section: &str, case: &str, variant: &str, value: f64, unit: &str) {
        println!("  {case:<44} {variant:<26} {:>12} {unit}", number(value));
        self.values.push(Value {
            section: section.into(),
            case: case.into(),
            variant: variant.into(),
            value,
            unit: unit.into(),
        });
    }

    pub fn ratio(
        &mut self,
        section: &str,
        case: &str,
        name: &str,
        value: f64,
        target: Option<Target>,
    ) {
        let verdict = target.map_or(String::new(), |t| {
            format!("target {}: {}", t.text(), t.verdict(value))
        });
        println!(
            "  {case:<44} {name:<26} {:>12} {verdict}",
            format!("{value:.2}x")
        );
        self.ratios.push(Ratio {
            section: section.into(),
            case: case.into(),
            name: name.into(),
            value,
            target,
        });
    }

    /// Writes results.csv, ratios.csv and results.md; returns the folder.
    pub fn write(&self, dir: &Path, machine: &str) -> PathBuf {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut values = String::from("section,case,variant,value,unit\n");
        for v in &self.values {
            let value = v.value.to_string();
            csv_line(
                &mut values,
                [&v.section, &v.case, &v.variant, &value, &v.unit],
            );
        }
        let mut ratios = String::from("section,case,ratio,value,target,met\n");
        for r in &self.ratios {
            let value = r.value.to_string();
            let target = r.target.map(Target::text).unwrap_or_default();
            let met = r
                .target
                .map_or(String::new(), |t| t.met(r.value).to_string());
            csv_line(
                &mut ratios,
                [&r.section, &r.case, &r.name, &value, &target, &met],
            );
        }
        let mut md =
            format!("{machine}\n\n| section | case | variant | value |\n|---|---|---|---|\n");
        for v in &self.values {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} {} |",
                v.section,
                v.case,
                v.variant,
                number(v.value),
                v.unit
            );
        }
        md.push_str("\n| section | case | ratio | value | target |\n|---|---|---|---|---|\n");
        for r in &self.ratios {
            let target = r.target.map_or(String::new(), |t| {
                format!("{} {}", t.text(), t.verdict(r.value))
            });
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2}x | {} |",
                r.section, r.case, r.name, r.value, target
            );
        }
        for (name, text) in [
            ("results.csv", values),
            ("ratios.csv", ratios),
            ("results.md", md),
        ] {
            let path = dir.join(name);
            fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        }
        dir.to_path_buf()
    }

    /// Every ratio with a target, as a table with its verdict, for the
    /// closing summary; and the required ones that were missed.
    pub fn summary(&self) -> (String, Vec<String>) {
        let mut table = format!(
            "  {:<14} {:<46} {:<34} {:>8}  {:<24} verdict\n",
            "section", "case", "ratio", "value", "target"
        );
        let mut missed = Vec::new();
        for r in &self.ratios {
            let Some(t) = r.target else { continue };
            let verdict = t.verdict(r.value);
            let _ = writeln!(
                table,
                "  {:<14} {:<46} {:<34} {:>8}  {:<24} {verdict}",
                r.section,
                r.case,
                r.name,
                format!("{:.2}x", r.value),
                t.text()
            );
            if verdict == "FAIL" {
                missed.push(format!(
                    "{} / {} / {}: {:.2}x, target {}",
                    r.section,
                    r.case,
                    r.name,
                    r.value,
                    t.text()
                ));
            }
        }
        (table, missed)
    }
}
