//! The external programs some tests need (git, Graphviz's `gvpr`, bubblewrap, a headless
//! browser, the real MCP servers, curl and jq): whether each can run here, what to install, and the message of a test that
//! cannot run without it.
//!
//! `build.rs` compiles this file too (`#[path]`) and sets `cfg(has_<tool>)` for each
//! [`Tool`] that works when the build script runs, or that `SVC_REQUIRE_<TOOL>=1` says this
//! machine must have (CI sets those after installing the tools). A test that needs a tool
//! carries `#[cfg_attr(not(has_<tool>), ignore = "<ignore_reason>")]` and starts with
//! [`require`]. So on a machine without the tool, `cargo test` reports the test as ignored
//! with the reason and the install command (and `cargo test -- --ignored` lists and runs
//! them); under `SVC_REQUIRE_*=1` it is not ignored, and [`require`] fails it with the same
//! words when the tool is missing after all.
//!
//! The probe runs when the build script does (first build, `build.rs` or this file changed,
//! `PATH` or a variable a tool's probe reads changed), not at every `cargo test`: after
//! installing a tool, `touch build.rs`, or run the ignored tests with
//! `cargo test -- --include-ignored`.
//!
//! Must not: use anything but `std` (the build script compiles it alone), or be compiled
//! into a user's build (only for this crate's tests and under the `test-support` feature).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// An external program a test needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `git`: run workspaces (clone, checkpoints, diffs).
    Git,
    /// Graphviz's `gvpr`: the parser's differential test.
    Gvpr,
    /// `bwrap` able to create namespaces here: the container sandbox.
    Bwrap,
    /// Chromium, chromedriver and Python's selenium: the web UI's browser test.
    Browser,
    /// The real MCP servers `.ci/mcp-servers.sh` installs (a Python virtualenv and npm
    /// packages under [`mcp_servers_dir`]) and Node.js: the MCP client's tests.
    McpServers,
    /// `curl` and `jq`: the README's shell examples, run as written.
    Curl,
    /// moto's S3-compatible server (`moto_server`, from PyPI): backups to an S3 bucket.
    Moto,
}

impl Tool {
    /// Every tool, in the order the build script probes them.
    pub const ALL: [Tool; 7] = [
        Tool::Git,
        Tool::Gvpr,
        Tool::Bwrap,
        Tool::Browser,
        Tool::McpServers,
        Tool::Curl,
        Tool::Moto,
    ];

