//! The object store of `[server.object_store]`: a local directory or an S3-compatible bucket
//! (requests signed with [`sigv4`]), holding whole objects under `/`-separated keys (database
//! snapshots today).
//!
//! Owns: putting, getting, listing and deleting objects, and making a put all-or-nothing (a
//! local object is written beside its final name and renamed into place; an S3 `PUT` is
//! atomic by itself), so a reader never sees a partial object under a final name. Must not
//! touch: what the objects are (see `backup`), settings files or the vault (the caller hands
//! the keys over).

pub mod sigv4;

use crate::base::hex;
use crate::settings::ObjectStoreSettings;
use sigv4::{amz_date, authorization, sha256_hex, uri_encode, Signing};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Names a local put writes before its rename; never listed.
const PARTIAL: &str = ".partial-";

/// One object as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The key (`backups/svc-....db`).
    pub key: String,
    pub size: u64,
}

/// What went wrong, in words for an operator (no secret in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectError(pub String);

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ObjectError {}

fn err(what: impl fmt::Display) -> ObjectError {
    ObjectError(what.to_string())
}

/// An S3-compatible bucket and the keys that sign for it.
#[derive(Clone)]
pub struct S3 {
    pub bucket: String,
    pub region: String,
    /// `https://s3.<region>.amazonaws.com` when `None`.
    pub endpoint: Option<String>,
    pub path_style: bool,
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl fmt::Debug for S3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3")
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("path_style", &self.path_style)
            .finish_non_exhaustive()
    }
}

/// Where objects go.
#[derive(Debug, Clone)]
pub enum ObjectStore {
    Local { root: PathBuf },
    S3(S3),
}

