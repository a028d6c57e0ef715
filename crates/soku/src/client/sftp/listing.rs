//! How `ls` and `df` show what the server told: sorted, in columns or long lines as
//! ls(1) shows them, every name from the server made visible (`crate::ui::visible`).

use soku_proto::browse::{Listed, Space, TYPE_MASK};

use super::command::LsFlags;
use crate::ui::visible_bytes;

/// The lines of a listing of `entries` under `flags`, for a terminal `width` columns
/// wide (`None`: not a terminal, one name per line); `now` in seconds since the epoch.
pub fn lines(
    mut entries: Vec<Listed>,
    flags: LsFlags,
    width: Option<usize>,
    now: i64,
) -> Vec<String> {
    entries.retain(|e| flags.all || !e.name.as_bytes().starts_with(b"."));
    entries.sort_by(|a, b| {
        let order = if flags.by_time {
            b.mtime.cmp(&a.mtime)
        } else if flags.by_size {
            b.size.cmp(&a.size)
        } else {
            std::cmp::Ordering::Equal
        };
        order.then_with(|| a.name.as_bytes().cmp(b.name.as_bytes()))
    });
    if flags.reverse {
        entries.reverse();
    }
    if flags.long {
        return entries.iter().map(|e| long(e, flags.numeric, now)).collect();
    }
    let names: Vec<String> = entries.iter().map(|e| visible_bytes(e.name.as_bytes())).collect();
    match width {
        Some(width) if !flags.single => columns(&names, width),
        _ => names,
    }
}

