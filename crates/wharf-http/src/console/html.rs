//! HTML for the console: escaping, the page frame, tables, links, forms and SVG charts.
//!
//! Owns: how a console page looks. Every piece of text that comes from the database or the
//! request goes through [`esc`] (or [`attr`]) before it is written; nothing here reads data.
//! The page frame links only the console's own assets: no CDN, nothing fetched from elsewhere.

use std::fmt::Write;

use chrono::{DateTime, Utc};

/// Text escaped for an HTML element body or a quoted attribute.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A value for a URL query: percent-encoded (everything but unreserved characters).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query string from pairs, skipping empty values; `""` when none is left.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", query_value(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// An escaped `href` link.
pub fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{}\">{}</a>", esc(href), esc(text))
}

/// A time as the console shows it (UTC, to the second).
pub fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// An optional time, or a dash.
pub fn opt_time(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map(time).unwrap_or_else(|| "—".into())
}

/// An optional text, escaped, or a dash.
pub fn opt(text: &Option<String>) -> String {
    text.as_deref().map(esc).unwrap_or_else(|| "—".into())
}

/// A duration in seconds as "3 s", "4 min", "2 h", "5 d".
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

/// A count that may be a lower bound.
pub fn count(n: i64, capped: bool) -> String {
    if capped {
        format!("≥ {n}")
    } else {
        n.to_string()
    }
}

/// A table: headers, and rows of already-escaped cells.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    if rows.is_empty() {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\" class=\"empty\">nothing here</td></tr>",
            headers.len().max(1)
        );
    }
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// A definition list of (label, already-escaped value).
pub fn fields(rows: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"fields\">");
    for (k, v) in rows {
        let _ = write!(out, "<dt>{}</dt><dd>{v}</dd>", esc(k));
    }
    out.push_str("</dl>");
    out
}

/// A state as a coloured badge.
pub fn state(text: &str) -> String {
    format!(
        "<span class=\"state state-{}\">{}</span>",
        esc(&text.to_ascii_lowercase()),
        esc(text)
    )
}

/// A small SVG sparkline of `values` (oldest first): bars on a fixed 2-px grid, with the
/// maximum written beside it. Rendered on the server, so it needs no script.
pub fn sparkline(values: &[i64], label: &str) -> String {
    let peak = values.iter().copied().max().unwrap_or(0);
    let max = peak.max(1);
    let height = 24.0;
    let width = values.len() * 3;
    let mut out = format!(
        "<svg class=\"spark\" role=\"img\" preserveAspectRatio=\"none\" viewBox=\"0 0 {width} {height}\" width=\"{w}\" height=\"{height}\"><title>{}</title>",
        esc(label),
        w = width * 2,
    );
    for (i, v) in values.iter().enumerate() {
        if *v == 0 {
            continue;
        }
        let h = ((*v as f64 / max as f64) * height).max(1.0);
        let _ = write!(
            out,
            "<rect x=\"{}\" y=\"{:.1}\" width=\"2\" height=\"{:.1}\"/>",
            i * 3,
            height - h,
            h
        );
    }
    let total: i64 = values.iter().sum();
    let _ = write!(
        out,
        "</svg> <span class=\"spark-label\">{total} in all, peak {peak}/min</span>"
    );
    out
}

/// A hidden form field.
pub fn hidden(name: &str, value: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
        esc(name),
        esc(value)
    )
}

/// The navigation entries: (path below the console's base, label).
pub const NAV: [(&str, &str); 7] = [
    ("", "Overview"),
    ("/actions", "Actions"),
    ("/lanes", "Lanes"),
    ("/in-doubt", "In doubt"),
    ("/dead-letters", "Dead letters"),
    ("/inbox", "Inbox"),
    ("/audit", "Audit"),
];

/// Who is signed in, for the page header.
pub struct Viewer<'a> {
    /// The operator's name.
    pub operator: &'a str,
    /// Their role.
    pub role: &'a str,
    /// The sign-out form's CSRF token.
    pub csrf: &'a str,
}

/// A whole page: header with navigation (when someone is signed in), `body` inside `<main>`.
/// `live` marks pages the script may refresh in place.
pub fn page(
    base: &str,
    title: &str,
    viewer: Option<&Viewer<'_>>,
    live: bool,
    body: &str,
) -> String {
    let mut nav = String::new();
    if let Some(v) = viewer {
        nav.push_str("<nav>");
        for (path, label) in NAV {
            let _ = write!(nav, "<a href=\"{}{}\">{}</a>", esc(base), path, esc(label));
        }
        let _ = write!(
            nav,
            "<span class=\"who\">{} · {}</span><form method=\"post\" action=\"{}/sign-out\" class=\"inline\">{}<button type=\"submit\">Sign out</button></form></nav>",
            esc(v.operator),
            esc(v.role),
            esc(base),
            hidden("csrf", v.csrf)
        );
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · wharf console</title>\
<link rel=\"stylesheet\" href=\"{base}/assets/console.css\">\
<script src=\"{base}/assets/console.js\" defer></script></head>\
<body><header><a class=\"brand\" href=\"{base}\">wharf</a>{nav}</header>\
<main{live}><h1>{title}</h1>{body}</main></body></html>",
        title = esc(title),
        base = esc(base),
        live = if live { " data-live=\"10\"" } else { "" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            esc("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(query_value("a b&c/é"), "a%20b%26c%2F%C3%A9");
        assert_eq!(
            query(&[("a", "1"), ("b", ""), ("c", "x y")]),
            "?a=1&c=x%20y"
        );
        assert_eq!(query(&[("a", "")]), "");
    }

    #[test]
    fn ages_read_like_a_person_would_say_them() {
        let check = |s: i64, e: &str| assert_eq!(age(s), e, "{s}");
        check(-5, "0 s");
        check(59, "59 s");
        check(600, "10 min");
        check(7200, "2 h");
        check(3 * 86_400, "3 d");
    }

    #[test]
    fn a_sparkline_has_one_bar_per_nonzero_minute() {
        let svg = sparkline(&[0, 1, 4, 0, 2], "ends");
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("7 in all, peak 4/min"));
    }
}