    /// The cfg `build.rs` sets when this tool works (or is required) here.
    pub fn cfg(self) -> &'static str {
        match self {
            Tool::Git => "has_git",
            Tool::Gvpr => "has_gvpr",
            Tool::Bwrap => "has_bwrap",
            Tool::Browser => "has_browser",
            Tool::McpServers => "has_mcp_servers",
            Tool::Curl => "has_curl",
            Tool::Moto => "has_moto",
        }
    }

    /// The variable that, set to `1`, says this machine must have the tool: its tests are
    /// never ignored, and fail when it is missing.
    pub fn require_var(self) -> &'static str {
        match self {
            Tool::Git => "SVC_REQUIRE_GIT",
            Tool::Gvpr => "SVC_REQUIRE_GVPR",
            Tool::Bwrap => "SVC_REQUIRE_BWRAP",
            Tool::Browser => "SVC_REQUIRE_BROWSER",
            Tool::McpServers => "SVC_REQUIRE_MCP",
            Tool::Curl => "SVC_REQUIRE_CURL",
            Tool::Moto => "SVC_REQUIRE_MOTO",
        }
    }

    /// Every environment variable the probe reads besides `PATH`.
    pub fn env_vars(self) -> &'static [&'static str] {
        match self {
            Tool::Git => &["SVC_REQUIRE_GIT"],
            Tool::Gvpr => &["SVC_REQUIRE_GVPR"],
            Tool::Bwrap => &["SVC_REQUIRE_BWRAP"],
            Tool::Browser => &["SVC_REQUIRE_BROWSER", "SVC_CHROMIUM", "SVC_CHROMEDRIVER"],
            Tool::McpServers => &["SVC_REQUIRE_MCP", "SVC_MCP_SERVERS_DIR"],
            Tool::Curl => &["SVC_REQUIRE_CURL"],
            Tool::Moto => &["SVC_REQUIRE_MOTO"],
        }
    }

    /// What the tests need, in words.
    pub fn what(self) -> &'static str {
        match self {
            Tool::Git => "git",
            Tool::Gvpr => "Graphviz's gvpr",
            Tool::Bwrap => "bubblewrap able to create namespaces",
            Tool::Browser => "Chromium, chromedriver and Python's selenium",
            Tool::McpServers => "the MCP servers of .ci/mcp-servers.sh and Node.js",
            Tool::Curl => "curl and jq",
            Tool::Moto => "moto's S3 server (moto_server)",
        }
    }

    /// How to install it on Debian.
    pub fn install(self) -> &'static str {
        match self {
            Tool::Git => "apt-get install git",
            Tool::Gvpr => "apt-get install graphviz",
            Tool::Bwrap => "apt-get install bubblewrap",
            Tool::Browser => "apt-get install chromium chromium-driver && pip install selenium",
            Tool::McpServers => "apt-get install nodejs npm python3-venv && .ci/mcp-servers.sh",
            Tool::Curl => "apt-get install curl jq",
            Tool::Moto => "pip install 'moto[server]'",
        }
    }

    /// Whether the tool works here (looked up on `PATH`); why not, when it does not.
    pub fn check(self) -> Result<(), String> {
        match self {
            Tool::Git => runs("git", &["--version"]),
            Tool::Gvpr => runs("gvpr", &["-V"]),
            Tool::Bwrap => runs(
                "bwrap",
                &[
                    "--unshare-all",
                    "--die-with-parent",
                    "--ro-bind",
                    "/",
                    "/",
                    "--proc",
                    "/proc",
                    "--dev",
                    "/dev",
                    "true",
                ],
            ),
            Tool::Browser => {
                chromium()?;
                chromedriver()?;
                runs("python3", &["-c", "import selenium"])
                    .map_err(|e| format!("Python's selenium: {e}"))
            }
            Tool::McpServers => {
                let stamp = mcp_servers_dir().join(".installed");
                if !stamp.is_file() {
                    return Err(format!("{} is missing", stamp.display()));
                }
                runs("node", &["--version"])
            }
            Tool::Curl => {
                runs("curl", &["--version"])?;
                runs("jq", &["--version"])
            }
            Tool::Moto => runs("moto_server", &["--help"]),
        }
    }

    /// Whether `SVC_REQUIRE_<TOOL>=1` is set.
    pub fn required(self) -> bool {
        std::env::var(self.require_var()).as_deref() == Ok("1")
    }
}

/// What the build script prints for the tools (`build.rs` calls it): `cfg(has_<tool>)` for
/// each tool that works here or `SVC_REQUIRE_<TOOL>=1` requires, the `check-cfg` lines that
/// declare the cfgs, and when to probe again (this file, `PATH`, the tools' variables).
pub fn emit_build_cfgs() {
    println!("cargo:rerun-if-changed={}", file!());
    println!("cargo:rerun-if-env-changed=PATH");
    println!("cargo:rustc-check-cfg=cfg(tool_skips_fixture)");
    for tool in Tool::ALL {
        println!("cargo:rustc-check-cfg=cfg({})", tool.cfg());
        for var in tool.env_vars() {
            println!("cargo:rerun-if-env-changed={var}");
        }
        if tool.required() || tool.check().is_ok() {
            println!("cargo:rustc-cfg={}", tool.cfg());
        }
    }
}

/// The ignore message of a test that needs `tools`: what it needs and how to install it,
/// for example "needs Graphviz's gvpr: apt-get install graphviz". Every
/// `#[cfg_attr(not(has_...), ignore = "...")]` in the tests says exactly this (a unit test
/// checks the sources).
pub fn ignore_reason(tools: &[Tool]) -> String {
    let what: Vec<&str> = tools.iter().map(|t| t.what()).collect();
    let install: Vec<&str> = tools.iter().map(|t| t.install()).collect();
    format!("needs {}: {}", what.join(" and "), install.join("; "))
}

