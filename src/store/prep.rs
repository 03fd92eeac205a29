//! Checks and preparation shared by both store implementations, so they agree exactly.
//!
//! Owns: validation of new runs, drafts and imported event lines, minting of the
//! `run.created` event, and SHA-256 helpers for blobs.
//! Must not touch: storage, locks or the hub.

use super::error::StoreError;
use super::fold::{created_properties, fold, CREATED_KEYS};
use super::model::{Event, EventDraft, NewRun, RunRow};
use crate::base::event_kind;
use crate::base::{clock, hex};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// True for 64 lowercase hex digits.
pub fn is_blob_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) const BLOB_REF_PREFIX: &str = "blob://sha256/";

/// Every well-formed `blob://sha256/<hex>` reference inside `text`, in order of appearance.
pub fn blob_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(BLOB_REF_PREFIX) {
        let tail = &rest[at + BLOB_REF_PREFIX.len()..];
        if let Some(candidate) = tail.get(..64) {
            if is_blob_id(candidate) {
                out.push(candidate.to_string());
            }
        }
        rest = tail;
    }
    out
}

pub(crate) fn check_run_id(run_id: &str) -> Result<(), StoreError> {
    if clock::is_canonical_ulid(run_id) {
        Ok(())
    } else {
        Err(StoreError::InvalidRunId {
            run_id: run_id.to_string(),
        })
    }
}

/// The `run.created` event, its serialized payload and the first row for `new`.
pub(crate) fn prepare_created(new: NewRun) -> Result<(Event, String, RunRow), StoreError> {
    let run_id = match &new.id {
        Some(id) => {
            check_run_id(id)?;
            id.clone()
        }
        None => clock::new_ulid(),
    };
    if let Some(parent) = &new.parent_id {
        check_run_id(parent)?;
    }
    let mut properties = created_properties(&new);
    match (&new.extra, &mut properties) {
        (Value::Null, _) => {}
        (Value::Object(extra), Value::Object(props)) => {
            for (k, v) in extra {
                if CREATED_KEYS.contains(&k.as_str()) {
                    return Err(StoreError::InvalidRun {
                        reason: format!("extra key {k:?} collides with a key the store writes"),
                    });
                }
                props.insert(k.clone(), v.clone());
            }
        }
        _ => {
            return Err(StoreError::InvalidRun {
                reason: "extra must be a JSON object".into(),
            })
        }
    }
    let event = EventDraft::new(event_kind::RUN_CREATED, properties).into_event(
        &run_id,
        1,
        clock::new_ulid(),
        clock::now(),
    );
    let payload = encode(&event)?;
    let row = RunRow::from_created(&event);
    Ok((event, payload, row))
}

/// `append_decided`'s second half, for both stores: checks every draft first (a bad one
/// appends nothing), then appends them in order through `append`, folding each committed
/// event onto `row`.
pub(crate) fn append_all(
    run_id: &str,
    row: RunRow,
    drafts: Vec<EventDraft>,
    mut append: impl FnMut(EventDraft) -> Result<Event, StoreError>,
) -> Result<(RunRow, Vec<Event>), StoreError> {
    for d in &drafts {
        check_draft(run_id, d)?;
    }
    let mut row = row;
    let mut events = Vec::with_capacity(drafts.len());
    for d in drafts {
        let e = append(d)?;
        row = fold(row, &e);
        events.push(e);
    }
    Ok((row, events))
}

pub(crate) fn check_draft(run_id: &str, draft: &EventDraft) -> Result<(), StoreError> {
    let bad = |reason: &str| StoreError::InvalidEvent {
        run_id: run_id.to_string(),
        kind: draft.event.clone(),
        reason: reason.to_string(),
    };
    if draft.event.trim().is_empty() {
        return Err(bad("the event kind is empty"));
    }
    if draft.event == event_kind::RUN_CREATED {
        return Err(bad("run.created is written only by create_run"));
    }
    if !draft.properties.is_object() {
        return Err(bad("properties must be a JSON object"));
    }
    Ok(())
}

/// A committed event minted from a draft at `seq`.
pub(crate) fn mint(run_id: &str, seq: u64, draft: EventDraft) -> Event {
    draft.into_event(run_id, seq, clock::new_ulid(), clock::now())
}

