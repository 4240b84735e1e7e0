//! Aligned text tables for `show` output (VPP-style columns). Pure formatting of strings it is
//! given; it never reads counters itself.

/// How a column's cells are aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Render `rows` under `headers`, columns separated by two spaces, no trailing spaces.
pub(crate) fn render(headers: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = headers.iter().map(|(h, _)| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = width.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|(h, _)| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows.iter()) {
        let mut line = String::new();
        for (i, (cell, (_, align))) in row.iter().zip(headers.iter()).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = width[i].saturating_sub(cell.chars().count());
            match align {
                Align::Left => {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
                Align::Right => {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A ratio with two decimals ("0.00" when the denominator is 0).
pub(crate) fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns_columns() {
        let t = render(
            &[("Name", Align::Left), ("Count", Align::Right)],
            &[
                vec!["a".into(), "1".into()],
                vec!["longer".into(), "12345".into()],
            ],
        );
        assert_eq!(t, "Name    Count\na           1\nlonger  12345\n");
    }
}
