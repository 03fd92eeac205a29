//! A `tools/call` result as text: text blocks as they are, structured content as JSON
//! (unless a text block already carries the same JSON), and short placeholders naming the
//! type and size of images, audio and resources (a model cannot use their bytes as text).
//! Must not truncate (the agent's per-tool limits do) or decide what is an error.

use serde_json::Value;

use super::client::CallResult;

/// The bytes a base64 string decodes to (about).
fn decoded_len(b64: &str) -> usize {
    let t = b64.trim_end_matches('=');
    t.len() * 3 / 4
}

fn human_size(n: usize) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

fn text_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// One content block as text.
fn block(b: &Value) -> String {
    match text_of(b, "type") {
        "text" => text_of(b, "text").to_string(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {}]",
            nonempty(text_of(b, "mimeType"), "unknown type"),
            human_size(decoded_len(text_of(b, "data")))
        ),
        "resource_link" => {
            let mut s = format!("[resource link: {}", text_of(b, "uri"));
            if let Some(m) = b.get("mimeType").and_then(Value::as_str) {
                s.push_str(&format!(", {m}"));
            }
            if let Some(n) = b.get("size").and_then(Value::as_u64) {
                s.push_str(&format!(", {}", human_size(n as usize)));
            }
            s.push(']');
            s
        }
        "resource" => {
            let r = b.get("resource").unwrap_or(&Value::Null);
            let size = match (r.get("text"), r.get("blob")) {
                (Some(Value::String(t)), _) => t.len(),
                (_, Some(Value::String(b64))) => decoded_len(b64),
                _ => 0,
            };
            format!(
                "[resource: {}, {}, {}]",
                text_of(r, "uri"),
                nonempty(text_of(r, "mimeType"), "unknown type"),
                human_size(size)
            )
        }
        other => format!("[{} content]", nonempty(other, "unknown")),
    }
}

fn nonempty<'a>(s: &'a str, or: &'a str) -> &'a str {
    if s.is_empty() {
        or
    } else {
        s
    }
}

/// The whole result as the text a model reads.
pub fn render(r: &CallResult) -> String {
    let mut parts: Vec<String> = r.content.iter().map(block).collect();
    if let Some(s) = &r.structured {
        // Servers are asked to repeat structured content as text; do not show it twice.
        let repeated = r.content.iter().any(|b| {
            text_of(b, "type") == "text"
                && serde_json::from_str::<Value>(text_of(b, "text"))
                    .ok()
                    .as_ref()
                    == Some(s)
        });
        if !repeated {
            parts.push(s.to_string());
        }
    }
    if parts.is_empty() {
        return "(the tool returned no content)".to_string();
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(content: Value, structured: Option<Value>) -> CallResult {
        CallResult {
            content: content.as_array().cloned().unwrap_or_default(),
            structured,
            is_error: false,
        }
    }

    #[test]
    fn text_kept_binary_as_placeholders() {
        let r = result(
            json!([
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "A".repeat(4000), "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "test://r/1", "mimeType": "text/plain", "text": "abc"}}
            ]),
            None,
        );
        assert_eq!(
            render(&r),
            "hello\n[image: image/png, 2.9 KiB]\n[audio: audio/wav, 3 bytes]\n\
             [resource link: file:///a.txt, text/plain]\n[resource: test://r/1, text/plain, 3 bytes]"
        );
    }

    #[test]
    fn structured_content_is_shown_once() {
        let s = json!({"sum": 3});
        let once = result(
            json!([{"type": "text", "text": "{\"sum\": 3}"}]),
            Some(s.clone()),
        );
        assert_eq!(render(&once), "{\"sum\": 3}");
        let only = result(json!([]), Some(s));
        assert_eq!(render(&only), "{\"sum\":3}");
        assert_eq!(
            render(&result(json!([]), None)),
            "(the tool returned no content)"
        );
    }
}