impl ObjectStore {
    /// The store `settings` describe; S3 keys come from `secret` (the vault's
    /// `OBJECT_STORE_ACCESS_KEY_ID` and `OBJECT_STORE_SECRET_ACCESS_KEY`).
    pub fn from_settings(
        settings: &ObjectStoreSettings,
        secret: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ObjectStore, ObjectError> {
        Ok(match settings {
            ObjectStoreSettings::Local { root } => ObjectStore::Local { root: root.clone() },
            ObjectStoreSettings::S3 {
                bucket,
                region,
                endpoint,
                path_style,
            } => {
                let key = |name: &str| {
                    secret(name).filter(|v| !v.is_empty()).ok_or_else(|| {
                        err(format!(
                            "the S3 object store needs the secret {name} (svc secrets set {name} ...)"
                        ))
                    })
                };
                ObjectStore::S3(S3 {
                    bucket: bucket.clone(),
                    region: region.clone(),
                    endpoint: endpoint.clone(),
                    path_style: *path_style,
                    access_key_id: key("OBJECT_STORE_ACCESS_KEY_ID")?,
                    secret_access_key: key("OBJECT_STORE_SECRET_ACCESS_KEY")?,
                })
            }
        })
    }

    /// Where it is, for messages (`/srv/objects` or `s3://bucket`).
    pub fn describe(&self) -> String {
        match self {
            ObjectStore::Local { root } => root.display().to_string(),
            ObjectStore::S3(s) => format!("s3://{}", s.bucket),
        }
    }

    /// Stores the file at `from` under `key`, whole or not at all.
    pub fn put_file(&self, key: &str, from: &Path) -> Result<(), ObjectError> {
        check_key(key)?;
        match self {
            ObjectStore::Local { root } => local_put(root, key, from),
            ObjectStore::S3(s) => {
                let body = std::fs::read(from)
                    .map_err(|e| err(format!("cannot read {}: {e}", from.display())))?;
                s.request("PUT", key, &[], body).map(drop)
            }
        }
    }

    /// Writes the object `key` to `to` (created or replaced).
    pub fn get_to_file(&self, key: &str, to: &Path) -> Result<(), ObjectError> {
        check_key(key)?;
        match self {
            ObjectStore::Local { root } => std::fs::copy(root.join(key), to)
                .map(drop)
                .map_err(|e| err(format!("cannot read {key} from {}: {e}", root.display()))),
            ObjectStore::S3(s) => {
                let body = s.request("GET", key, &[], Vec::new())?;
                std::fs::write(to, body)
                    .map_err(|e| err(format!("cannot write {}: {e}", to.display())))
            }
        }
    }

    /// The object `key` as a reader, and its length (S3: read whole first).
    pub fn open(&self, key: &str) -> Result<(Box<dyn std::io::Read + Send>, u64), ObjectError> {
        check_key(key)?;
        match self {
            ObjectStore::Local { root } => {
                let path = root.join(key);
                let f = std::fs::File::open(&path)
                    .map_err(|e| err(format!("cannot read {key} from {}: {e}", root.display())))?;
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                Ok((Box::new(f), len))
            }
            ObjectStore::S3(s) => {
                let body = s.request("GET", key, &[], Vec::new())?;
                let len = body.len() as u64;
                Ok((Box::new(std::io::Cursor::new(body)), len))
            }
        }
    }

    /// Removes every object under the folder `prefix` (`artifacts/<run>/`), and a local
    /// store's then empty folder; how many were removed.
    pub fn delete_prefix(&self, prefix: &str) -> Result<usize, ObjectError> {
        let all = self.list(prefix)?;
        for o in &all {
            self.delete(&o.key)?;
        }
        if let ObjectStore::Local { root } = self {
            self.sweep_partials(prefix, Duration::ZERO);
            let _ = std::fs::remove_dir(root.join(prefix.trim_end_matches('/')));
        }
        Ok(all.len())
    }

    /// Objects whose key starts with `prefix` (a folder such as `backups/`), by key.
    pub fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, ObjectError> {
        let mut out = match self {
            ObjectStore::Local { root } => local_list(root, prefix)?,
            ObjectStore::S3(s) => s.list(prefix)?,
        };
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Removes `key` (absent already: fine).
    pub fn delete(&self, key: &str) -> Result<(), ObjectError> {
        check_key(key)?;
        match self {
            ObjectStore::Local { root } => match std::fs::remove_file(root.join(key)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(err(format!("cannot delete {key}: {e}")))
                }
                _ => Ok(()),
            },
            ObjectStore::S3(s) => s.request("DELETE", key, &[], Vec::new()).map(drop),
        }
    }

    /// Local only: removes what puts killed midway left beside their final names under
    /// `prefix`, once older than `age` (a put under way is younger; S3 never has any).
    pub fn sweep_partials(&self, prefix: &str, age: Duration) {
        if let ObjectStore::Local { root } = self {
            let dir = root.join(prefix.trim_end_matches('/'));
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().contains(PARTIAL) && older_than(&e.path(), age) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// Whether the file at `path` was last written more than `age` ago.
pub fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|e| e >= age)
}

/// Keys are relative, `/`-separated, without `.`/`..` parts or a partial's marker.
fn check_key(key: &str) -> Result<(), ObjectError> {
    let ok = !key.is_empty()
        && !key.starts_with('/')
        && !key.contains(PARTIAL)
        && key
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(err(format!("`{key}` is not an object key")))
    }
}

/// Copies into `<key>.partial-<random>` beside the final name, syncs it, renames it into
/// place and syncs the directory: a kill at any point leaves the old object (if any) or the
/// new one under `key`, never a part.
fn local_put(root: &Path, key: &str, from: &Path) -> Result<(), ObjectError> {
    let dest = root.join(key);
    let dir = dest.parent().unwrap_or(root);
    std::fs::create_dir_all(dir)
        .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
    let mut rnd = [0u8; 6];
    crate::auth::random_bytes(&mut rnd).map_err(|e| err(e.to_string()))?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = dir.join(format!("{name}{PARTIAL}{}", hex(&rnd)));
    let copy = || -> std::io::Result<()> {
        let mut src = std::fs::File::open(from)?;
        let mut out = std::fs::File::create(&part)?;
        std::io::copy(&mut src, &mut out)?;
        out.flush()?;
        out.sync_all()?;
        std::fs::rename(&part, &dest)?;
        std::fs::File::open(dir)?.sync_all()
    };
    copy().map_err(|e| {
        let _ = std::fs::remove_file(&part);
        err(format!("cannot write {}: {e}", dest.display()))
    })
}

fn local_list(root: &Path, prefix: &str) -> Result<Vec<ObjectInfo>, ObjectError> {
    // Prefixes are folders here (`backups/`): list that directory.
    let folder = prefix.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    let dir = root.join(folder);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(err(format!("cannot list {}: {e}", dir.display()))),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let key = if folder.is_empty() {
            name.clone()
        } else {
            format!("{folder}/{name}")
        };
        let Ok(meta) = e.metadata() else { continue };
        if meta.is_file() && !name.contains(PARTIAL) && key.starts_with(prefix) {
            out.push(ObjectInfo {
                key,
                size: meta.len(),
            });
        }
    }
    Ok(out)
}

impl S3 {
    fn endpoint(&self) -> String {
        self.endpoint
            .as_deref()
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", self.region))
    }

