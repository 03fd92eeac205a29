//! Where a browser goes after signing in (`next`): only a path on this server. The dev-token
//! form, the code-host OAuth flow and the sign-in page's script (`web/assets/signin.js`,
//! which mirrors these rules) all pass `next` through [`local_path`]; anything else becomes
//! `/`.
//!
//! Owns: the rule. Must not touch: HTTP (the caller reads `next` and writes `Location`).

/// Longest `next` kept (a longer one becomes `/`).
pub const MAX_NEXT_BYTES: usize = 2048;

/// `next` when it is a path on this origin, else `/`. The value (already decoded once from
/// the form or query) must start with a single `/` and hold no whitespace, and neither it
/// nor what it decodes to (percent escapes undone, up to three times, as a lenient browser
/// or a second hop might) may start with a second `/` or hold a backslash (browsers read
/// `/\host` as `//host`) or a control character (a tab or CR/LF is dropped by browsers' URL
/// parsers, so `/\t/host` is `//host`). Starting with `/` rules out a scheme.
pub fn local_path(next: Option<&str>) -> String {
    match next {
        Some(n) if n.len() <= MAX_NEXT_BYTES && is_local(n) => n.to_string(),
        _ => "/".into(),
    }
}

fn is_local(n: &str) -> bool {
    if n.chars().any(char::is_whitespace) {
        return false;
    }
    let mut text = n.to_string();
    for _ in 0..4 {
        if !plain_path(&text) {
            return false;
        }
        match percent_decoded(&text) {
            Some(d) if d != text => text = d,
            Some(_) => return true,
            // Escapes that are not UTF-8: not a path a page of ours has.
            None => return false,
        }
    }
    // Still changing after three decodings: not a path anyone means.
    false
}

/// One layer of the rule, on text as it stands.
fn plain_path(s: &str) -> bool {
    let rest = match s.strip_prefix('/') {
        Some(r) => r,
        None => return false,
    };
    if rest.starts_with('/') {
        return false;
    }
    !s.chars().any(|c| c == '\\' || c.is_control())
}

/// `s` with `%XX` escapes undone; `None` when the bytes are not UTF-8.
fn percent_decoded(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_pass() {
        for ok in [
            "/",
            "/runs/01J0000000000000000000000",
            "/runs?page=2#top",
            "/runs/a%20b",
            "/search?q=a:b",
            "/javascript:alert(1)",
            "/a/b//c",
        ] {
            assert_eq!(local_path(Some(ok)), ok, "{ok}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn hostile_values_become_the_root() {
        for bad in [
            "",
            "runs",
            "//evil.example",
            "//evil.example/x",
            "/\\evil.example",
            "\\\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/%09/evil.example",
            "/%0d%0a/evil.example",
            "/%2F/evil.example",
            "/%2f%2fevil.example",
            "%2F%2Fevil.example",
            "/%5Cevil.example",
            "/%255C%255Cevil.example",
            "/%25252F%25252Fevil.example",
            "https://evil.example",
            "http:/evil.example",
            "javascript:alert(1)",
            "/x y",
            "/\u{2028}/evil.example",
            "/%ff",
        ] {
            assert_eq!(local_path(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_path(Some(&format!("/{}", "a".repeat(3000)))), "/");
    }
}
