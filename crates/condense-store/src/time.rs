//! ISO-8601 timestamps as pi writes and reads them, without a date library.
//!
//! pi stamps every entry with `new Date().toISOString()`
//! (`2026-11-29T16:32:20.751Z`) and turns such strings back into epoch
//! milliseconds with `new Date(s).getTime()` when it builds the messages of a
//! `custom_message`, `branch_summary` or `compaction` entry. [`format_iso`] and
//! [`parse_iso`] do the same two conversions over the proleptic Gregorian
//! calendar.

/// The largest distance from the epoch a JavaScript `Date` can hold (ms).
const MAX_TIME_MS: i64 = 8_640_000_000_000_000;

const MS_PER_DAY: i64 = 86_400_000;

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Count years from March so the leap day is the last day of the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400); // 0..=399
    let m = i64::from(month);
    let shifted_month = if m > 2 { m - 3 } else { m + 9 }; // March = 0
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil date of a day count from 1970-01-01: (year, month, day).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097); // 0..=146096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153; // March = 0
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        _ => 28,
    }
}

/// Epoch milliseconds as JavaScript's `Date.prototype.toISOString` writes
/// them: `YYYY-MM-DDTHH:mm:ss.sssZ`, with a signed six-digit year outside
/// 0000–9999.
pub fn format_iso(ms: i64) -> String {
    let days = ms.div_euclid(MS_PER_DAY);
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let hour = in_day / 3_600_000;
    let minute = in_day / 60_000 % 60;
    let second = in_day / 1000 % 60;
    let milli = in_day % 1000;
    let year_text = if (0..=9999).contains(&year) {
        format!("{year:04}")
    } else if year < 0 {
        format!("-{:06}", -year)
    } else {
        format!("+{year:06}")
    };
    format!("{year_text}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// A small cursor over the ASCII bytes of a timestamp.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Exactly `n` ASCII digits as a number.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let end = self.pos.checked_add(n)?;
        let slice = self.bytes.get(self.pos..end)?;
        let mut value = 0i64;
        for &b in slice {
            if !b.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(b - b'0');
        }
        self.pos = end;
        Some(value)
    }

    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

/// Epoch milliseconds of an ISO-8601 timestamp, as `Date.parse` reads the
/// ECMAScript date-time format; `None` where JavaScript gives `NaN`.
///
/// Accepted: `YYYY`, `YYYY-MM`, `YYYY-MM-DD`, each optionally followed by
/// `THH:mm`, `THH:mm:ss` or `THH:mm:ss.f…` (any number of fraction digits,
/// truncated to milliseconds) and a zone `Z` or `±HH:mm`; years may also be
/// written `±YYYYYY`. `24:00` means the end of the day.
///
/// One difference from JavaScript: a date-time *without* a zone is local time
/// in JavaScript; it is read as UTC here, since condense has no time zone to
/// apply. pi always writes the `Z`.
pub fn parse_iso(text: &str) -> Option<i64> {
    let mut c = Cursor {
        bytes: text.as_bytes(),
        pos: 0,
    };

    let year = match c.peek()? {
        b'+' | b'-' => {
            let negative = c.peek() == Some(b'-');
            c.pos += 1;
            let y = c.digits(6)?;
            if negative && y == 0 {
                return None; // "-000000" is not a year
            }
            if negative {
                -y
            } else {
                y
            }
        }
        _ => c.digits(4)?,
    };
    let mut month = 1;
    let mut day = 1;
    if c.eat(b'-') {
        month = c.digits(2)? as u32;
        if c.eat(b'-') {
            day = c.digits(2)? as u32;
        }
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }

    let (mut hour, mut minute, mut second, mut milli) = (0i64, 0i64, 0i64, 0i64);
    let mut offset_minutes = 0i64;
    if c.eat(b'T') {
        hour = c.digits(2)?;
        if !c.eat(b':') {
            return None;
        }
        minute = c.digits(2)?;
        if c.eat(b':') {
            second = c.digits(2)?;
            if c.eat(b'.') {
                let start = c.pos;
                let mut scale = 100;
                while let Some(b) = c.peek().filter(u8::is_ascii_digit) {
                    milli += i64::from(b - b'0') * scale;
                    scale /= 10;
                    c.pos += 1;
                }
                if c.pos == start {
                    return None;
                }
            }
        }
        if hour > 24 || minute > 59 || second > 59 {
            return None;
        }
        if hour == 24 && (minute, second, milli) != (0, 0, 0) {
            return None;
        }
        match c.peek() {
            Some(b'Z') => c.pos += 1,
            Some(sign @ (b'+' | b'-')) => {
                c.pos += 1;
                let oh = c.digits(2)?;
                if !c.eat(b':') {
                    return None;
                }
                let om = c.digits(2)?;
                if oh > 23 || om > 59 {
                    return None;
                }
                offset_minutes = (oh * 60 + om) * if sign == b'-' { -1 } else { 1 };
            }
            _ => {} // no zone: read as UTC (see above)
        }
    }
    if !c.done() {
        return None;
    }

    let ms = days_from_civil(year, month, day) * MS_PER_DAY
        + ((hour * 60 + minute - offset_minutes) * 60 + second) * 1000
        + milli;
    (ms.abs() <= MAX_TIME_MS).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pi_timestamps() {
        assert_eq!(
            parse_iso("2026-11-29T16:32:24.881Z"),
            Some(1_795_969_944_881)
        );
        assert_eq!(parse_iso("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(parse_iso("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(parse_iso("2000-02-29T12:00:00Z"), Some(951_825_600_000));
        assert_eq!(parse_iso("2024-03-10T05:06:07.1Z"), Some(1_710_047_167_100));
        assert_eq!(
            parse_iso("2024-03-10T05:06:07.123456Z"),
            Some(1_710_047_167_123)
        );
    }

    #[test]
    fn parses_the_other_iso_forms() {
        assert_eq!(parse_iso("1970"), Some(0));
        assert_eq!(parse_iso("1970-02"), Some(31 * MS_PER_DAY));
        assert_eq!(parse_iso("1970-01-02"), Some(MS_PER_DAY));
        assert_eq!(parse_iso("1970-01-01T01:00"), Some(3_600_000));
        assert_eq!(parse_iso("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_iso("1970-01-01T00:00:00-00:30"), Some(1_800_000));
        assert_eq!(parse_iso("1970-01-01T24:00:00Z"), Some(MS_PER_DAY));
        assert_eq!(
            parse_iso("+002026-11-29T16:32:24.881Z"),
            Some(1_795_969_944_881)
        );
        assert_eq!(
            parse_iso("-000001-01-01T00:00:00.000Z"),
            Some(-62_198_755_200_000)
        );
        assert_eq!(parse_iso("+275760-09-13T00:00:00.000Z"), Some(MAX_TIME_MS));
    }

    #[test]
    fn rejects_what_javascript_rejects() {
        for bad in [
            "",
            "nope",
            "2026-13-01",
            "2026-02-30",
            "2025-02-29",
            "2026-11-29T",
            "2026-11-29T16",
            "2026-11-29T16:60",
            "2026-11-29T24:00:01Z",
            "2026-11-29T16:32:24.Z",
            "2026-11-29T16:32:24.881Zjunk",
            "2026-11-29T16:32:24+0100",
            "-000000-01-01T00:00:00Z",
            "+275760-09-13T00:00:00.001Z",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn formats_like_to_iso_string() {
        assert_eq!(format_iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_iso(1_795_969_944_881), "2026-11-29T16:32:24.881Z");
        assert_eq!(format_iso(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_iso(951_825_600_000), "2000-02-29T12:00:00.000Z");
        assert_eq!(
            format_iso(-62_198_755_200_000),
            "-000001-01-01T00:00:00.000Z"
        );
        assert_eq!(format_iso(MAX_TIME_MS), "+275760-09-13T00:00:00.000Z");
    }

    #[test]
    fn format_and_parse_round_trip() {
        let mut ms = -MAX_TIME_MS;
        let step = 7_919_993_377_123; // odd step: hits every field value
        while ms <= MAX_TIME_MS {
            assert_eq!(parse_iso(&format_iso(ms)), Some(ms), "{ms}");
            ms += step;
        }
        for days in -800_000..800_000i64 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
