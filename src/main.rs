fn main() {
    std::process::exit(svc::cli::main());
}