    /// One signed request for `key` (`""`: the bucket itself); the body of a 2xx answer.
    fn request(
        &self,
        method: &str,
        key: &str,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Vec<u8>, ObjectError> {
        let endpoint = self.endpoint();
        let (scheme, host) = endpoint
            .split_once("://")
            .ok_or_else(|| err(format!("endpoint `{endpoint}` is not an http(s) URL")))?;
        let key_path = uri_encode(key, true);
        let (host, path) = if self.path_style {
            (
                host.to_string(),
                format!("/{}/{key_path}", uri_encode(&self.bucket, false)),
            )
        } else {
            (format!("{}.{host}", self.bucket), format!("/{key_path}"))
        };
        let date = amz_date(crate::auth::unix_now());
        let payload = sha256_hex(&body);
        let auth = authorization(&Signing {
            method,
            path: &path,
            query,
            headers: &[
                ("host", &host),
                ("x-amz-content-sha256", &payload),
                ("x-amz-date", &date),
            ],
            payload_sha256: &payload,
            region: &self.region,
            service: "s3",
            access_key_id: &self.access_key_id,
            secret_access_key: &self.secret_access_key,
            amz_date: &date,
        });
        let qs: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
            .collect();
        let url = if qs.is_empty() {
            format!("{scheme}://{host}{path}")
        } else {
            format!("{scheme}://{host}{path}?{}", qs.join("&"))
        };
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(20)))
                .timeout_recv_response(Some(Duration::from_secs(300)))
                .build(),
        );
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("x-amz-content-sha256", &payload)
            .header("x-amz-date", &date)
            .header("authorization", &auth)
            .body(body)
            .map_err(|e| err(format!("{method} {url}: {e}")))?;
        let resp = agent
            .run(req)
            .map_err(|e| err(format!("{method} {url}: {e}")))?;
        let status = resp.status().as_u16();
        let (_, rbody) = resp.into_parts();
        let bytes = rbody
            .into_with_config()
            .read_to_vec()
            .map_err(|e| err(format!("{method} {url}: {e}")))?;
        if (200..300).contains(&status) || (method == "DELETE" && status == 404) {
            return Ok(bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        let code = xml_values(&text, "Code")
            .into_iter()
            .next()
            .unwrap_or_default();
        Err(err(format!("{method} {url} answered {status} {code}")
            .trim()
            .to_string()))
    }

    /// `ListObjectsV2`, following continuation tokens.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, ObjectError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut q = vec![("list-type", "2"), ("prefix", prefix)];
            if let Some(t) = &token {
                q.push(("continuation-token", t));
            }
            let body = self.request("GET", "", &q, Vec::new())?;
            let text = String::from_utf8_lossy(&body);
            for item in text.split("<Contents>").skip(1) {
                let item = item.split("</Contents>").next().unwrap_or("");
                let key = xml_values(item, "Key").into_iter().next();
                let size = xml_values(item, "Size").into_iter().next();
                if let (Some(key), Some(size)) = (key, size) {
                    out.push(ObjectInfo {
                        key: xml_unescape(&key),
                        size: size.parse().unwrap_or(0),
                    });
                }
            }
            let truncated =
                xml_values(&text, "IsTruncated").first().map(String::as_str) == Some("true");
            token = xml_values(&text, "NextContinuationToken")
                .into_iter()
                .next()
                .map(|t| xml_unescape(&t));
            if !truncated || token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Creates the bucket (for tests and first use; an existing one of ours is fine).
    pub fn create_bucket(&self) -> Result<(), ObjectError> {
        match self.request("PUT", "", &[], Vec::new()) {
            Ok(_) => Ok(()),
            Err(e) if e.0.contains("BucketAlreadyOwnedByYou") => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The texts of `<tag>...</tag>` elements (S3's XML answers are flat enough for this).
fn xml_values(text: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    text.split(&open)
        .skip(1)
        .filter_map(|p| p.split(&close).next().map(str::to_string))
        .collect()
}

fn xml_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_relative_and_plain() {
        assert!(check_key("backups/svc-1.db").is_ok());
        for bad in [
            "",
            "/abs",
            "a/../b",
            "a//b",
            "x.partial-1",
            "sp ace",
            "a/./b",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_local_put_is_listed_read_back_and_deleted_and_partials_are_hidden() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ObjectStore::Local {
            root: dir.path().join("objects"),
        };
        let src = dir.path().join("src");
        std::fs::write(&src, b"snapshot bytes").expect("write");
        store.put_file("backups/a.db", &src).expect("put");
        std::fs::write(dir.path().join("objects/backups/b.db.partial-00"), b"half").expect("write");
        let listed = store.list("backups/").expect("list");
        assert_eq!(
            listed,
            vec![ObjectInfo {
                key: "backups/a.db".into(),
                size: 14
            }]
        );
        let back = dir.path().join("back");
        store.get_to_file("backups/a.db", &back).expect("get");
        assert_eq!(std::fs::read(&back).expect("read"), b"snapshot bytes");
        store.sweep_partials("backups/", Duration::ZERO);
        assert!(!dir.path().join("objects/backups/b.db.partial-00").exists());
        store.delete("backups/a.db").expect("delete");
        store.delete("backups/a.db").expect("delete again");
        assert!(store.list("backups/").expect("list").is_empty());
    }

    #[test]
    fn s3_listings_are_read() {
        let xml = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>backups/a&amp;b.db</Key><Size>12</Size></Contents></ListBucketResult>";
        assert_eq!(xml_values(xml, "Size"), vec!["12"]);
        assert_eq!(xml_unescape(&xml_values(xml, "Key")[0]), "backups/a&b.db");
    }
}
