//! Human-readable numbers for reports: throughput with SI suffixes, latency with units.

/// `1.42M`, `420k`, `9.95k`, `812`.
pub fn ops(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1e9 {
        format!("{:.2}G", value / 1e9)
    } else if abs >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if abs >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if abs >= 1e3 {
        format!("{:.2}k", value / 1e3)
    } else if abs >= 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// An offered load, exact with thousands separated: `1,000 req/s`, `20,000 req/s`.
pub fn rate(requests_per_sec: u64) -> String {
    format!("{} req/s", grouped(requests_per_sec))
}

/// A whole number with its thousands separated: `1,000`, `20,000`.
fn grouped(value: u64) -> String {
    let digits = value.to_string();
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// `long-read`'s long reads as its knobs gave them: `one in 1,000, 100–300 ms`, or `one in 50, 200 ms` for a range
/// of one value.
pub fn long_reads(long: &quicklite_lab_core::LongReads) -> String {
    let time = if long.min_ms == long.max_ms {
        format!("{} ms", long.min_ms)
    } else {
        format!("{}–{} ms", long.min_ms, long.max_ms)
    };
    format!("one in {}, {time}", grouped(u64::from(long.every)))
}

/// A latency given in microseconds: `0.52 µs`, `3.3 µs`, `250 µs`, `1.30 ms`, `2.10 s`.
pub fn latency_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else if us >= 100.0 {
        format!("{us:.0} µs")
    } else if us >= 1.0 {
        format!("{us:.1} µs")
    } else {
        format!("{us:.2} µs")
    }
}

/// A CPU time given in microseconds, always in microseconds so that a column compares at a glance: `0.84 µs`,
/// `12.5 µs`, `1830 µs`.
pub fn cpu_us(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0} µs")
    } else if us >= 1.0 {
        format!("{us:.1} µs")
    } else {
        format!("{us:.2} µs")
    }
}

/// A share of one core as a percentage, with decimals where it is small (an idle runtime's few wake-ups are a
/// hundredth of a percent): `0.03%`, `2.5%`, `38%`.
pub fn core_percent(share: f64) -> String {
    let percent = share * 100.0;
    if percent < 1.0 {
        format!("{percent:.2}%")
    } else if percent < 10.0 {
        format!("{percent:.1}%")
    } else {
        format!("{percent:.0}%")
    }
}

/// The cross-core round trips measured before and after a cell: `66 ns`, or `66 → 340 ns` when the two differ
/// by more than half (the host moved the CPUs during the cell); empty when neither was measured.
pub fn round_trip_ns(before: Option<f64>, after: Option<f64>) -> String {
    match (before, after) {
        (Some(b), Some(a)) if a.max(b) > 1.5 * a.min(b) => format!("{b:.0} → {a:.0} ns"),
        (Some(b), Some(a)) => format!("{:.0} ns", a.max(b)),
        (Some(one), None) | (None, Some(one)) => format!("{one:.0} ns"),
        (None, None) => String::new(),
    }
}

/// A duration given in milliseconds: `500 ms`, `2 s`, `2.5 s`.
pub fn duration_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1_000) {
        format!("{} s", ms / 1_000)
    } else {
        format!("{:.1} s", ms as f64 / 1e3)
    }
}

/// A ratio to the baseline: `5.92× faster than tokio-rusqlite`, `1.30× slower than …`.
pub fn ratio(ratio: f64, baseline: &str) -> String {
    if ratio >= 1.0 {
        format!("{ratio:.2}× faster than {baseline}")
    } else if ratio > 0.0 {
        format!("{:.2}× slower than {baseline}", 1.0 / ratio)
    } else {
        format!("no throughput (vs {baseline})")
    }
}

/// A ratio for a table cell whose header already names the baseline: `5.92× faster`, `1.30× slower`.
pub fn ratio_short(ratio: f64) -> String {
    if ratio >= 1.0 {
        format!("{ratio:.2}× faster")
    } else if ratio > 0.0 {
        format!("{:.2}× slower", 1.0 / ratio)
    } else {
        "no throughput".to_owned()
    }
}

/// The range of a ratio in the direction its median reads: `5.10–6.30×` for a speed-up, the inverse range for a
/// slow-down (`1.30× slower`: `1.20–1.45×`), so the bracket reads like the figure before it.
pub fn ratio_range(median: f64, low: f64, high: f64) -> String {
    if median >= 1.0 || low <= 0.0 {
        format!("{low:.2}–{high:.2}×")
    } else {
        format!("{:.2}–{:.2}×", 1.0 / high, 1.0 / low)
    }
}

