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

/// Day count since 1970-01-01 of a civil date (the inverse of [`civil`]).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let (era, yoe) = (y.div_euclid(400), y.rem_euclid(400));
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 1000);
    rfc3339_of_millis(
        secs.saturating_mul(1000)
            .saturating_add(i64::from(d.subsec_millis())),
    )
}

/// [`rfc3339_millis`] of a time in milliseconds since the Unix epoch.
pub(crate) fn rfc3339_of_millis(ms: i64) -> String {
    let [y, m, d, h, mi, s] = parts(ms.div_euclid(1000));
    format!(
        "{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:03}Z",
        ms.rem_euclid(1000)
    )
}

/// Milliseconds since the Unix epoch of an RFC 3339 UTC time as
/// [`rfc3339_millis`] writes it (`2026-05-01T12:00:00.123Z`; the fraction
/// may have 0-9 digits, `z` and `+00:00` are UTC too). `None` for anything
/// else, including dates that do not exist.
pub(crate) fn parse_rfc3339_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(r)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(digits.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo) || d < 1 || d > month_days[(mo - 1) as usize] {
        return None;
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // Bytes 0..19 are ASCII (checked above): 19 is a character boundary.
    let mut rest = &s[19..];
    let mut millis = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 9 {
            return None;
        }
        let kept = n.min(3);
        millis = frac[..kept]
            .bytes()
            .fold(0, |m, d| m * 10 + i64::from(d - b'0'))
            * 10_i64.pow(3 - kept as u32);
        rest = &frac[n..];
    }
    if !matches!(rest, "Z" | "z" | "+00:00") {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec;
    Some(secs * 1000 + millis)
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

    #[test]
    fn rfc3339_times_parse_back() {
        let p = parse_rfc3339_millis;
        assert_eq!(p("2026-05-01T12:00:00.123Z"), Some(1_777_636_800_123));
        assert_eq!(p("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(p("2000-02-29T00:00:00.5+00:00"), Some(951_782_400_500));
        assert_eq!(p("2026-05-01T12:00:00.123456789Z"), Some(1_777_636_800_123));
        for secs in [0, 951_782_400, 1_777_636_800, 4_102_444_799] {
            let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(secs * 1000 + 7);
            assert_eq!(p(&rfc3339_millis(t)), Some(secs as i64 * 1000 + 7));
            assert_eq!(rfc3339_of_millis(secs as i64 * 1000 + 7), rfc3339_millis(t));
        }
        for bad in [
            "",
            "2026-05-01",
            "2026-05-01T12:00:00",
            "2026-05-01T12:00:00.Z",
            "2026-05-01T12:00:00.1234567890Z",
            "2026-05-01T12:00:00+02:00",
            "2026-02-29T12:00:00Z",
            "2026-13-01T12:00:00Z",
            "2026-05-01T24:00:00Z",
            "2026-05-01T12:00:60Z",
            "2026-05-01T12:00:00ZZ",
            "+026-05-01T12:00:00Z",
            "2026-05-01T12:00:00\u{e9}",
            "2026-05-01T1\u{e9}:00Z",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }
}