/// Names in columns down then across, as ls(1) puts them.
fn columns(names: &[String], width: usize) -> Vec<String> {
    if names.is_empty() {
        return Vec::new();
    }
    let widest = names.iter().map(|n| n.chars().count()).max().unwrap_or(1) + 2;
    let per_line = (width / widest).max(1);
    let rows = names.len().div_ceil(per_line);
    (0..rows)
        .map(|row| {
            let mut line = String::new();
            for name in names.iter().skip(row).step_by(rows) {
                line.push_str(&format!("{name:<widest$}"));
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// One `ls -l` line.
fn long(entry: &Listed, numeric: bool, now: i64) -> String {
    let owner = match (&entry.owner, numeric) {
        (Some(name), false) => visible_bytes(name.as_bytes()),
        _ => entry.uid.to_string(),
    };
    let group = match (&entry.group, numeric) {
        (Some(name), false) => visible_bytes(name.as_bytes()),
        _ => entry.gid.to_string(),
    };
    let mut line = format!(
        "{} {:>4} {:<8} {:<8} {:>10} {} {}",
        permissions(entry.mode),
        entry.links,
        owner,
        group,
        entry.size,
        date(entry.mtime, now),
        visible_bytes(entry.name.as_bytes())
    );
    if let Some(target) = &entry.target {
        line.push_str(" -> ");
        line.push_str(&visible_bytes(target.as_bytes()));
    }
    line
}

/// `drwxr-xr-x`, as ls(1) writes a mode.
pub fn permissions(mode: u32) -> String {
    let kind = match mode & TYPE_MASK {
        0o040_000 => 'd',
        0o120_000 => 'l',
        0o020_000 => 'c',
        0o060_000 => 'b',
        0o010_000 => 'p',
        0o140_000 => 's',
        _ => '-',
    };
    let mut out = String::with_capacity(10);
    out.push(kind);
    for (shift, special, set, unset) in
        [(6, 0o4000, 's', 'S'), (3, 0o2000, 's', 'S'), (0, 0o1000, 't', 'T')]
    {
        let bits = (mode >> shift) & 7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => set,
            (false, true) => unset,
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    out
}

/// `Nov 28 14:02` within half a year of `now`, `Nov 28  2025` otherwise, as ls(1)
/// writes a time; in UTC (the server's time zone is not told).
pub fn date(mtime: i64, now: i64) -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (year, month, day) = civil(mtime.div_euclid(86_400));
    let seconds = mtime.rem_euclid(86_400);
    let name = MONTHS[(month - 1) as usize];
    const HALF_YEAR: i64 = 182 * 86_400;
    if (now - mtime).abs() < HALF_YEAR {
        format!("{name} {day:>2} {:02}:{:02}", seconds / 3600, seconds % 3600 / 60)
    } else {
        format!("{name} {day:>2} {year:>5}")
    }
}

/// The calendar date of a day counted from 1970-01-01 (H. Hinnant's `civil_from_days`,
/// "chrono-Compatible Low-Level Date Algorithms").
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `df`'s two lines: a heading and the figures, in KiB or (`human`) in units; inodes
/// with `inodes`.
pub fn space(space: &Space, human: bool, inodes: bool) -> [String; 2] {
    if inodes {
        let used = space.inodes.saturating_sub(space.inodes_free);
        return [
            format!("{:>12} {:>12} {:>12} {:>9}", "Inodes", "Used", "Avail", "%Capacity"),
            format!(
                "{:>12} {:>12} {:>12} {:>8}%",
                space.inodes,
                used,
                space.inodes_free,
                percent(used, space.inodes)
            ),
        ];
    }
    let used = space.total.saturating_sub(space.free);
    let shown = |bytes: u64| {
        if human {
            crate::ui::human_bytes(bytes)
        } else {
            (bytes / 1024).to_string()
        }
    };
    let unit = if human { "Size" } else { "Size (KiB)" };
    [
        format!("{unit:>12} {:>12} {:>12} {:>9}", "Used", "Avail", "%Capacity"),
        format!(
            "{:>12} {:>12} {:>12} {:>8}%",
            shown(space.total),
            shown(used),
            shown(space.available),
            percent(used, space.total)
        ),
    ]
}

fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        0
    } else {
        (u128::from(part) * 100 / u128::from(whole)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use soku_proto::name::Name;

    fn entry(name: &[u8], mode: u32, size: u64, mtime: i64) -> Listed {
        Listed {
            name: Name::from_bytes(name.to_vec()),
            mode,
            links: 1,
            uid: 1000,
            gid: 100,
            owner: Some("alice".into()),
            group: None,
            size,
            mtime,
            target: None,
        }
    }

    #[test]
    fn dates_read_as_ls_writes_them() {
        // 2026-11-28 14:02:00 UTC.
        let now = 1_795_874_520;
        assert_eq!(date(now, now), "Nov 28 14:02");
        assert_eq!(date(0, now), "Jan  1  1970");
        assert_eq!(date(951_782_400, now), "Feb 29  2000");
    }

    #[test]
    fn modes_read_as_ls_writes_them() {
        assert_eq!(permissions(0o040_755), "drwxr-xr-x");
        assert_eq!(permissions(0o100_644), "-rw-r--r--");
        assert_eq!(permissions(0o104_755), "-rwsr-xr-x");
        assert_eq!(permissions(0o041_777), "drwxrwxrwt");
        assert_eq!(permissions(0o120_777), "lrwxrwxrwx");
    }

    #[test]
    fn names_from_the_server_never_reach_the_terminal_raw() {
        let hostile = entry(b"x\x1b[2J\ny", 0o100_644, 1, 0);
        let all = LsFlags { all: true, ..LsFlags::default() };
        let shown = lines(vec![hostile.clone()], all, None, 0);
        assert_eq!(shown, ["x\\033[2J\\ny"]);
        let long = lines(vec![hostile], LsFlags { long: true, ..all }, None, 0);
        assert!(!long[0].contains('\x1b') && !long[0].contains('\n'), "{long:?}");
        assert!(long[0].contains(" alice ") && long[0].contains(" 100 "), "{long:?}");
    }

    #[test]
    fn listings_hide_dotfiles_sort_and_fill_columns() {
        let entries = vec![
            entry(b"b", 0o100_644, 5, 20),
            entry(b".hidden", 0o100_644, 1, 10),
            entry(b"a", 0o100_644, 9, 10),
            entry(b"c", 0o040_755, 1, 30),
        ];
        let flags = LsFlags::default();
        assert_eq!(lines(entries.clone(), flags, None, 0), ["a", "b", "c"]);
        assert_eq!(lines(entries.clone(), flags, Some(80), 0), ["a  b  c"]);
        assert_eq!(lines(entries.clone(), flags, Some(3), 0), ["a", "b", "c"]);
        let by_time = LsFlags { by_time: true, ..flags };
        assert_eq!(lines(entries.clone(), by_time, None, 0), ["c", "b", "a"]);
        let by_size = LsFlags { by_size: true, reverse: true, ..flags };
        assert_eq!(lines(entries, by_size, None, 0), ["c", "b", "a"]);
    }
}