/// The first line of a test that needs `tool`: panics with the test's ignore reason and
/// what went wrong when the tool cannot run here. The test runs only when the build found
/// the tool, `SVC_REQUIRE_<TOOL>=1` required it, or `--ignored` asked for it.
pub fn require(tool: Tool) {
    if let Err(why) = tool.check() {
        let because = if tool.required() {
            format!("{}=1 says this machine has it", tool.require_var())
        } else {
            "the build found it, --ignored ran the test, or the test lacks its \
             #[cfg_attr(not(has_...), ignore = ...)]"
                .to_string()
        };
        panic!("{} ({why}; {because})", ignore_reason(&[tool]));
    }
}

/// Where `.ci/mcp-servers.sh` installs the real MCP servers: `SVC_MCP_SERVERS_DIR`, else
/// `.mcp-servers/` in the repository.
pub fn mcp_servers_dir() -> PathBuf {
    std::env::var_os("SVC_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".mcp-servers"))
}

/// The Chromium binary: `SVC_CHROMIUM`, else `chromium` on `PATH`.
pub fn chromium() -> Result<PathBuf, String> {
    program("SVC_CHROMIUM", "chromium")
}

/// The chromedriver binary: `SVC_CHROMEDRIVER`, else `chromedriver` on `PATH`.
pub fn chromedriver() -> Result<PathBuf, String> {
    program("SVC_CHROMEDRIVER", "chromedriver")
}

fn program(var: &str, name: &str) -> Result<PathBuf, String> {
    match std::env::var_os(var) {
        Some(p) if Path::new(&p).is_file() => Ok(PathBuf::from(p)),
        Some(p) => Err(format!("{var}={} is not a file", Path::new(&p).display())),
        None => on_path(name).ok_or_else(|| format!("`{name}` is not on PATH")),
    }
}

/// The first executable file called `name` in the directories of `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs `program args` (found on `PATH`), expecting success.
fn runs(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("`{program}` cannot start: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        stderr.trim()
    ))
}

