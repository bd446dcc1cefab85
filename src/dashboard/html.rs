//! Server-rendered HTML: a writer that escapes every dynamic value, links with encoded query
//! strings, and the page layout (navigation, inline style, no external resources).
//!
//! Markup goes in only as `&'static str` ([`Html::raw`]); everything else (names, offsets,
//! bodies, remarks) goes through [`Html::text`] or an attribute value, which escape it. So a
//! value from the cluster cannot add markup to a page.

use std::fmt::{Display, Write};

/// HTML being written. Only static markup is taken as is.
#[derive(Debug, Default, Clone)]
pub struct Html {
    buf: String,
}

/// Appends `s` escaped for text and for a quoted attribute value.
fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and line breaks are not allowed in HTML text.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => {
                let _ = write!(out, "&#xFFFD;");
            }
            c => out.push(c),
        }
    }
}

/// `s` percent-encoded for a query-string value (everything but RFC 3986's unreserved
/// characters).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A path with query parameters, each value encoded: `href("/group", &[("name", g)])`.
pub fn href(path: &'static str, params: &[(&'static str, &str)]) -> String {
    let mut out = path.to_string();
    for (i, (k, v)) in params.iter().enumerate() {
        out.push(if i == 0 { '?' } else { '&' });
        out.push_str(k);
        out.push('=');
        out.push_str(&url_encode(v));
    }
    out
}

impl Html {
    /// An empty fragment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends static markup.
    pub fn raw(&mut self, markup: &'static str) -> &mut Self {
        self.buf.push_str(markup);
        self
    }

    /// Appends `value` as escaped text.
    pub fn text(&mut self, value: impl Display) -> &mut Self {
        let s = value.to_string();
        push_escaped(&mut self.buf, &s);
        self
    }

    /// Appends another fragment (already safe).
    pub fn append(&mut self, other: &Html) -> &mut Self {
        self.buf.push_str(&other.buf);
        self
    }

