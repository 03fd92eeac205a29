//! The `svc` binary: a thin shell over [`svc::internal::cli::main`], whose exit code it returns.
//! Owns nothing else; must not contain logic (everything lives in the library).

fn main() {
    std::process::exit(svc::internal::cli::main());
}