// Not in the throwaway crate the last test builds from this file (`tool_skips_fixture`).
#[cfg(all(test, not(tool_skips_fixture)))]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// One test function of the sources that needs tools: where, what its `cfg_attr` says,
    /// and what its body requires.
    struct Needy {
        at: String,
        attribute: Option<(Vec<Tool>, String, String)>,
        required: Vec<Tool>,
    }

    fn tool_of_cfg(cfg: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.cfg() == cfg)
    }

    fn tool_of_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| format!("{t:?}") == name)
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// `not(has_x)` or `not(all(has_x, has_y))` and the message of a
    /// `#[cfg_attr(not(...), ignore = "...")]` in an attribute block, with its text.
    fn ignore_attribute(block: &str) -> Option<(Vec<Tool>, String, String)> {
        let start = block.find("#[cfg_attr(")?;
        let rest = &block[start..];
        let end = rest.find(")]")? + 2;
        let text = rest[..end].to_string();
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let cond = flat.split("not(").nth(1)?.split(')').next()?;
        let cond = cond.trim_start_matches("all(");
        let tools = cond
            .split(',')
            .map(|c| tool_of_cfg(c.trim()))
            .collect::<Option<Vec<Tool>>>()?;
        let message = flat
            .split("ignore = \"")
            .nth(1)?
            .split('"')
            .next()?
            .to_string();
        Some((tools, message, text))
    }

    /// Every function in the crate's sources and tests that has a tool `cfg_attr` or calls
    /// `require(Tool::...)`.
    fn needy_functions() -> Vec<Needy> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        rust_files(&root.join("tests"), &mut files);
        let mut found = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let trimmed = line.trim_start();
                if !trimmed.starts_with("fn ") && !trimmed.starts_with("pub fn ") {
                    continue;
                }
                let indent = &line[..line.len() - trimmed.len()];
                // The attributes and docs right above the function.
                let mut first = i;
                while first > 0 {
                    let above = lines[first - 1].trim();
                    if above.is_empty() || above.ends_with('}') || above.ends_with('{') {
                        break;
                    }
                    if above.ends_with(';') && !above.starts_with("//") {
                        break;
                    }
                    first -= 1;
                }
                let block = lines[first..i].join("\n");
                // Only tests: a support function may call `require` for its callers.
                if !block.contains("#[test]") {
                    continue;
                }
                // The body: up to the closing brace at the function's indentation.
                let close = format!("{indent}}}");
                let last = (i..lines.len())
                    .find(|&k| lines[k] == close)
                    .unwrap_or(lines.len() - 1);
                let body = lines[i..=last].join("\n");
                let mut required: Vec<Tool> = body
                    .split("require(Tool::")
                    .skip(1)
                    .filter_map(|r| tool_of_name(r.split(')').next().unwrap_or("")))
                    .collect();
                // Starting a server run through the support helpers needs git (every run's
                // workspace is a git repository; the helper calls `require` itself).
                let starts_a_run = ["start_run(", "run_to_end("]
                    .iter()
                    .any(|c| body.contains(c));
                if starts_a_run && !required.contains(&Tool::Git) {
                    required.insert(0, Tool::Git);
                }
                let attribute = ignore_attribute(&block);
                let in_this_module = file.ends_with("src/test_tools.rs");
                if (attribute.is_some() || !required.is_empty()) && !in_this_module {
                    let rel = file.strip_prefix(root).unwrap_or(&file);
                    found.push(Needy {
                        at: format!("{}:{}", rel.display(), i + 1),
                        attribute,
                        required,
                    });
                }
            }
        }
        found
    }

    #[test]
    fn every_test_that_requires_a_tool_is_ignored_without_it_with_the_same_words() {
        let needy = needy_functions();
        // The tools' tests exist (git, gvpr, bubblewrap, the browser), so this is no
        // vacuous pass.
        for tool in Tool::ALL {
            assert!(
                needy.iter().any(|n| n.required.contains(&tool)),
                "no test requires {tool:?}"
            );
        }
        let mut wrong = Vec::new();
        for n in &needy {
            match &n.attribute {
                None => wrong.push(format!(
                    "{}: requires {:?} but has no #[cfg_attr(not(...), ignore = ...)]",
                    n.at, n.required
                )),
                Some((tools, message, _)) => {
                    if *tools != n.required {
                        wrong.push(format!(
                            "{}: the cfg_attr names {tools:?}, the body requires {:?}",
                            n.at, n.required
                        ));
                    }
                    let want = ignore_reason(tools);
                    if *message != want {
                        wrong.push(format!("{}: ignore = {message:?}, want {want:?}", n.at));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn no_test_reads_a_tools_require_variable_itself() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        rust_files(&root.join("tests"), &mut files);
        let mut wrong = Vec::new();
        for file in files.iter().filter(|f| !f.ends_with("src/test_tools.rs")) {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                for tool in Tool::ALL {
                    if line.contains(&format!("\"{}\"", tool.require_var())) {
                        wrong.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "a test that skips itself when a tool is missing is invisible in cargo's summary; \
             use #[cfg_attr(not(has_...), ignore = ...)] and test_tools::require:\n{}",
            wrong.join("\n")
        );
    }

    /// A throwaway crate whose build script and tests compile this very file, with one test
    /// per `cfg_attr` the sources use (copied from them), built and tested by cargo with a
    /// `PATH` that holds only the C compiler the linker needs.
    fn fixture(dir: &Path) -> (PathBuf, Vec<(String, Vec<Tool>, String)>) {
        let this = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/test_tools.rs");
        let mut kinds: BTreeMap<String, (Vec<Tool>, String, String)> = BTreeMap::new();
        for n in needy_functions() {
            if let Some((tools, message, text)) = n.attribute {
                let name = tools
                    .iter()
                    .map(|t| format!("{t:?}").to_lowercase())
                    .collect::<Vec<_>>()
                    .join("_");
                kinds.insert(format!("needs_{name}"), (tools, message, text));
            }
        }
        let include = format!(
            "#[allow(dead_code, unexpected_cfgs)]\n#[path = {:?}]\nmod test_tools;\n",
            this.display().to_string()
        );
        let mut lib = format!("{include}use test_tools::{{require, Tool}};\n");
        let mut tests = Vec::new();
        for (name, (tools, message, text)) in kinds {
            let body: String = tools
                .iter()
                .map(|t| format!("    require(Tool::{t:?});\n"))
                .collect();
            lib.push_str(&format!("\n#[test]\n{text}\nfn {name}() {{\n{body}}}\n"));
            tests.push((name, tools, message));
        }
        let write = |rel: &str, text: &str| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap_or(dir)).expect("mkdir");
            std::fs::write(path, text).expect("write the fixture");
        };
        write(
            "Cargo.toml",
            "[package]\nname = \"tool-skips\"\nversion = \"0.0.0\"\nedition = \"2021\"\n",
        );
        write(
            "build.rs",
            &format!(
                "{include}fn main() {{\n    test_tools::emit_build_cfgs();\n    \
                 println!(\"cargo:rustc-cfg=tool_skips_fixture\");\n}}\n"
            ),
        );
        write("src/lib.rs", &lib);
        // Only the C compiler (the linker driver) on PATH: none of the tools.
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        let cc = on_path("cc").expect("a C compiler (cc) on PATH to link Rust");
        std::os::unix::fs::symlink(cc, bin.join("cc")).expect("symlink cc");
        (bin, tests)
    }

    /// `cargo test --lib` in the fixture with `PATH=bin` and no tool variable but `extra`.
    fn cargo_test(dir: &Path, bin: &Path, extra: &[(&str, &str)]) -> (bool, String) {
        let cargo = PathBuf::from(env!("CARGO"));
        let rustc = Some(cargo.with_file_name("rustc"))
            .filter(|r| r.is_file())
            .or_else(|| on_path("rustc"))
            .expect("rustc beside cargo or on PATH");
        let mut cmd = Command::new(&cargo);
        cmd.args(["test", "--lib", "--offline", "--color", "never"])
            .current_dir(dir)
            .env("PATH", bin)
            .env("RUSTC", rustc)
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .envs(extra.iter().copied());
        for tool in Tool::ALL {
            for var in tool.env_vars() {
                if !extra.iter().any(|(k, _)| k == var) {
                    cmd.env_remove(var);
                }
            }
        }
        let out = cmd.output().expect("run cargo");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    #[test]
    fn without_the_tools_cargo_reports_their_tests_as_ignored_with_the_install_command() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (bin, tests) = fixture(tmp.path());
        assert!(tests.len() >= Tool::ALL.len(), "{:?}", tests.len());

        let (ok, out) = cargo_test(tmp.path(), &bin, &[]);
        assert!(ok, "{out}");
        for (name, _, message) in &tests {
            let line = format!("test {name} ... ignored, {message}");
            assert!(out.contains(&line), "no `{line}` in:\n{out}");
        }
        let summary = format!("0 passed; 0 failed; {} ignored", tests.len());
        assert!(out.contains(&summary), "no `{summary}` in:\n{out}");

        // Required by the machine (CI): not ignored, and failing with the same words.
        let (ok, out) = cargo_test(tmp.path(), &bin, &[("SVC_REQUIRE_GVPR", "1")]);
        assert!(!ok, "{out}");
        assert!(out.contains("test needs_gvpr ... FAILED"), "{out}");
        let reason = format!("{} (`gvpr` cannot start", ignore_reason(&[Tool::Gvpr]));
        assert!(out.contains(&reason), "no `{reason}` in:\n{out}");
        assert!(
            out.contains("SVC_REQUIRE_GVPR=1 says this machine has it"),
            "{out}"
        );
        assert!(
            out.contains("test needs_git ... ignored, needs git"),
            "{out}"
        );
    }
}