pub(crate) fn encode(event: &Event) -> Result<String, StoreError> {
    json_text(event).map_err(|source| StoreError::Encode {
        what: "event",
        run_id: event.run_id.clone(),
        source,
    })
}

/// Bytes a JSON text buffer starts with: most events and row states fit, where serde_json's
/// `to_string` starts at 128 and doubles (three reallocations and copies for a 600-byte
/// text, on every commit).
const JSON_START: usize = 1024;

/// `serde_json::to_string` into a buffer of [`JSON_START`] bytes.
pub(crate) fn json_text<T: serde::Serialize + ?Sized>(v: &T) -> Result<String, serde_json::Error> {
    let mut buf = Vec::with_capacity(JSON_START);
    serde_json::to_writer(&mut buf, v)?;
    String::from_utf8(buf).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

/// Parses and checks the lines of an imported run (one event JSON per line, exact bytes):
/// each is an event object of this run, `seq` runs 1, 2, 3, ... with no gap, the first is
/// `run.created`. Returns the events and the row they fold to. Errors name the line (1-based).
pub(crate) fn parse_import(
    run_id: &str,
    lines: &[String],
) -> Result<(Vec<Event>, RunRow), StoreError> {
    check_run_id(run_id)?;
    let bad = |line: usize, reason: String| StoreError::Import {
        run_id: run_id.to_string(),
        line,
        reason,
    };
    if lines.is_empty() {
        return Err(bad(1, "the run has no events".into()));
    }
    let mut events = Vec::with_capacity(lines.len());
    for (i, text) in lines.iter().enumerate() {
        let line = i + 1;
        if text.contains('\n') || text.ends_with('\r') {
            return Err(bad(line, "an event must be one line without a CR".into()));
        }
        let event: Event = serde_json::from_str(text)
            .map_err(|e| bad(line, format!("not a JSON event object: {e}")))?;
        if event.run_id != run_id {
            return Err(bad(
                line,
                format!("run_id is {:?}, expected {run_id:?}", event.run_id),
            ));
        }
        if event.seq != line as u64 {
            return Err(bad(
                line,
                format!(
                    "seq is {}, expected {line} (seqs start at 1 with no gaps)",
                    event.seq
                ),
            ));
        }
        if line == 1 && event.event != event_kind::RUN_CREATED {
            return Err(bad(
                line,
                format!(
                    "the first event must be run.created, found {:?}",
                    event.event
                ),
            ));
        }
        if line > 1 && event.event == event_kind::RUN_CREATED {
            return Err(bad(line, "run.created may only be the first event".into()));
        }
        if event.event.trim().is_empty() {
            return Err(bad(line, "the event kind is empty".into()));
        }
        if !event.properties.is_object() {
            return Err(bad(line, "properties must be a JSON object".into()));
        }
        events.push(event);
    }
    let mut row = RunRow::from_created(&events[0]);
    for e in &events[1..] {
        row = fold(row, e);
    }
    Ok((events, row))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_refs() {
        let h = sha256_hex(b"abc");
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_blob_id(&h));
        assert!(!is_blob_id(&h.to_uppercase()));
        let text = format!("x blob://sha256/{h} y blob://sha256/zz blob://sha256/{h}\"");
        assert_eq!(blob_refs(&text), vec![h.clone(), h]);
    }

    #[test]
    fn import_checks_name_the_line() {
        let id = clock::new_ulid();
        let l1 = format!(
            r#"{{"seq":1,"id":"a","ts":"t","run_id":"{id}","event":"run.created","properties":{{}}}}"#
        );
        let l3 = format!(
            r#"{{"seq":3,"id":"a","ts":"t","run_id":"{id}","event":"x","properties":{{}}}}"#
        );
        let err = parse_import(&id, &[l1.clone(), l3]).err();
        assert!(
            matches!(err, Some(StoreError::Import { line: 2, .. })),
            "{err:?}"
        );
        let err = parse_import(&id, &[l1, "nope".into()]).err();
        assert!(
            matches!(err, Some(StoreError::Import { line: 2, .. })),
            "{err:?}"
        );
    }
}
