//! Catalogs: slugs, revisions, conditional writes and write-only secrets, over the in-memory tables.
//! Must not: go through HTTP (the routes are `server::catalog`'s and tested there).

use super::*;
use serde_json::json;

/// A small catalog: `{name, note?, secret?, env?}`; `name` must not be blank.
struct Things;

impl Kind for Things {
    const TABLE: &'static CatalogTable = &CatalogTable { name: "things" };
    const NOUN: &'static str = "thing";
    const SECRETS: &'static [Secret] = &[
        Secret {
            path: "secret",
            shape: Shape::Value,
        },
        Secret {
            path: "env",
            shape: Shape::Map,
        },
    ];

    fn validate(&self, _id: &str, def: &Map<String, Value>) -> Result<Map<String, Value>, Errors> {
        let o = Obj::root(def);
        let mut errs = Vec::new();
        o.only(&["name", "note", "secret", "env"], &mut errs);
        let name = o.non_blank("name", &mut errs);
        let note = o.opt_string("note", &mut errs);
        let secret = o.opt_string("secret", &mut errs);
        let env = o.string_map("env", &mut errs);
        if !errs.is_empty() {
            return Err(errs);
        }
        let mut out = Map::new();
        out.insert("name".into(), json!(name));
        out.insert("note".into(), json!(note));
        if let Some(s) = secret {
            out.insert("secret".into(), json!(s));
        }
        out.insert("env".into(), json!(env.unwrap_or_default()));
        Ok(out)
    }
}

fn catalog() -> (Arc<dyn CatalogTables>, Catalog<Things>) {
    let db: Arc<dyn CatalogTables> = Arc::new(crate::store::MemoryCatalogs::default());
    let c = Catalog::open(Things, Arc::clone(&db)).unwrap();
    (db, c)
}

fn body(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

#[test]
fn slugs() {
    for good in ["a", "0", "a-b", "abc-123", &"a".repeat(63)] {
        assert!(is_slug(good), "{good}");
    }
    for bad in ["", "-a", "A", "a_b", "a b", "é", &"a".repeat(64)] {
        assert!(!is_slug(bad), "{bad}");
    }
}

#[test]
fn create_get_list() {
    let (_, c) = catalog();
    let b = c.create(&body(json!({"id": "b", "name": "B"}))).unwrap();
    c.create(&body(json!({"id": "a", "name": "A", "note": "n"})))
        .unwrap();
    assert_eq!(b.revision.len(), 64);
    assert_eq!(b.etag(), format!("\"{}\"", b.revision));
    assert_eq!(c.get("b").unwrap().revision, b.revision);
    let list: Value = serde_json::from_str(&c.list_json()).unwrap();
    assert_eq!(list["meta"]["total"], 2);
    assert_eq!(list["data"][0]["id"], "a");
    assert_eq!(list["data"][1]["id"], "b");
    assert_eq!(list["data"][0]["note"], "n");
    assert_eq!(list["data"][1]["revision"], json!(b.revision));
    assert!(matches!(
        c.create(&body(json!({"id": "a", "name": "again"}))),
        Err(CatalogError::Exists { .. })
    ));
    assert!(matches!(c.get("zz"), Err(CatalogError::NotFound { .. })));
    assert!(matches!(c.get("Bad!"), Err(CatalogError::BadId { .. })));
}

#[test]
fn bad_bodies() {
    let (_, c) = catalog();
    assert!(matches!(c.create(b"{"), Err(CatalogError::Malformed(_))));
    assert!(matches!(c.create(b"[1]"), Err(CatalogError::Malformed(_))));
    let Err(CatalogError::Invalid(errs)) = c.create(&body(json!({"id": "Bad_Id", "name": "x"})))
    else {
        panic!("a bad slug is accepted")
    };
    assert_eq!(errs[0].field, "id");
    // The id's problem and the definition's come together.
    let Err(CatalogError::Invalid(errs)) = c.create(&body(json!({"id": "Bad_Id", "name": " "})))
    else {
        panic!("accepted")
    };
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["id", "name"]);
    assert!(matches!(
        c.create(&body(json!({"name": "x"}))),
        Err(CatalogError::Invalid(e)) if e[0].field == "id"
    ));
    let Err(CatalogError::Invalid(errs)) =
        c.create(&body(json!({"id": "x", "name": " ", "note": 3, "what": 1})))
    else {
        panic!("invalid fields are accepted")
    };
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["what", "name", "note"]);
    assert!(c.list().is_empty());
}

