//! Wall-clock times as text, in UTC (no time-zone database involved).

/// Civil date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let (era, doe) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (year, month, day, hour, minute, second) of a Unix time.
fn parts(secs: i64) -> [i64; 6] {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    [y, m, d, rem / 3600, rem % 3600 / 60, rem % 60]
}

/// `2026-05-01 12:00:00 UTC`.
pub(crate) fn utc(secs: i64) -> String {
    let [y, m, d, h, mi, s] = parts(secs);
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// `20260501T120000Z` (for names that sort by time).
pub(crate) fn utc_compact(secs: i64) -> String {
    let [y, m, d, h, mi, s] = parts(secs);
    format!("{y:04}{m:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// `2026-05-01T12:00:00.123Z` (RFC 3339).
pub(crate) fn rfc3339_millis(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let [y, m, d2, h, mi, s] = parts(d.as_secs() as i64);
    format!(
        "{y:04}-{m:02}-{d2:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        d.subsec_millis()
    )
}

/// Seconds since the Unix epoch, now.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_777_636_800), "2026-05-01 12:00:00 UTC");
        assert_eq!(utc_compact(951_782_400), "20000229T000000Z");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_777_636_800_123);
        assert_eq!(rfc3339_millis(t), "2026-05-01T12:00:00.123Z");
    }
}
