//! The object store of `[server.object_store]`: a local directory or an S3-compatible bucket
//! (requests signed with [`sigv4`]), holding whole objects under `/`-separated keys (database
//! snapshots today).
//!
//! Owns: putting, getting, listing and deleting objects, and making a put all-or-nothing (a
//! local object is written beside its final name and renamed into place; an S3 object of up
//! to one part is one `PUT`, a bigger one a multipart upload that only its completion makes
//! visible and that any failure aborts), so a reader never sees a partial object under a
//! final name. Files stream both ways: memory holds a copy buffer, never a whole object.
//! Must not touch: what the objects are (see `backup`), settings files or the vault (the
//! caller hands the keys over).

pub mod sigv4;

use crate::base::hex;
use crate::settings::ObjectStoreSettings;
use sha2::{Digest, Sha256};
use sigv4::{amz_date, authorization, sha256_hex, uri_encode, Signing};
use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// S3's smallest part (every part of a multipart upload but the last): 5 MiB.
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// S3's largest part: 5 GiB.
pub const MAX_PART_SIZE: u64 = 5 << 30;
/// The part size when `[server.object_store] part_size_mib` is not set: 8 MiB.
pub const DEFAULT_PART_SIZE: u64 = 8 << 20;
/// S3 takes at most this many parts per object; bigger files get bigger parts.
const MAX_PARTS: u64 = 10_000;

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
    /// Files above this many bytes go up as a multipart upload in parts of this size.
    pub part_size: u64,
}

impl fmt::Debug for S3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3")
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("path_style", &self.path_style)
            .field("part_size", &self.part_size)
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
                part_size_mib,
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
                    part_size: part_size_mib.map_or(DEFAULT_PART_SIZE, |m| m << 20),
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
            ObjectStore::S3(s) => s.put_file(key, from),
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
                let (mut body, _) = s.get(key)?;
                let mut out = File::create(to)
                    .map_err(|e| err(format!("cannot write {}: {e}", to.display())))?;
                std::io::copy(&mut body, &mut out)
                    .and_then(|_| out.sync_all())
                    .map_err(|e| err(format!("cannot download {key} to {}: {e}", to.display())))
            }
        }
    }

    /// The object `key` as a reader (streamed from the bucket), and its length.
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
            ObjectStore::S3(s) => s.get(key),
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

    /// Removes what puts killed midway left under `prefix`, once older than `age` (a put
    /// under way is younger): a local store's partial files beside their final names, a
    /// bucket's unfinished multipart uploads (which the bucket keeps, and bills, until
    /// aborted).
    pub fn sweep_partials(&self, prefix: &str, age: Duration) {
        match self {
            ObjectStore::Local { root } => {
                let dir = root.join(prefix.trim_end_matches('/'));
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    if e.file_name().to_string_lossy().contains(PARTIAL)
                        && older_than(&e.path(), age)
                    {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            ObjectStore::S3(s) => match s.unfinished_uploads(prefix) {
                Ok(all) => {
                    for u in all.iter().filter(|u| u.age.is_some_and(|a| a >= age)) {
                        if let Err(e) = s.abort(&u.key, &u.upload_id) {
                            log::warn!("cannot abort the unfinished upload of {}: {e}", u.key);
                        }
                    }
                }
                Err(e) => log::warn!("cannot list unfinished uploads: {e}"),
            },
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
        copy_synced(&mut src, &mut out)?;
        out.sync_all()?;
        std::fs::rename(&part, &dest)?;
        std::fs::File::open(dir)?.sync_all()
    };
    copy().map_err(|e| {
        let _ = std::fs::remove_file(&part);
        err(format!("cannot write {}: {e}", dest.display()))
    })
}

/// Copies `src` to `out` through a small buffer, syncing every 8 MiB: the kernel never
/// holds a big backlog of the copy's dirty pages, whose writeback would hold up the server's
/// own writes (a backup copies the whole database).
fn copy_synced(src: &mut File, out: &mut File) -> std::io::Result<()> {
    const SYNC_EVERY: u64 = 8 << 20;
    let mut buf = vec![0u8; 256 << 10];
    let mut unsynced = 0u64;
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            return out.flush();
        }
        out.write_all(&buf[..n])?;
        unsynced += n as u64;
        if unsynced >= SYNC_EVERY {
            out.sync_data()?;
            unsynced = 0;
        }
    }
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

/// An upload that was started and neither completed nor aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedUpload {
    pub key: String,
    pub upload_id: String,
    /// Since it was started (`None`: the bucket's time was unreadable).
    pub age: Option<Duration>,
}