#[test]
fn replace_and_delete_need_the_current_revision() {
    let (_, c) = catalog();
    let a = c.create(&body(json!({"id": "a", "name": "A"}))).unwrap();
    let new = body(json!({"name": "A2"}));
    assert!(matches!(
        c.replace("a", None, &new),
        Err(CatalogError::PreconditionRequired { .. })
    ));
    assert!(matches!(
        c.replace("a", Some("nope"), &new),
        Err(CatalogError::BadPrecondition(_))
    ));
    let stale = "0".repeat(64);
    assert!(matches!(
        c.replace("a", Some(&stale), &new),
        Err(CatalogError::Stale { current, .. }) if current == a.revision
    ));
    assert!(matches!(
        c.replace("zz", Some(&a.revision), &new),
        Err(CatalogError::NotFound { .. })
    ));
    assert!(matches!(
        c.replace("a", Some(&a.revision), &body(json!({"id": "b", "name": "x"}))),
        Err(CatalogError::Invalid(e)) if e[0].field == "id"
    ));
    // Quotes are optional; the path's id may be repeated in the body.
    let a2 = c.replace("a", Some(&a.etag()), &new).unwrap();
    assert_ne!(a2.revision, a.revision);
    assert_eq!(a2.created_at, a.created_at);
    assert_eq!(a2.view()["name"], "A2");
    let a3 = c
        .replace(
            "a",
            Some(&a2.revision),
            &body(json!({"id": "a", "name": "A2"})),
        )
        .unwrap();
    assert_eq!(a3.revision, a2.revision, "same definition, same revision");
    assert!(matches!(
        c.delete("a", Some(&a.revision)),
        Err(CatalogError::Stale { .. })
    ));
    assert!(matches!(
        c.delete("a", None),
        Err(CatalogError::PreconditionRequired { .. })
    ));
    c.delete("a", Some(&a3.revision)).unwrap();
    assert!(matches!(c.get("a"), Err(CatalogError::NotFound { .. })));
}

#[test]
fn secrets_are_write_only_and_move_the_revision() {
    let (db, c) = catalog();
    let a = c
        .create(&body(
            json!({"id": "a", "name": "A", "secret": "hunter2", "env": {"K": "v1"}}),
        ))
        .unwrap();
    assert!(!a.view_json().contains("hunter2") && !a.view_json().contains("v1"));
    assert_eq!(a.view()["secret_set"], true);
    assert_eq!(a.view()["env_keys"], json!(["K"]));
    assert_eq!(a.definition["secret"], "hunter2");
    // The view sent back keeps the secrets and the revision.
    let same = c
        .replace("a", Some(&a.revision), a.view_json().as_bytes())
        .unwrap();
    assert_eq!(same.revision, a.revision);
    assert_eq!(same.definition["env"]["K"], "v1");
    // A new secret value: a new revision, no trace of either value in the view.
    let b = c
        .replace(
            "a",
            Some(&a.revision),
            &body(json!({"name": "A", "secret": "other"})),
        )
        .unwrap();
    assert_ne!(b.revision, a.revision);
    assert_eq!(b.definition["secret"], "other");
    assert_eq!(b.definition["env"]["K"], "v1", "an omitted secret is kept");
    // Stored and reloaded: the same entries, revisions and hidden secrets.
    let again = Catalog::open(Things, db).unwrap();
    let r = again.get("a").unwrap();
    assert_eq!(r.revision, b.revision);
    assert_eq!(r.view_json(), b.view_json());
}

#[test]
fn listeners_hear_each_committed_write() {
    let (_, c) = catalog();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = Arc::clone(&heard);
    c.on_change(move |id, change| h.lock().push((id.to_string(), change)));
    let a = c.create(&body(json!({"id": "a", "name": "A"}))).unwrap();
    let _ = c.create(&body(json!({"id": "a", "name": "A"})));
    let a = c
        .replace("a", Some(&a.revision), &body(json!({"name": "B"})))
        .unwrap();
    c.delete("a", Some(&a.revision)).unwrap();
    assert_eq!(
        *heard.lock(),
        [
            ("a".to_string(), ChangeKind::Created),
            ("a".to_string(), ChangeKind::Replaced),
            ("a".to_string(), ChangeKind::Deleted)
        ]
    );
}

#[test]
fn canonical_text_ignores_key_order() {
    let a = json!({"b": [1, {"y": 1, "x": "é"}], "a": null});
    let b: Value = serde_json::from_str(r#"{"a":null,"b":[1,{"x":"é","y":1}]}"#).unwrap();
    assert_eq!(canonical(&a), r#"{"a":null,"b":[1,{"x":"é","y":1}]}"#);
    assert_eq!(canonical(&a), canonical(&b));
}