    /// Opens `<tag a="v" ...>`: names are static, values escaped.
    pub fn open(&mut self, tag: &'static str, attrs: &[(&'static str, &str)]) -> &mut Self {
        self.buf.push('<');
        self.buf.push_str(tag);
        for (name, value) in attrs {
            self.buf.push(' ');
            self.buf.push_str(name);
            self.buf.push_str("=\"");
            push_escaped(&mut self.buf, value);
            self.buf.push('"');
        }
        self.buf.push('>');
        self
    }

    /// Closes `</tag>`.
    pub fn close(&mut self, tag: &'static str) -> &mut Self {
        self.buf.push_str("</");
        self.buf.push_str(tag);
        self.buf.push('>');
        self
    }

    /// `<tag attrs>text</tag>`.
    pub fn elem(
        &mut self,
        tag: &'static str,
        attrs: &[(&'static str, &str)],
        text: impl Display,
    ) -> &mut Self {
        self.open(tag, attrs).text(text).close(tag)
    }

    /// `<tag attrs>text</tag>` for `pre` and `textarea`, whose first line break an HTML parser
    /// drops: one is written before the text, so a text starting with a line break keeps it.
    pub fn block(
        &mut self,
        tag: &'static str,
        attrs: &[(&'static str, &str)],
        text: impl Display,
    ) -> &mut Self {
        self.open(tag, attrs);
        self.buf.push('\n');
        self.text(text).close(tag)
    }

    /// `<a href="...">text</a>`.
    pub fn link(&mut self, url: &str, text: impl Display) -> &mut Self {
        self.elem("a", &[("href", url)], text)
    }

    /// A table's head row.
    pub fn thead(&mut self, headers: &[&'static str]) -> &mut Self {
        self.raw("<thead><tr>");
        for h in headers {
            self.raw("<th>").raw(h).raw("</th>");
        }
        self.raw("</tr></thead>")
    }

    /// `<td>text</td>`.
    pub fn td(&mut self, text: impl Display) -> &mut Self {
        self.elem("td", &[], text)
    }

    /// A right-aligned number cell.
    pub fn td_num(&mut self, n: impl Display) -> &mut Self {
        self.elem("td", &[("class", "num")], n)
    }

    /// A cell holding a link.
    pub fn td_link(&mut self, url: &str, text: impl Display) -> &mut Self {
        self.raw("<td>").link(url, text).raw("</td>")
    }

    /// A definition list of `(term, value)` pairs.
    pub fn pairs(&mut self, id: &str, pairs: &[(&'static str, String)]) -> &mut Self {
        self.open("dl", &[("id", id), ("class", "pairs")]);
        for (k, v) in pairs {
            self.raw("<dt>")
                .raw(k)
                .raw("</dt><dd>")
                .text(v)
                .raw("</dd>");
        }
        self.close("dl")
    }

    /// A notice box (`kind`: `error`, `ok` or `info`).
    pub fn notice(&mut self, id: &str, kind: &'static str, message: impl Display) -> &mut Self {
        let class = match kind {
            "error" => "notice error",
            "ok" => "notice ok",
            _ => "notice info",
        };
        self.open("div", &[("id", id), ("class", class), ("role", "status")])
            .text(message)
            .close("div")
    }

    /// The markup written so far.
    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        &self.buf
    }

    /// The markup.
    pub fn into_string(self) -> String {
        self.buf
    }
}

/// The navigation entries: (path, label).
const NAV: &[(&str, &str)] = &[
    ("/", "Cluster"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/message", "Message lookup"),
    ("/send", "Send a message"),
];

/// The inline style of every page.
const STYLE: &str = "
:root{--fg:#1f2933;--muted:#616e7c;--line:#d9e2ec;--accent:#0b6bcb;--bg:#f5f7fa}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#102a43;color:#fff;padding:0 24px;display:flex;align-items:center;gap:24px}
header .brand{font-weight:600;font-size:16px;padding:12px 0}
header nav a{color:#bcccdc;text-decoration:none;padding:14px 10px;display:inline-block}
header nav a.active,header nav a:hover{color:#fff;border-bottom:3px solid #f0b429}
header .ns{margin-left:auto;color:#9fb3c8;font-size:12px}
main{padding:16px 24px 40px;max-width:1400px}
h1{font-size:20px;margin:8px 0 12px}
h2{font-size:16px;margin:24px 0 8px}
a{color:var(--accent)}
table{border-collapse:collapse;background:#fff;border:1px solid var(--line);margin:4px 0 12px}
th,td{padding:5px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#eef2f7;font-weight:600;font-size:12px;color:#334e68}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tr.lagging td.lag{color:#b42318;font-weight:600}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:8px 0 12px}
.card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:10px 16px;min-width:150px}
.card .label{color:var(--muted);font-size:12px}
.card .value{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}
dl.pairs{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;background:#fff;border:1px solid var(--line);padding:10px 14px;margin:4px 0 12px}
dl.pairs dt{color:var(--muted)}
dl.pairs dd{margin:0;word-break:break-all}
pre.message-body{background:#fff;border:1px solid var(--line);padding:10px;white-space:pre-wrap;word-break:break-all;max-height:400px;overflow:auto}
.notice{padding:10px 14px;border-radius:6px;margin:8px 0 12px;border:1px solid}
.notice.error{background:#fef3f2;border-color:#fda29b;color:#912018}
.notice.ok{background:#ecfdf3;border-color:#75e0a7;color:#05603a}
.notice.info{background:#eff8ff;border-color:#b2ddff;color:#175cd3}
form.box{background:#fff;border:1px solid var(--line);padding:12px 14px;margin:4px 0 12px;display:grid;grid-template-columns:max-content minmax(200px,520px);gap:8px 12px;align-items:center}
form.box .actions{grid-column:2}
form.inline{display:flex;gap:8px;align-items:center;flex-wrap:wrap;margin:4px 0 12px}
input,select,textarea{font:inherit;padding:4px 6px;border:1px solid #9fb3c8;border-radius:4px}
textarea{min-height:70px}
button{font:inherit;padding:5px 14px;border-radius:4px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
.muted{color:var(--muted)}
svg.chart{background:#fff;border:1px solid var(--line)}
svg.chart .line{fill:none;stroke:var(--accent);stroke-width:2}
svg.chart .area{fill:#0b6bcb22;stroke:none}
svg.chart .grid{stroke:#e4e7eb;stroke-width:1}
svg.chart text{font:11px system-ui,sans-serif;fill:#616e7c}
svg.chart circle{fill:var(--accent)}
";

/// A whole page: `<head>` with the inline style, the navigation (`active` is the current
/// path), the title as `<h1>` and `body`.
pub fn layout(title: &str, active: &str, namesrv: &str, body: &Html) -> String {
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
        // No favicon request (a 404 would be a failed resource load in the console).
        .raw("<link rel=\"icon\" href=\"data:,\">")
        .raw("<title>")
        .text(title)
        .raw(" · RocketMQ dashboard</title><style>")
        .raw(STYLE)
        .raw("</style></head><body><header><span class=\"brand\">RocketMQ dashboard</span><nav>");
    for (path, label) in NAV {
        let attrs: &[(&'static str, &str)] = if *path == active {
            &[("href", path), ("class", "active")]
        } else {
            &[("href", path)]
        };
        h.elem("a", attrs, label);
    }
    h.raw("</nav>")
        .elem(
            "span",
            &[("class", "ns"), ("id", "namesrv")],
            format!("name server {namesrv}"),
        )
        .raw("</header><main>")
        .elem("h1", &[("id", "page-title")], title)
        .append(body)
        .raw("</main></body></html>\n");
    h.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped() {
        let mut h = Html::new();
        h.open("td", &[("data-x", "a\"b<c>&'")])
            .text("<script>alert('x')</script> & \u{1}")
            .close("td");
        assert_eq!(
            h.as_str(),
            "<td data-x=\"a&quot;b&lt;c&gt;&amp;&#39;\">&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &#xFFFD;</td>"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(
            href("/group", &[("name", "%RETRY%g a&b=c")]),
            "/group?name=%25RETRY%25g%20a%26b%3Dc"
        );
        assert_eq!(
            href("/message", &[("topic", "T"), ("key", "k-1.x~")]),
            "/message?topic=T&key=k-1.x~"
        );
    }

    #[test]
    fn the_layout_marks_the_current_page_and_escapes_the_title() {
        let page = layout("<T>", "/topics", "1.2.3.4:9876", &Html::new());
        assert!(page.contains("<a href=\"/topics\" class=\"active\">Topics</a>"));
        assert!(page.contains("<h1 id=\"page-title\">&lt;T&gt;</h1>"));
        assert!(!page.contains("<T>"));
    }
}