/// What a request sends.
enum Payload<'a> {
    Bytes(Vec<u8>),
    /// `len` bytes of a file from where it is positioned, with their SHA-256.
    File {
        file: &'a mut File,
        len: u64,
        sha256: String,
    },
}

impl Payload<'_> {
    fn sha256(&self) -> String {
        match self {
            Payload::Bytes(b) => sha256_hex(b),
            Payload::File { sha256, .. } => sha256.clone(),
        }
    }
}

/// A 2xx answer: its headers and body.
struct Answer {
    headers: ureq::http::HeaderMap,
    body: ureq::Body,
}

impl Answer {
    fn text(self, what: &str) -> Result<String, ObjectError> {
        self.body
            .into_with_config()
            .limit(64 << 20)
            .read_to_string()
            .map_err(|e| err(format!("{what}: {e}")))
    }
}

impl S3 {
    fn endpoint(&self) -> String {
        self.endpoint
            .as_deref()
            .map(|e| e.trim_end_matches('/').to_string())
            .unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", self.region))
    }

    /// One agent per operation, so the parts of an upload share a connection.
    fn agent() -> ureq::Agent {
        ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(20)))
                .timeout_recv_response(Some(Duration::from_secs(300)))
                .build(),
        )
    }

    /// One signed request for `key` (`""`: the bucket itself); the body of a 2xx answer.
    fn request(
        &self,
        method: &str,
        key: &str,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Vec<u8>, ObjectError> {
        let what = format!("{method} {key}");
        let answer = self.send(&Self::agent(), method, key, query, Payload::Bytes(body))?;
        answer
            .body
            .into_with_config()
            .limit(64 << 20)
            .read_to_vec()
            .map_err(|e| err(format!("{what}: {e}")))
    }

    /// Sends one request signed with SigV4 (the payload's SHA-256 signed too, so the bucket
    /// refuses bytes changed or cut on the way); the answer when it is a 2xx (or a 404 to a
    /// `DELETE`), else an error with the status and S3's error code.
    fn send(
        &self,
        agent: &ureq::Agent,
        method: &str,
        key: &str,
        query: &[(&str, &str)],
        payload: Payload<'_>,
    ) -> Result<Answer, ObjectError> {
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
        let sha = payload.sha256();
        let auth = authorization(&Signing {
            method,
            path: &path,
            query,
            headers: &[
                ("host", &host),
                ("x-amz-content-sha256", &sha),
                ("x-amz-date", &date),
            ],
            payload_sha256: &sha,
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
        let fail = |e: &dyn fmt::Display| err(format!("{method} {url}: {e}"));
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("x-amz-content-sha256", &sha)
            .header("x-amz-date", &date)
            .header("authorization", &auth);
        let resp = match payload {
            Payload::Bytes(b) => agent.run(req.body(b).map_err(|e| fail(&e))?),
            Payload::File { file, len, .. } => {
                // The length is given, so the body streams from the file with a
                // Content-Length (S3 refuses chunked bodies without aws-chunked signing).
                let mut part = Exact { file, left: len };
                let body = ureq::SendBody::from_reader(&mut part);
                agent.run(
                    req.header("content-length", len)
                        .body(body)
                        .map_err(|e| fail(&e))?,
                )
            }
        }
        .map_err(|e| fail(&e))?;
        let status = resp.status().as_u16();
        let (parts, body) = resp.into_parts();
        if (200..300).contains(&status) || (method == "DELETE" && status == 404) {
            return Ok(Answer {
                headers: parts.headers,
                body,
            });
        }
        let text = body
            .into_with_config()
            .limit(1 << 20)
            .read_to_string()
            .unwrap_or_default();
        let code = xml_values(&text, "Code")
            .into_iter()
            .next()
            .unwrap_or_default();
        Err(err(format!("{method} {url} answered {status} {code}")
            .trim()
            .to_string()))
    }

    /// `GetObject`, streamed: the body as a reader and its length.
    fn get(&self, key: &str) -> Result<(Box<dyn Read + Send>, u64), ObjectError> {
        let answer = self.send(&Self::agent(), "GET", key, &[], Payload::Bytes(Vec::new()))?;
        let len = answer
            .headers
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok((Box::new(answer.body.into_reader()), len))
    }

    /// Stores the file at `from` under `key`: one streamed `PUT` up to one part, else a
    /// multipart upload, aborted on any failure.
    fn put_file(&self, key: &str, from: &Path) -> Result<(), ObjectError> {
        let mut file =
            File::open(from).map_err(|e| err(format!("cannot read {}: {e}", from.display())))?;
        let len = file
            .metadata()
            .map_err(|e| err(format!("cannot read {}: {e}", from.display())))?
            .len();
        let agent = Self::agent();
        if len <= self.part_size.max(1) {
            let read_err = |e: std::io::Error| err(format!("cannot read {}: {e}", from.display()));
            let sha256 = hash_next(&mut file, len).map_err(read_err)?;
            file.seek(SeekFrom::Start(0)).map_err(read_err)?;
            let payload = Payload::File {
                file: &mut file,
                len,
                sha256,
            };
            return self.send(&agent, "PUT", key, &[], payload).map(drop);
        }
        let upload_id = self.create_upload(&agent, key)?;
        let result = self.upload_parts(&agent, key, &upload_id, &mut file, len);
        if let Err(e) = &result {
            // Nothing may stay behind: the parts sent so far are dropped with the upload.
            if let Err(abort) = self.abort(key, &upload_id) {
                log::warn!("the upload of {key} failed ({e}) and cannot be aborted: {abort}");
            }
        }
        result
    }

    /// `CreateMultipartUpload`: the upload's id.
    fn create_upload(&self, agent: &ureq::Agent, key: &str) -> Result<String, ObjectError> {
        let what = format!("starting the upload of {key}");
        let text = self
            .send(
                agent,
                "POST",
                key,
                &[("uploads", "")],
                Payload::Bytes(Vec::new()),
            )?
            .text(&what)?;
        xml_values(&text, "UploadId")
            .into_iter()
            .next()
            .map(|id| xml_unescape(&id))
            .ok_or_else(|| err(format!("{what}: the answer has no UploadId")))
    }

    /// Sends `file` in parts of `part_size` (more when 10,000 would not hold it), then
    /// completes the upload with their ETags.
    fn upload_parts(
        &self,
        agent: &ureq::Agent,
        key: &str,
        upload_id: &str,
        file: &mut File,
        len: u64,
    ) -> Result<(), ObjectError> {
        let size = self
            .part_size
            .max(len.div_ceil(MAX_PARTS))
            .clamp(1, MAX_PART_SIZE);
        let mut etags = Vec::new();
        let mut offset = 0u64;
        while offset < len {
            let n = size.min(len - offset);
            let number = (etags.len() + 1).to_string();
            let read_err = |e: std::io::Error| err(format!("cannot read part {number}: {e}"));
            file.seek(SeekFrom::Start(offset)).map_err(read_err)?;
            let sha256 = hash_next(file, n).map_err(read_err)?;
            file.seek(SeekFrom::Start(offset)).map_err(read_err)?;
            let answer = self.send(
                agent,
                "PUT",
                key,
                &[("partNumber", &number), ("uploadId", upload_id)],
                Payload::File {
                    file: &mut *file,
                    len: n,
                    sha256,
                },
            )?;
            let etag = answer
                .headers
                .get("etag")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| err(format!("part {number} of {key}: the answer has no ETag")))?;
            etags.push(etag);
            offset += n;
        }
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (i, etag) in etags.iter().enumerate() {
            xml.push_str(&format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                i + 1,
                xml_escape(etag)
            ));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let what = format!("completing the upload of {key}");
        let text = self
            .send(
                agent,
                "POST",
                key,
                &[("uploadId", upload_id)],
                Payload::Bytes(xml.into_bytes()),
            )?
            .text(&what)?;
        // S3 may answer 200 and still fail: the body then holds an <Error>.
        if text.contains("<Error>") {
            let code = xml_values(&text, "Code").into_iter().next();
            return Err(err(format!(
                "{what}: {}",
                code.unwrap_or_else(|| "error".into())
            )));
        }
        Ok(())
    }

    /// `AbortMultipartUpload`: the bucket drops the upload's parts.
    pub fn abort(&self, key: &str, upload_id: &str) -> Result<(), ObjectError> {
        self.request("DELETE", key, &[("uploadId", upload_id)], Vec::new())
            .map(drop)
    }

    /// `ListMultipartUploads` under `prefix`: uploads started and neither completed nor
    /// aborted (one page of up to 1,000, the sweep's next round gets the rest).
    pub fn unfinished_uploads(&self, prefix: &str) -> Result<Vec<UnfinishedUpload>, ObjectError> {
        let body = self.request(
            "GET",
            "",
            &[("prefix", prefix), ("uploads", "")],
            Vec::new(),
        )?;
        let text = String::from_utf8_lossy(&body);
        let now = chrono::Utc::now();
        Ok(text
            .split("<Upload>")
            .skip(1)
            .filter_map(|item| {
                let item = item.split("</Upload>").next().unwrap_or("");
                let key = xml_values(item, "Key").into_iter().next()?;
                let upload_id = xml_values(item, "UploadId").into_iter().next()?;
                let age = xml_values(item, "Initiated")
                    .first()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .and_then(|t| (now - t.with_timezone(&chrono::Utc)).to_std().ok());
                Some(UnfinishedUpload {
                    key: xml_unescape(&key),
                    upload_id: xml_unescape(&upload_id),
                    age,
                })
            })
            .collect())
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

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The next `left` bytes of a file, and an error if it ends before them (a body reader
/// that ended early would leave the HTTP client waiting for bytes that never come).
struct Exact<'a> {
    file: &'a mut File,
    left: u64,
}

impl Read for Exact<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file got shorter while it was sent",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The SHA-256 (hex) of the next `len` bytes of `file`, read through a small buffer.
fn hash_next(file: &mut File, len: u64) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 << 10];
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the file got shorter while it was read",
            ));
        }
        h.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hex(&h.finalize()))
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
    fn the_part_size_comes_from_the_settings_within_s3_limits() {
        let toml = |mib: &str| {
            format!(
                "[server.object_store]\nprovider = \"s3\"\nbucket = \"b\"\nregion = \"r\"\n{mib}"
            )
        };
        let keys = |_: &str| Some("k".to_string());
        let part = |text: &str| {
            let s = crate::settings::Settings::parse(text).expect("settings");
            match ObjectStore::from_settings(s.server.object_store.as_ref().expect("store"), &keys)
            {
                Ok(ObjectStore::S3(b)) => b.part_size,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(part(&toml("")), DEFAULT_PART_SIZE);
        assert_eq!(part(&toml("part_size_mib = 16")), 16 << 20);
        for bad in ["part_size_mib = 4", "part_size_mib = 5121"] {
            let e = crate::settings::Settings::parse(&toml(bad)).expect_err(bad);
            assert!(e.to_string().contains("part_size_mib"), "{e}");
        }
    }

    #[test]
    fn s3_listings_are_read() {
        let xml = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>backups/a&amp;b.db</Key><Size>12</Size></Contents></ListBucketResult>";
        assert_eq!(xml_values(xml, "Size"), vec!["12"]);
        assert_eq!(xml_unescape(&xml_values(xml, "Key")[0]), "backups/a&b.db");
    }
}