/// A size in bytes, binary units: `812 B`, `96.0 KiB`, `23.4 MiB`, `1.20 GiB`.
pub fn bytes(value: u64) -> String {
    const KIB: f64 = 1024.0;
    let v = value as f64;
    if v >= KIB * KIB * KIB {
        format!("{:.2} GiB", v / (KIB * KIB * KIB))
    } else if v >= KIB * KIB {
        format!("{:.1} MiB", v / (KIB * KIB))
    } else if v >= KIB {
        format!("{:.1} KiB", v / KIB)
    } else {
        format!("{value} B")
    }
}

/// A share as a percentage: `27%`.
pub fn percent(ratio: f64) -> String {
    format!("{:.0}%", ratio * 100.0)
}

/// A measured share as a percentage to two significant digits or so: `12%`, `3.0%`, `0.56%`, `<0.01%`.
pub fn measured_share(ratio: f64) -> String {
    let percent = ratio * 100.0;
    if percent >= 10.0 {
        format!("{percent:.0}%")
    } else if percent >= 1.0 {
        format!("{percent:.1}%")
    } else if percent >= 0.01 {
        format!("{percent:.2}%")
    } else {
        "<0.01%".to_string()
    }
}

/// A share given in parts per million, as an exact percentage: `10%`, `1%`, `0.1%`, `0.0001%`, `0%`.
pub fn share_ppm(ppm: u32) -> String {
    // Integer digits: a share of writes is a knob's value, and prints back as it was given.
    let (whole, fraction) = (ppm / 10_000, ppm % 10_000);
    if fraction == 0 {
        format!("{whole}%")
    } else {
        let digits = format!("{fraction:04}");
        format!("{whole}.{}%", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_shares_keep_two_digits() {
        assert_eq!(measured_share(0.125), "12%");
        assert_eq!(measured_share(0.0303), "3.0%");
        assert_eq!(measured_share(0.005625), "0.56%");
        assert_eq!(measured_share(0.00001), "<0.01%");
    }

    #[test]
    fn long_reads_read_as_their_knobs() {
        let long = quicklite_lab_core::LongReads {
            every: 1_000,
            min_ms: 100,
            max_ms: 300,
        };
        assert_eq!(long_reads(&long), "one in 1,000, 100–300 ms");
        let fixed = quicklite_lab_core::LongReads {
            every: 50,
            min_ms: 200,
            max_ms: 200,
        };
        assert_eq!(long_reads(&fixed), "one in 50, 200 ms");
    }

    #[test]
    fn rates_are_exact_with_thousands_separated() {
        assert_eq!(rate(1), "1 req/s");
        assert_eq!(rate(1_000), "1,000 req/s");
        assert_eq!(rate(100_000), "100,000 req/s");
        assert_eq!(rate(1_234_567), "1,234,567 req/s");
    }

    #[test]
    fn numbers_read_like_the_design_brief() {
        assert_eq!(ops(1_420_000.0), "1.42M");
        assert_eq!(ops(240_000.0), "240k");
        assert_eq!(ops(9_950.0), "9.95k");
        assert_eq!(ops(16.0), "16");
        assert_eq!(latency_us(3.3), "3.3 µs");
        assert_eq!(latency_us(1_300.0), "1.30 ms");
        assert_eq!(duration_ms(2_500), "2.5 s");
        assert_eq!(ratio(0.5, "x"), "2.00× slower than x");
        assert_eq!(ratio_range(5.9, 5.1, 6.3), "5.10–6.30×");
        assert_eq!(ratio_range(0.5, 0.4, 0.8), "1.25–2.50×");
        assert_eq!(bytes(812), "812 B");
        assert_eq!(bytes(24_000_000), "22.9 MiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
    }

    #[test]
    fn shares_of_writes_print_exactly() {
        let printed: Vec<String> = [0, 1, 100, 1_000, 2_500, 10_000, 100_000, 125_000, 1_000_000]
            .into_iter()
            .map(share_ppm)
            .collect();
        assert_eq!(
            printed,
            [
                "0%", "0.0001%", "0.01%", "0.1%", "0.25%", "1%", "10%", "12.5%", "100%"
            ]
        );
    }

    #[test]
    fn round_trips_show_a_move_of_the_cpus_and_hide_jitter() {
        assert_eq!(round_trip_ns(Some(64.5), Some(71.0)), "71 ns");
        assert_eq!(round_trip_ns(Some(66.0), Some(340.0)), "66 → 340 ns");
        assert_eq!(round_trip_ns(Some(352.0), Some(61.0)), "352 → 61 ns");
        assert_eq!(round_trip_ns(None, Some(80.0)), "80 ns");
        assert_eq!(round_trip_ns(None, None), "");
    }
}
